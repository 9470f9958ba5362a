"""Sending the person at the client to the inbox, by URL-mode elicitation.

When a call waits for a person and that person is the one at the client (the requester the
`--surface` names is among the request's approvers), the gateway may show them where to
answer: an `elicitation/create` in URL mode whose URL is the request's page in Cosigner's
inbox (`…/inbox/approvals/apv_…`). Only a client that declares URL-mode elicitation gets
one, once per call. The URL carries the approval id and nothing else: no key, no token, no
session. The person signs in there as the inbox requires, so the link is worth nothing to
anyone who is not an approver of that request (the MCP specification forbids a URL that is
pre-authenticated or carries credentials).

The client's answer to it (accept, decline, cancel, with or without form content) is never
taken as a decision: accepting only means the client may open the page. The call still
waits for Cosigner's decision, made by an approver where the policy asked them.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any
from urllib.parse import quote, urlsplit

from mcp.server.context import ServerRequestContext
from mcp.types import ElicitRequestURLParams

from cosigner import AsyncCosigner, Decision, Surface
from cosigner.enums import AuditEvent
from cosigner.mcp_gateway.ledger import OpenCall

__all__ = ["Inbox", "bare_url", "inbox_request", "requester_approves", "url_mode"]

log = logging.getLogger("cosigner.mcp_gateway")

Context = ServerRequestContext[Any, Any]


class Inbox:
    """The gateway's elicitations: whom to send to the inbox at `url`, and the ones sent."""

    def __init__(self, cosigner: AsyncCosigner, surface: Surface, url: str, *, enabled: bool = True) -> None:
        self._cosigner = cosigner
        self._surface = surface
        self.url = url
        self.enabled = enabled
        self._sent: set[asyncio.Task[None]] = set()
        """Elicitations sent and not answered yet (a person may take their time to open one)."""

    async def for_call(
        self, ctx: Context, call: OpenCall, decision: Decision, tool: str
    ) -> ElicitRequestURLParams | None:
        """The elicitation sending the person at the client to `decision` in the inbox: once per
        call, only to a client that takes URL elicitation, only when they approve the call."""
        if not self.enabled or call.elicited or not url_mode(ctx):
            return None
        call.elicited = True  # decided once, before the await: a racing re-call does not ask again
        if not await requester_approves(self._cosigner, decision, self._surface):
            return None
        return inbox_request(self.url, decision, tool)

    def send(self, ctx: Context, request: ElicitRequestURLParams, answered: asyncio.Event) -> None:
        """Send `request` to a client of the handshake protocols, without waiting for its answer."""
        sent = asyncio.ensure_future(self._send(ctx, request, answered))
        self._sent.add(sent)
        sent.add_done_callback(self._sent.discard)

    def close(self) -> None:
        """Stop waiting for the answers to elicitations sent (nothing waits on them)."""
        for sent in list(self._sent):
            sent.cancel()

    async def _send(self, ctx: Context, request: ElicitRequestURLParams, answered: asyncio.Event) -> None:
        # While the call is held it goes with the call (on Streamable HTTP, on the call's own
        # stream); once the call is answered ("pending"), on the connection's own channel.
        related = None if answered.is_set() else ctx.request_id
        try:
            answer = await ctx.session.elicit_url(
                request.message, request.url, str(request.elicitation_id), related_request_id=related
            )
        except Exception as exc:
            log.info("the client did not take the inbox elicitation: %s", type(exc).__name__)
            return
        # Accept means only that the client may open the page: never an approval, whatever
        # content comes with it.
        log.debug("the client answered the inbox elicitation %s: %s", request.elicitation_id, answer.action)


def url_mode(ctx: Context) -> bool:
    """Whether the client of this request declared URL-mode elicitation."""
    capabilities = ctx.session.client_capabilities
    elicitation = capabilities.elicitation if capabilities is not None else None
    return elicitation is not None and elicitation.url is not None


def bare_url(url: str) -> str:
    """`url` with no user name, password, query or fragment: nothing that could authenticate."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = f"[{host}]" if ":" in host else host
    if parts.port is not None:
        netloc += f":{parts.port}"
    return f"{parts.scheme}://{netloc}{parts.path}"


def inbox_request(inbox: str, decision: Decision, tool: str) -> ElicitRequestURLParams:
    """The URL-mode elicitation that sends the person to `decision`'s page in the inbox at `inbox`."""
    url = f"{bare_url(inbox).rstrip('/')}/approvals/{quote(decision.approval_id, safe='')}"
    return ElicitRequestURLParams(
        message=f"Approval {decision.approval_id} for {tool} waits for a person, and you are one of its "
        "approvers: open it in Cosigner's inbox, sign in, and approve or deny it there. Accepting here "
        "only opens the page; it approves nothing.",
        url=url,
        elicitation_id=f"cosigner-{decision.approval_id}",
    )


def requester_id(surface: Surface) -> str | None:
    """The id the requester of a `--surface` has among a route's approvers."""
    for name in ("user_id", "phone"):
        found = getattr(surface, name, None)
        if isinstance(found, str):
            return found
    return None


async def requester_approves(cosigner: AsyncCosigner, decision: Decision, surface: Surface) -> bool:
    """Whether the requester may answer `decision`: the route the policy chose (its audit
    record's `requested` event) names them, and separation of duties does not discount them.
    False when that cannot be read: the call then only waits, as without elicitation."""
    requester = requester_id(surface)
    if requester is None:
        return False
    try:
        events = await cosigner.audit(decision)
    except Exception as exc:
        log.info("could not read who approves %s: %s", decision.approval_id, type(exc).__name__)
        return False
    for event in events:
        if event.get("event") != AuditEvent.REQUESTED:
            continue
        data = event.get("data") or {}
        route = data.get("route") or {}
        approvers = route.get("approvers") or ()
        return requester in approvers and not data.get("separateDuties")
    return False
