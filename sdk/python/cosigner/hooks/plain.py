"""The hook's own client for Cosigner: the standard library only, for the requests it makes.

`cosigner-hook` is a new Python process for every tool call, so loading the SDK's client
(pydantic's wire models, httpx, the JOSE stack) would cost more than asking. This client
makes exactly the hook's requests: `POST /v1/approvals`, the long-poll
`GET /v1/approvals/{id}?wait=N`, `POST /v1/approvals/{id}/cancel` and a `GET` when a cancel
comes too late. Each answer is read as strictly as the SDK's models read it, and more: a body
that is not JSON, is not one of the two approval shapes (`approval_start`,
`approval_decided`), has a field they do not have or lacks one, or is about another approval
or another call (its ids, tool or parameters digest differ) is a `BadAnswer`, which the hook
answers with deny. Only an `approval_decided` for exactly the call asked says `approved`.
"""

from __future__ import annotations

import http.client
import json
import random
import re
import time
from datetime import datetime
from urllib.parse import urlsplit

from cosigner import strict_json
from cosigner.digest import parameters_digest
from cosigner.hooks.event import ToolUse

TYPE_CHECKING = False  # typing.TYPE_CHECKING without loading typing
if TYPE_CHECKING:
    from typing import Any

__all__ = ["Answer", "BadAnswer", "Call", "PlainClient", "Refused", "Unreachable"]

MAX_ANSWER = 8 * 1024 * 1024
"""Bytes of an answer read at most (it echoes parameters of up to 1 MiB); more is a BadAnswer."""
MAX_WAIT = 60  # the server's long-poll limit, in seconds
RETRY_STATUSES = frozenset({502, 503, 504})
APPROVAL_ID = re.compile(r"^apv_[A-Za-z0-9_-]{20}$")  # cosigner.wire.APPROVAL_ID_PATTERN

STATUSES = frozenset({"pending", "approved", "denied", "expired", "cancelled", "completed", "failed"})
# The fields of `cosigner.answers.ApprovalStart` and `.Decision` (a test keeps them equal).
START_FIELDS = frozenset(
    {
        "type", "approvalId", "executionId", "toolCallId", "toolName", "parameters", "parametersDigest",
        "timeout", "startedAt", "expiresAt", "status", "shortCode", "quorum", "approvals", "operation",
        "preview", "argumentsDigest", "editable", "currentCall", "coalesced",
    }
)  # fmt: skip
START_REQUIRED = frozenset(
    {
        "type", "approvalId", "executionId", "toolCallId", "toolName", "parameters", "parametersDigest",
        "timeout", "startedAt", "expiresAt", "status",
    }
)  # fmt: skip
DECIDED_FIELDS = frozenset(
    {
        "type", "approvalId", "executionId", "toolCallId", "toolName", "status", "decidedBy", "decidedAt",
        "comment", "parametersDigest", "grant", "quorum", "approvals", "traceId", "operation",
        "argumentsDigest", "outcome", "code", "receipt", "detail", "edited", "parameters", "editedFields",
        "originalDigest", "digest",
    }
)  # fmt: skip
DECIDED_REQUIRED = frozenset(
    {
        "type", "approvalId", "executionId", "toolCallId", "toolName", "status", "decidedBy", "decidedAt",
        "comment", "parametersDigest", "grant",
    }
)  # fmt: skip
# Each `decidedBy` kind's fields (`cosigner.answers.Decider`): (required, optional).
DECIDERS: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "person": (frozenset({"kind", "surface", "userId"}), frozenset({"teamId"})),
    "timeout": (frozenset({"kind"}), frozenset()),
    "policy": (frozenset({"kind", "rule"}), frozenset()),
    "agent": (frozenset({"kind"}), frozenset()),
    "system": (frozenset({"kind", "code"}), frozenset()),
    "allowance": (frozenset({"kind", "allowanceId", "surface", "userId"}), frozenset({"teamId"})),
}


