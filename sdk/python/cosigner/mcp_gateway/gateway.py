"""The gateway: an MCP server that lists an upstream's tools and sends each call through Cosigner.

    agent (MCP client) ──tools/call──▶ Gateway ──POST /v1/approvals──▶ Cosigner
                                          │◀── decision (policy at once, or a person) ──┘
                                          └──approved: tools/call, exactly those arguments──▶ upstream

It is built on the `mcp` SDK's low-level `Server` (a proxy forwards raw schemas and
arguments; `MCPServer` builds tools from Python functions) and talks to the upstream
through `mcp.Client`. Identity: the tenant is the API key's; the execution id is the MCP
session's (`mcp-` + the Streamable HTTP session id, or one id per stdio connection); the
tool call id is the open call's (see `ledger.py`). Over stdio a call is put to Cosigner as
the server reads it, and the handler takes that answer (see `early.py`). With a lock file
only the tools whose definitions were approved are offered (see `definitions.py`), and a
call that waits for the person at the client may send them to the inbox (see `elicit.py`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import time
import uuid
import weakref
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcp import Client, MCPError
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
from mcp.types import (
    CallToolRequestParams,
    CallToolResult,
    ElicitRequest,
    ElicitRequestURLParams,
    InputRequiredResult,
    ListToolsResult,
    PaginatedRequestParams,
    Tool,
)
from mcp.types.version import MODERN_PROTOCOL_VERSIONS

from cosigner import AsyncCosigner, DeciderKind, Decision, Surface, parameters_digest
from cosigner.errors import CosignerError, GrantRefused, InvalidRequest
from cosigner.mcp_gateway import answers
from cosigner.mcp_gateway.definitions import Definitions
from cosigner.mcp_gateway.early import Connection, GatewayServer, current_connection
from cosigner.mcp_gateway.elicit import Inbox, bare_url
from cosigner.mcp_gateway.ledger import Ledger, OpenCall
from cosigner.mcp_gateway.pins import LockFile, NewTools
from cosigner.mcp_gateway.upstream import UpstreamUnavailable, upstream_client

__all__ = ["Gateway", "GatewayOptions", "UpstreamUnavailable", "upstream_client"]

log = logging.getLogger("cosigner.mcp_gateway")

SESSION_HEADER = "mcp-session-id"
LIST_PAGES = 100
"""At most this many pages of the upstream's tool listing are read to look a name up."""
Context = ServerRequestContext[dict[str, Any], Any]


HINTS = ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")


def hints_of(tool: Tool) -> dict[str, bool]:
    """A listed tool's boolean annotations, as the policy's `when` blocks read them."""
    given = tool.annotations.model_dump(by_alias=True, exclude_none=True) if tool.annotations else {}
    return {k: v for k, v in given.items() if k in HINTS and isinstance(v, bool)}


@dataclass(frozen=True)
class GatewayOptions:
    """How the gateway asks: where approvals are shown, how long it holds a call, names."""

    surface: Surface
    hold_seconds: float = 20.0
    """How long one tools/call may wait for a decision before it is answered "pending";
    keep it under the client's request timeout."""
    tool_prefix: str = ""
    """Put before each tool name for the policy (several gateways, one policy)."""
    rounds: int = 8
    """Input-required rounds one call may take on a 2026-07-28 client before it is answered
    "pending" instead; the `mcp` clients give up after 10."""
    timeout_seconds: int | None = None
    """The approval's timeout; by default the policy's."""
    name: str = "cosigner-mcp-gateway"
    pin: Path | None = None
    """The lock file of approved tool definitions (`--pin`); None: every tool is offered as listed."""
    new_tools: NewTools = NewTools.ASK
    """With `pin`: what to do with a tool the lock file does not name."""
    relist_seconds: float = 30.0
    """With `pin`: a call more than this long after the last listing has the upstream's tools
    listed again in the background, so a definition changed since is held from then on."""
    elicit: bool = True
    """Send the person at the client to the inbox where the client takes URL elicitation and
    the requester approves the call."""
    inbox_url: str | None = None
    """The inbox as approvers' browsers reach it; by default Cosigner's URL + `/inbox/`."""