class BadAnswer(Exception):
    """Cosigner's answer is not an approval of the call asked; the message says what is wrong."""


class Refused(Exception):
    """Cosigner answered with an error body (or an error status without one)."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.status = status
        self.code = code
        self.message = message


class Unreachable(Exception):
    """Cosigner could not be reached, or did not answer within the request's time."""


class Call:
    """The call asked about, as every answer about it must describe it."""

    __slots__ = ("approval_id", "digest", "execution_id", "parameters", "tool_call_id", "tool_name")

    def __init__(
        self, execution_id: str, tool_call_id: str, tool_name: str, parameters: dict[str, Any], digest: str
    ) -> None:
        self.execution_id = execution_id
        self.tool_call_id = tool_call_id
        self.tool_name = tool_name
        self.parameters = parameters
        self.digest = digest
        self.approval_id: str | None = None  # once Cosigner named it, every later answer is about it

    @classmethod
    def of(cls, use: ToolUse) -> Call:
        """The call of one tool use: the session is the execution, the tool use the call."""
        return cls(
            use.session_id, use.tool_use_id, use.tool_name, use.tool_input, parameters_digest(use.tool_input)
        )


class Answer:
    """An approval about the call, pending or decided, as the hook needs it."""

    __slots__ = ("approval_id", "comment", "decider", "rule", "status", "surface", "user_id")

    def __init__(
        self,
        approval_id: str,
        status: str,
        decider: str | None = None,
        user_id: str | None = None,
        surface: str | None = None,
        rule: str | None = None,
        comment: str | None = None,
    ) -> None:
        self.approval_id = approval_id
        self.status = status
        self.decider = decider
        self.user_id = user_id
        self.surface = surface
        self.rule = rule
        self.comment = comment

    @property
    def settled(self) -> bool:
        """Decided (every approval the hook asks for is a tool call, never an operation)."""
        return self.status != "pending"


def read_answer(raw: bytes, call: Call) -> Answer:
    """The answer in `raw` about `call`, or BadAnswer; remembers the approval id on `call`."""
    reading = strict_json.read(raw)
    if reading.error is not None or reading.ambiguous:
        raise BadAnswer("the answer is not plain JSON")
    body = reading.value
    if not isinstance(body, dict):
        raise BadAnswer("the answer is not a JSON object")
    kind = body.get("type")
    if kind == "approval_start":
        fields, required = START_FIELDS, START_REQUIRED
    elif kind == "approval_decided":
        fields, required = DECIDED_FIELDS, DECIDED_REQUIRED
    else:
        raise BadAnswer(f"the answer's type {str(kind)[:40]!r} is not an approval of a tool call")
    _keys(body, fields, required, "the answer")
    approval_id = _text(body, "approvalId")
    if not APPROVAL_ID.fullmatch(approval_id):
        raise BadAnswer("approvalId is not an approval id")
    if call.approval_id is not None and approval_id != call.approval_id:
        raise BadAnswer(f"the answer is about {approval_id}, not {call.approval_id}")
    status = _text(body, "status")
    if status not in STATUSES:
        raise BadAnswer(f"status {status[:40]!r} is not an approval status")
    _same_call(body, call, coalesced=kind == "approval_start" and body.get("coalesced") is True)
    for name in ("startedAt", "expiresAt", "decidedAt"):
        if name in body:
            _moment(body, name)
    if body.get("operation") is not None or body.get("edited") not in (None, False):
        raise BadAnswer("the answer is about an operation or an edited call, not the call asked")
    quorum = body.get("quorum", 1)
    if type(quorum) is not int or quorum < 1:
        raise BadAnswer("quorum is not a positive integer")
    if kind == "approval_start":
        if status != "pending":
            raise BadAnswer(f"an approval_start says {status!r}; only a decision may")
        call.approval_id = approval_id
        return Answer(approval_id, status)
    if status == "pending":
        raise BadAnswer("an approval_decided says 'pending'")
    comment = body["comment"]
    if comment is not None and not isinstance(comment, str):
        raise BadAnswer("comment is not a string")
    if body["grant"] is not None and not isinstance(body["grant"], str):
        raise BadAnswer("grant is not a string")
    by = body["decidedBy"]
    if not isinstance(by, dict) or by.get("kind") not in DECIDERS:
        raise BadAnswer("decidedBy is not one of Cosigner's deciders")
    needed, optional = DECIDERS[by["kind"]]
    _keys(by, needed | optional, needed, "decidedBy")
    for name in by:
        if not (isinstance(by[name], str) or (name == "teamId" and by[name] is None)):
            raise BadAnswer(f"decidedBy.{name} is not a string")
    call.approval_id = approval_id
    return Answer(
        approval_id, status, by["kind"], by.get("userId"), by.get("surface"), by.get("rule"), comment
    )


def _same_call(body: dict[str, Any], call: Call, *, coalesced: bool) -> None:
    if _text(body, "executionId") != call.execution_id:
        raise BadAnswer("the answer is about another execution than this session")
    if _text(body, "toolName") != call.tool_name:
        raise BadAnswer("the answer is about another tool than the one asked")
    if _text(body, "parametersDigest") != call.digest:
        raise BadAnswer("the answer's parametersDigest is not this call's: it is about other parameters")
    tool_call_id = _text(body, "toolCallId")
    if tool_call_id != call.tool_call_id:
        # An identical pending request is one question: its answer is this call's (the same
        # execution, tool and parameters), under the first request's toolCallId from then on.
        if not coalesced:
            raise BadAnswer("the answer is about another tool use than this one")
        call.tool_call_id = tool_call_id


def _keys(body: dict[str, Any], known: frozenset[str], required: frozenset[str], where: str) -> None:
    unknown = sorted(set(body) - known)
    if unknown:
        raise BadAnswer(f"{where} has a field Cosigner does not send ({unknown[0][:40]!r})")
    missing = sorted(required - set(body))
    if missing:
        raise BadAnswer(f"{where} lacks {missing[0]!r}")


def _text(body: dict[str, Any], name: str) -> str:
    value = body.get(name)
    if not isinstance(value, str) or not value:
        raise BadAnswer(f"{name} is not a non-empty string")
    return value


def _moment(body: dict[str, Any], name: str) -> None:
    try:
        datetime.fromisoformat(_text(body, name))
    except ValueError:
        raise BadAnswer(f"{name} is not an ISO 8601 time") from None