class Gateway:
    """One upstream MCP server behind Cosigner; `server` is the MCP server to serve."""

    def __init__(self, upstream: Client, cosigner: AsyncCosigner, options: GatewayOptions) -> None:
        """Raises `LockFileError` for an `options.pin` that is not a lock file."""
        self.upstream = upstream
        self.cosigner = cosigner
        self.options = options
        self.ledger = Ledger()
        self.definitions: Definitions | None = None
        if options.pin is not None:
            lock = LockFile.load(options.pin)
            self.definitions = Definitions(
                lock,
                options.new_tools,
                cosigner,
                options.surface,
                options.tool_prefix,
                self._upstream_name,
                self._pinned,
            )
        self.inbox = Inbox(
            cosigner,
            options.surface,
            options.inbox_url or f"{bare_url(cosigner.config.url).rstrip('/')}/inbox/",
            enabled=options.elicit,
        )
        self._tools: frozenset[str] = frozenset()
        """The names the upstream listed last; a call to any other is not put to Cosigner."""
        self._offered: frozenset[str] = frozenset()
        """Of those, the ones offered: all of them, or with a lock file those it pins as listed."""
        self._connections: weakref.WeakSet[Connection] = weakref.WeakSet()
        self._listed_at = time.monotonic()
        self._relisting: asyncio.Task[None] | None = None
        self._schemas: dict[str, dict[str, Any]] = {}
        """Each listed tool's input schema, sent with its calls: an approver edits typed values."""
        self._hints: dict[str, dict[str, bool]] = {}
        """Each listed tool's annotations (readOnlyHint, …), sent with its calls for the policy."""
        self._schemas_refused: dict[str, dict[str, Any]] = {}
        """The input schemas Cosigner refused as a `parametersSchema`, by tool: not sent again."""
        self.server: Server[dict[str, Any]] = GatewayServer(
            options.name,
            version="0.2.0",
            instructions="Tools of another MCP server; each call is checked by Cosigner's policy first, "
            "and some wait for a person to approve them.",
            lifespan=_connection_scope,
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
            connect=self._connect,
            tools_change=self.definitions is not None,
        )
        # The multi-round-trip state a client echoes is sealed (and bound to the tool and
        # arguments), so a client cannot resume someone else's call.
        self.server.middleware.append(
            RequestStateBoundary(RequestStateSecurity.ephemeral(ttl=3600), default_audience=options.name)
        )

    def _connect(self) -> Connection:
        connection = Connection(self.ledger, self._ask, self.options.tool_prefix, self._offers)
        self._connections.add(connection)  # told when a held tool is offered again
        return connection

    async def _list_tools(self, ctx: Context, params: PaginatedRequestParams | None) -> ListToolsResult:
        # As the upstream lists them: names, schemas and annotations; with a lock file, only
        # the tools whose definitions it pins.
        listed = await self.upstream.list_tools(cursor=params.cursor if params else None, cache_mode="bypass")
        offered = self._learn(listed.tools, whole=False)
        connection = ctx.lifespan_context.get("connection")
        if isinstance(connection, Connection):
            connection.session = ctx.session
        if self.definitions is None:
            return listed
        return listed.model_copy(update={"tools": offered})

    def _learn(self, tools: Sequence[Tool], *, whole: bool) -> list[Tool]:
        """Take in the upstream's listing (`whole`, or one page of it); the tools offered."""
        names = {t.name for t in tools}
        self._listed_at = time.monotonic()
        self._schemas.update({t.name: dict(t.input_schema) for t in tools})
        self._hints.update({t.name: hints_of(t) for t in tools})
        offered = self.definitions.review(list(tools)) if self.definitions is not None else list(tools)
        shown = {t.name for t in offered}
        if whole:
            self._tools, self._offered = frozenset(names), frozenset(shown)
        else:
            self._tools, self._offered = self._tools | names, (self._offered - names) | shown
        return offered

    def _offers(self, tool: str) -> bool:
        return tool in self._offered

    async def _lists(self, tool: str) -> bool:
        """Whether the upstream lists `tool`: the names offered so far, else its whole listing again."""
        if tool in self._offered:
            return True
        await self._list_all()
        return tool in self._tools

    async def _list_all(self) -> None:
        """Read the upstream's whole listing and take it in."""
        tools: list[Tool] = []
        cursor: str | None = None
        for _ in range(LIST_PAGES):
            page = await self.upstream.list_tools(cursor=cursor, cache_mode="bypass")
            tools.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None:
                break
        self._learn(tools, whole=True)

    def _relist(self) -> None:
        """List the upstream's tools again in the background (one listing at a time)."""
        if self._relisting is not None and not self._relisting.done():
            return
        self._listed_at = time.monotonic()  # not again at every call while this one runs

        async def relist() -> None:
            try:
                await self._list_all()
            except Exception as exc:  # the next call tries again; calls go on meanwhile
                log.info("could not list the upstream's tools again: %s", type(exc).__name__)

        self._relisting = asyncio.ensure_future(relist())

    def _upstream_name(self) -> str:
        info = self.upstream.server_info
        return info.name if info is not None else "the upstream"

    async def _pinned(self, tool: str) -> None:
        """An approver approved `tool`'s new definition: offer it, and tell the clients that listed."""
        if tool in self._tools:
            self._offered = self._offered | {tool}
        for connection in list(self._connections):
            session = connection.session
            if session is None:
                continue
            try:
                await session.send_tool_list_changed()
            except Exception as exc:  # a client gone since: it lists again when it reconnects
                log.info("could not tell a client the tools changed: %s", type(exc).__name__)

    async def _call_tool(
        self, ctx: Context, params: CallToolRequestParams
    ) -> CallToolResult | InputRequiredResult:
        tool = params.name
        if self.definitions is not None and time.monotonic() - self._listed_at >= self.options.relist_seconds:
            self._relist()
        if tool not in self._offered:
            if not await self._lists(tool):
                # Answered as the upstream answers a name it does not have, and nobody is asked:
                # an approval card for a tool that cannot run would only waste a person's time.
                return answers.unknown_tool(tool)
            held = self.definitions.refusal(tool) if self.definitions is not None else None
            if held is not None:
                return answers.definition_changed(held, tool)
        policy_name = self.options.tool_prefix + tool
        arguments: dict[str, Any] = params.arguments or {}
        resumed = _resumed(params.request_state)
        execution_id = resumed.execution_id if resumed else _execution_of(ctx)
        try:
            digest = parameters_digest(arguments)
        except ValueError as exc:
            return answers.failed(f"INVALID_REQUEST: the arguments of {tool} are not plain JSON: {exc}")
        key = (execution_id, policy_name, digest)
        connection = ctx.lifespan_context.get("connection")
        early = None
        if isinstance(connection, Connection):
            connection.version = connection.version or ctx.protocol_version
            early = None if resumed else connection.take(ctx.request_id, key)
        # Asked as the request was read (early.py), or now.
        call = early.call if early else self.ledger.attach(key, resumed.tool_call_id if resumed else None)
        try:
            decision = await (early.answer if early else self._ask(call, policy_name, arguments))
            call.approval_id = decision.approval_id
            if decision.pending:
                inbox = await self.inbox.for_call(ctx, call, decision, tool)
                if inbox is not None and ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
                    # The first round carries the elicitation; the client answers it and retries.
                    round_ = (resumed.round if resumed else 0) + 1
                    if round_ <= self.options.rounds:
                        state = Resumed(execution_id, call.tool_call_id, round_)
                        return InputRequiredResult(
                            input_requests={"cosigner_inbox": ElicitRequest(params=inbox)},
                            request_state=json.dumps(dataclasses.astuple(state)),
                        )
                decision = await self._hold(decision, ctx if inbox is not None else None, inbox)
        except CosignerError as error:
            self.ledger.close(call)
            return answers.rejected(error, tool)
        except Exception as exc:  # fail closed: no answer from Cosigner, no call
            self.ledger.close(call)
            log.warning("cosigner unreachable: %s", type(exc).__name__)
            return answers.failed(
                f"Cosigner could not be asked about {tool} ({type(exc).__name__}); the tool was not called. "
                "Check COSIGNER_URL and that Cosigner is running, then call it again."
            )
        if decision.pending:
            round_ = (resumed.round if resumed else 0) + 1
            if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS and round_ <= self.options.rounds:
                # The client retries this same request by itself, carrying the state back.
                state = Resumed(execution_id, call.tool_call_id, round_)
                return InputRequiredResult(request_state=json.dumps(dataclasses.astuple(state)))
            return answers.pending(decision, tool)
        if not decision.approved:
            self.ledger.close(call)
            return answers.refused(decision, tool)
        try:
            # An approver's edit: the upstream gets the edited call, never the one asked.
            decision = decision.with_original(arguments)
        except CosignerError as error:
            self.ledger.close(call)
            return answers.rejected(error, tool)
        to_run = dict(decision.parameters or {}) if decision.edited else arguments
        return await self.ledger.run_once(call, lambda: self._run(call, decision, tool, to_run))

    async def _ask(self, call: OpenCall, policy_name: str, arguments: dict[str, Any]) -> Decision:
        """Put the call to Cosigner; its answer at once (the policy's, or pending).

        The gateway forwards whatever call was approved, so an approver may edit it, typed by
        the tool's input schema. A schema Cosigner refuses (one it cannot apply in bounded
        work, such as a recursive `$ref`) would fail every call of the tool: the call is then
        asked again once without it and not editable, and later calls skip that schema.
        """
        tool = policy_name[len(self.options.tool_prefix) :]
        schema = self._schemas.get(tool)
        if schema is not None and self._refused_schema(tool, schema):
            schema = None
        try:
            return await self._request(call, policy_name, arguments, schema)
        except InvalidRequest as error:
            field = str(error.details.get("field", ""))
            if schema is None or not field.startswith("parametersSchema"):
                raise
            self._schemas_refused[tool] = schema
            log.info(
                "Cosigner refused the input schema of %s (%s); its calls are asked without edits", tool, field
            )
        return await self._request(call, policy_name, arguments, None)

    def _refused_schema(self, tool: str, schema: dict[str, Any]) -> bool:
        """Whether Cosigner refused `schema` for `tool` before (a new listing's equal copy too)."""
        refused = self._schemas_refused.get(tool)
        if refused is None:
            return False
        if refused is not schema and refused != schema:
            del self._schemas_refused[tool]  # the upstream changed it: try the new one
            return False
        self._schemas_refused[tool] = schema  # the next call compares by identity
        return True

    async def _request(
        self, call: OpenCall, policy_name: str, arguments: dict[str, Any], schema: dict[str, Any] | None
    ) -> Decision:
        return await self.cosigner.request_approval(
            execution_id=call.key[0],
            tool_call_id=call.tool_call_id,
            tool_name=policy_name,
            parameters=arguments,
            surface=self.options.surface,
            timeout_seconds=self.options.timeout_seconds,
            wait=False,
            accepts_edits=schema is not None,
            parameters_schema=schema,
            tool_annotations=self._hints.get(policy_name[len(self.options.tool_prefix) :]),
        )

    async def _hold(
        self, decision: Decision, ctx: Context | None = None, inbox: ElicitRequestURLParams | None = None
    ) -> Decision:
        """Wait up to `hold_seconds` for the decision; still pending after that is fine. With
        `inbox`, the client is sent it meanwhile: its answer is not waited for, nor used."""
        answered = asyncio.Event()
        if ctx is not None and inbox is not None:
            self.inbox.send(ctx, inbox, answered)
        try:
            if self.options.hold_seconds <= 0:
                return decision
            # The long-poll is cut at the hold, not polled up to it (`wait(timeout=)` polls).
            return await asyncio.wait_for(self.cosigner.wait(decision), self.options.hold_seconds)
        except TimeoutError:
            return decision
        finally:
            answered.set()

    async def _run(
        self, call: OpenCall, decision: Decision, tool: str, arguments: dict[str, Any]
    ) -> CallToolResult:
        """Forward the approved call with exactly the approved arguments, and report what it returned."""
        try:
            await self.cosigner.verify_grant(
                decision.grant,
                arguments,
                tool_name=self.options.tool_prefix + tool,
                tool_call_id=call.tool_call_id,
            )
        except GrantRefused as exc:
            return answers.failed(f"The grant for {tool} did not verify ({exc}); the tool was not called.")
        except Exception as exc:  # fail closed: the keys to check it with could not be fetched
            return answers.failed(
                f"The grant for {tool} could not be checked ({type(exc).__name__}); the tool was not called."
            )
        try:
            result = await self.upstream.call_tool(tool, arguments)
        except Exception as exc:
            error = _upstream_error(exc)
            await self._report(decision, error=error)
            return answers.failed(
                f"The upstream MCP server failed on {tool}: {error}. It may not have run; "
                "check the upstream before calling it again.",
                approvalId=decision.approval_id,
            )
        await self._report(decision, result=result.model_dump(mode="json", by_alias=True, exclude_none=True))
        return result

    async def _report(self, decision: Decision, *, result: Any = None, error: str | None = None) -> None:
        """Put the upstream's answer on the approval's audit record.

        After a person's decision the report is made before the agent gets the result. After
        the policy's alone (a read) it is queued (`report_result(wait=False)`: written at
        once, its answer read later), so that the read is answered after one request to
        Cosigner, not two. `drain()` waits for those.
        """
        by = decision.decided_by
        try:  # the audit record is worth a try, never worth failing a call that already ran
            await self.cosigner.report_result(
                decision, result=result, error=error, wait=by is not None and by.kind is DeciderKind.PERSON
            )
        except Exception as exc:
            log.warning("result of %s not reported: %s", decision.approval_id, type(exc).__name__)

    async def drain(self) -> None:
        """Wait for the results still being reported in the background (and stop waiting for
        definition approvals: they stay open in Cosigner, and a restarted gateway finds them)."""
        self.inbox.close()
        if self._relisting is not None:
            self._relisting.cancel()
        if self.definitions is not None:
            await self.definitions.drain()
        await self.cosigner.flush_reports()