class PlainClient:
    """Cosigner's approvals API through `http.client`: one connection per request."""

    def __init__(self, url: str, api_key: str, *, timeout: float = 10.0, retry_for: float = 0.0) -> None:
        parts = urlsplit(url.strip())
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"COSIGNER_URL {url[:200]!r} is not an http(s) URL, e.g. http://127.0.0.1:8000")
        self.https = parts.scheme == "https"
        self.host = parts.hostname
        self.port = parts.port
        self.base = parts.path.rstrip("/")
        self.timeout = timeout
        self.retry_for = retry_for
        self.headers = {
            "Authorization": f"Bearer {api_key.strip()}",
            "User-Agent": "cosigner-sdk-python (cosigner-hook)",
            "Accept": "application/json",
        }

    def create(self, call: Call, surface: dict[str, str], reason: str, timeout_seconds: int) -> Answer:
        """`POST /v1/approvals` for the call (idempotent: asking again finds the same approval)."""
        body = {
            "executionId": call.execution_id,
            "toolCallId": call.tool_call_id,
            "toolName": call.tool_name,
            "parameters": call.parameters,
            "reason": reason,
            "surface": surface,
            "timeoutSeconds": timeout_seconds,
        }
        content = json.dumps(body, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()
        return read_answer(self.send("POST", "/v1/approvals", content, self.timeout, idempotent=True), call)

    def wait(self, call: Call, seconds: float) -> Answer:
        """One long-poll of the call's approval: its answer when decided or after `seconds` (≤ 60)."""
        wait = max(1, min(MAX_WAIT, int(seconds)))
        path = f"{self._path(call)}?wait={wait}"
        return read_answer(
            self.send("GET", path, None, wait + max(self.timeout, 15.0), idempotent=True), call
        )

    def get(self, call: Call) -> Answer:
        """The call's approval as it is now."""
        return read_answer(self.send("GET", self._path(call), None, self.timeout, idempotent=True), call)

    def cancel(self, call: Call) -> Answer:
        """Withdraw the call's pending approval (sent once: it is not repeated on doubt)."""
        return read_answer(self.send("POST", f"{self._path(call)}/cancel", None, self.timeout), call)

    def _path(self, call: Call) -> str:
        if call.approval_id is None:
            raise BadAnswer("no approval id to ask about")
        return f"/v1/approvals/{call.approval_id}"

    def send(
        self, method: str, path: str, content: bytes | None, timeout: float, *, idempotent: bool = False
    ) -> bytes:
        """The 2xx answer's body; Refused for an error answer, Unreachable at once for a refused
        connection, else once retrying (only where repeating is safe, with backoff, for
        `retry_for` seconds) gave up."""
        started = time.monotonic()
        delay = 0.05
        while True:
            try:
                status, body = self._once(method, path, content, timeout, idempotent)
            except _Retry as exc:
                if time.monotonic() - started >= self.retry_for:
                    raise Unreachable(str(exc)) from None
                time.sleep(delay * random.uniform(0.5, 1.0))
                delay = min(delay * 2, 2.0)
                continue
            if status in (200, 201):
                return body
            raise _refusal(status, body)

    def _once(
        self, method: str, path: str, content: bytes | None, timeout: float, idempotent: bool
    ) -> tuple[int, bytes]:
        kind = http.client.HTTPSConnection if self.https else http.client.HTTPConnection
        conn = kind(self.host, self.port, timeout=timeout)
        headers = dict(self.headers)
        if content is not None:
            headers["Content-Type"] = "application/json"
        try:
            try:
                conn.connect()
            except ConnectionRefusedError as exc:
                # Nothing listens there: the hook answers at once rather than keep the agent
                # waiting on a Cosigner that is down or a COSIGNER_URL that is wrong.
                raise Unreachable(f"{type(exc).__name__}: {exc}") from None
            except OSError as exc:  # no route, a name not resolved, a timeout: nothing was sent
                raise _Retry(f"{type(exc).__name__}: {exc}") from None
            try:
                conn.request(method, self.base + path, body=content, headers=headers)
                response = conn.getresponse()
                body = response.read(MAX_ANSWER + 1)
            except (OSError, http.client.HTTPException) as exc:
                if idempotent:
                    raise _Retry(f"{type(exc).__name__}: {exc}") from None
                raise Unreachable(f"{type(exc).__name__}: {exc}") from None
        finally:
            conn.close()
        if len(body) > MAX_ANSWER:
            raise BadAnswer(f"the answer is over {MAX_ANSWER} bytes")
        if response.status in RETRY_STATUSES and _error_code(body) is None:
            raise _Retry(f"HTTP {response.status} from a gateway in front of Cosigner")
        return response.status, body


class _Retry(Exception):
    """A failure that asking again may cure."""


def _error_code(body: bytes) -> tuple[str, str] | None:
    try:
        detail = json.loads(body)["error"]
        code, message = detail["code"], detail["message"]
    except (ValueError, KeyError, TypeError):
        return None
    if not isinstance(code, str) or not isinstance(message, str):
        return None
    return code, message


def _refusal(status: int, body: bytes) -> Refused:
    found = _error_code(body) if status >= 400 else None
    if found is None:
        return Refused(
            status,
            f"HTTP_{status}",
            f"Cosigner answered HTTP {status} without an error body; check COSIGNER_URL",
        )
    return Refused(status, *found)