@asynccontextmanager
async def _connection_scope(_: Server[dict[str, Any]]) -> AsyncIterator[dict[str, Any]]:
    # Entered once per stdio (or in-process) connection: that connection is one execution.
    connection = current_connection()
    if connection is None:  # not served by `GatewayServer.run` (Streamable HTTP, in-process 2026-07-28)
        yield {"execution_id": f"mcp-{uuid.uuid4().hex}"}
        return
    yield {"execution_id": connection.execution_id, "connection": connection}


def _execution_of(ctx: Context) -> str:
    """The execution id of the MCP session this request belongs to."""
    request = ctx.request
    headers: Mapping[str, str] | None = getattr(request, "headers", None)
    if headers is None:
        return str(ctx.lifespan_context["execution_id"])
    session = headers.get(SESSION_HEADER)
    if session:
        return f"mcp-{session}"
    # Stateless HTTP has no session: each call is its own execution (resumed by its state).
    return f"mcp-{uuid.uuid4().hex}"


@dataclass(frozen=True)
class Resumed:
    """What a multi-round-trip state carries from one round of a call to the next."""

    execution_id: str
    tool_call_id: str
    round: int


def _resumed(state: str | None) -> Resumed | None:
    """The state this gateway sealed into an earlier round (the boundary has checked the seal)."""
    if state is None:
        return None
    execution_id, tool_call_id, round_ = json.loads(state)
    return Resumed(str(execution_id), str(tool_call_id), int(round_))


def _upstream_error(exc: Exception) -> str:
    if isinstance(exc, MCPError):
        return f"error {exc.error.code}: {exc.error.message}"
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
