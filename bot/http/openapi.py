"""The agent API's route table, and `/openapi.json` built from it.

Each `Endpoint` carries its path, method, key scopes and the models it takes and answers
(`contracts.wire`, `contracts.answers`); `bot.http.api` serves `ENDPOINTS` and `openapi` documents
them, so a route cannot be served undocumented or documented unserved."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any, Literal

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from contracts import allowances, answers, denials, errors, handoff, hooks, wire
from contracts.enums import KeyScope
from contracts.errors import CosignerError

_REQUESTS: list[type[BaseModel]] = [
    wire.ApprovalRequest,
    wire.OperationRequest,
    wire.AdmitRequest,
    wire.DecisionRequest,
    wire.ResultReport,
    wire.CancelRequest,
    hooks.PreToolUseInput,
]
_ANSWERS: list[type[BaseModel]] = [
    answers.AdmitResponse,
    answers.ApprovalStart,
    handoff.HandoffStart,
    answers.Decision,
    answers.ResultRecorded,
    answers.AuditTrail,
    answers.Jwks,
    answers.ErrorBody,
    denials.DenialList,
    denials.Denial,
    allowances.AllowanceList,
    allowances.Allowance,
    allowances.AllowanceGrantor,
    hooks.HookAnswer,
]
E = errors
# A route one key scope may use also answers KEY_SCOPE; get and audit take either scope.
_AUTH = (E.Unauthenticated, E.WrongKeyScope)
_ANY_KEY = (E.Unauthenticated,)
_ID = (E.ApprovalNotFound,)
_BODY = (E.InvalidRequest,)


def _ref(model: type) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{model.__name__}"}


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _errors(*kinds: type[CosignerError]) -> dict[str, Any]:
    """One documented answer per HTTP status, naming the codes it carries."""
    by_status: dict[int, list[str]] = {}
    for kind in kinds:
        by_status.setdefault(kind.status, []).append(str(kind.code))
    return {
        str(status): _json(_ref(answers.ErrorBody), "Error; code " + " or ".join(codes))
        for status, codes in sorted(by_status.items())
    }


def _body(model: type[BaseModel], required: bool = True) -> dict[str, Any]:
    return {"required": required, "content": {"application/json": {"schema": _ref(model)}}}


def _operation(
    summary: str,
    operation_id: str,
    ok: dict[str, Any],
    kinds: tuple[type[CosignerError], ...],
    *,
    body: dict[str, Any] | None = None,
    approval: bool = False,
    query: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    op: dict[str, Any] = {"summary": summary, "operationId": operation_id}
    params = []
    if approval:
        params.append(
            {
                "name": "approvalId",
                "in": "path",
                "required": True,
                "schema": {"type": "string", "pattern": wire.APPROVAL_ID_PATTERN},
            }
        )
    params.extend(query or [])
    if params:
        op["parameters"] = params
    if body is not None:
        op["requestBody"] = body
    op["responses"] = {**ok, **_errors(*kinds)}
    return op


@dataclass(frozen=True)
class Endpoint:
    """One route of the agent API: where it is served, who may call it, and what it takes and
    answers; the server's routes and `/openapi.json` are both built from `ENDPOINTS`."""

    path: str  # as the server matches it (`{approval_id}`)
    method: Literal["get", "post", "delete"]
    name: str  # the route's label in metrics
    scopes: frozenset[KeyScope]  # empty: no key needed
    summary: str
    operation_id: str
    ok: dict[str, Any]
    errors: tuple[type[CosignerError], ...]
    body: dict[str, Any] | None = None
    query: tuple[dict[str, Any], ...] = ()
    # A hook's route answers every error as 200 with a deny (an agent goes ahead after a hook
    # that fails): it checks its own key, and documents no error status.
    fails_closed: bool = False

    @property
    def doc_path(self) -> str:
        """The path as the document names it (`{approvalId}`)."""
        return self.path.replace("{approval_id}", "{approvalId}")

    def document(self) -> dict[str, Any]:
        """The endpoint's OpenAPI operation object."""
        # Every route that takes a body reads it only up to its limit (a 413).
        kinds = (*self.errors, E.BodyTooLarge) if self.body is not None else self.errors
        if self.fails_closed:
            kinds = ()
        op = _operation(
            self.summary,
            self.operation_id,
            self.ok,
            kinds,
            body=self.body,
            approval="{approvalId}" in self.doc_path,
            query=list(self.query),
        )
        if "{denialId}" in self.path:
            denial = {"name": "denialId", "in": "path", "required": True, "schema": {"type": "string"}}
            op["parameters"] = [denial]
        if "{allowanceId}" in self.path:
            allowance = {"name": "allowanceId", "in": "path", "required": True, "schema": {"type": "string"}}
            op["parameters"] = [allowance]
        if not self.scopes:
            op["security"] = []
        return op


AGENT_ONLY = frozenset({KeyScope.AGENT})
APPROVER_ONLY = frozenset({KeyScope.APPROVER})
ANY_SCOPE = frozenset(KeyScope)
PUBLIC: frozenset[KeyScope] = frozenset()

_START = {"oneOf": [_ref(answers.ApprovalStart), _ref(handoff.HandoffStart)]}
_DECISION = _ref(answers.Decision)
_EITHER = {"oneOf": [*_START["oneOf"], _DECISION]}
_WAIT = {
    "name": "wait",
    "in": "query",
    "required": False,
    "schema": {"type": "integer", "minimum": 0, "maximum": 60},
}
_CLOSED = (E.AlreadyDecided, E.ApprovalExpired)

CREATE = Endpoint(
    "/v1/approvals",
    "post",
    "create",
    AGENT_ONLY,
    "Ask before a gated tool call, or propose an operation its application carries out",
    "createApproval",
    {
        "201": _json(_START, "A person must decide (a handoff: do a step)"),
        "200": _json(_DECISION, "Decided by policy, or an earlier proposal's outcome"),
    },
    (
        *_BODY,
        *_AUTH,
        E.PermissionDenied,
        E.WrongTenant,
        E.ParametersMismatch,
        E.ApprovalModeUnsupported,
        E.ToolCallCapExceeded,
        E.OperationRejected,
        E.OperationUnavailable,
    ),
    body={
        "required": True,
        "content": {
            "application/json": {
                "schema": {"oneOf": [_ref(wire.ApprovalRequest), _ref(wire.OperationRequest)]}
            }
        },
    },
)


ADMIT = Endpoint(
    "/v1/runs/admit",
    "post",
    "admit",
    AGENT_ONLY,
    "Check a run can host the approvals it may need",
    "admitRun",
    {"200": _json(_ref(answers.AdmitResponse), "The run may start")},
    (*_BODY, *_AUTH, E.WrongTenant, E.ApprovalModeUnsupported),
    body=_body(wire.AdmitRequest),
)


GET = Endpoint(
    "/v1/approvals/{approval_id}",
    "get",
    "get",
    ANY_SCOPE,
    "Read an approval; with ?wait=N (≤ 60) long-poll until it is decided",
    "getApproval",
    {"200": _json(_EITHER, "approval_start while pending, else the decision")},
    (*_BODY, *_ANY_KEY, *_ID),
    query=(_WAIT,),
)


EVENTS = Endpoint(
    "/v1/approvals/{approval_id}/events",
    "get",
    "events",
    AGENT_ONLY,
    "Server-sent events: approval_start, then approval_decided",
    "streamApproval",
    {
        "200": {
            "description": "text/event-stream; each event's data is one of these",
            "content": {"text/event-stream": {"schema": _EITHER}},
        }
    },
    (*_AUTH, *_ID),
)


CANCEL = Endpoint(
    "/v1/approvals/{approval_id}/cancel",
    "post",
    "cancel",
    AGENT_ONLY,
    "Withdraw a pending request",
    "cancelApproval",
    {"200": _json(_DECISION, "Cancelled")},
    (*_BODY, *_AUTH, *_ID, *_CLOSED),
    body=_body(wire.CancelRequest, required=False),
)


RESULT = Endpoint(
    "/v1/approvals/{approval_id}/result",
    "post",
    "result",
    AGENT_ONLY,
    "Report what the executed call returned (goes on the audit record)",
    "reportResult",
    {"200": _json(_ref(answers.ResultRecorded), "Recorded")},
    (*_BODY, *_AUTH, *_ID, E.AlreadyDecided, E.ApprovalPending),
    body=_body(wire.ResultReport),
)


AUDIT = Endpoint(
    "/v1/approvals/{approval_id}/audit",
    "get",
    "audit",
    ANY_SCOPE,
    "The approval's hash-chained audit events",
    "getAudit",
    {"200": _json(_ref(answers.AuditTrail), "Events, oldest first")},
    (*_ANY_KEY, *_ID),
)


DECISION = Endpoint(
    "/v1/approvals/{approval_id}/decision",
    "post",
    "decision",
    APPROVER_ONLY,
    "Decide a dashboard request on behalf of a signed-in user",
    "decideApproval",
    {"200": _json(_EITHER, "Decided; a handoff's done: its outcome once checked")},
    (*_BODY, *_AUTH, E.NotAnApprover, E.WrongConversation, *_ID, *_CLOSED),
    body=_body(wire.DecisionRequest),
)


KEYS = Endpoint(
    "/v1/keys",
    "get",
    "keys",
    PUBLIC,
    "JWKS with the public key that signs grants",
    "getKeys",
    {"200": _json(_ref(answers.Jwks), "JWKS")},
    (),
)


DENIALS = Endpoint(
    "/v1/denials",
    "get",
    "denials",
    APPROVER_ONLY,
    "The standing denies (Always deny) in force for this tenant, newest first",
    "listDenials",
    {"200": _json(_ref(denials.DenialList), "Standing denies in force")},
    _AUTH,
)


DENIAL_LIFT = Endpoint(
    "/v1/denials/{denialId}",
    "delete",
    "denial_lift",
    APPROVER_ONLY,
    "Lift a standing deny: later requests it covered are asked again",
    "liftDenial",
    {"200": _json(_ref(denials.Denial), "Lifted (again: the first lift stands)")},
    (*_AUTH, E.DenialNotFound),
)

HOOK_CLAUDE_CODE = Endpoint(
    "/v1/hooks/claude-code",
    "post",
    "hook_claude_code",
    AGENT_ONLY,
    "Claude Code's http PreToolUse hook: ask, wait, answer allow or deny (every error is a deny)",
    "claudeCodeHook",
    {
        "200": _json(
            _ref(hooks.HookAnswer),
            "The hook's output: allow only when approved; a bad key, body, surface or wait, a "
            "refusal and no answer in time are all answered here as deny, never as an error status",
        )
    },
    (),
    body=_body(hooks.PreToolUseInput),
    query=(
        {
            "name": "wait",
            "in": "query",
            "required": False,
            "schema": {"type": "integer", "minimum": 0, "maximum": 590, "default": 50},
        },
        {
            "name": "Cosigner-Surface",
            "in": "header",
            "required": True,
            "schema": {"type": "string", "examples": ["slack:T0ACME/D0ALICE/U0ALICE"]},
        },
    ),
    fails_closed=True,
)


ALLOWANCES = Endpoint(
    "/v1/allowances",
    "get",
    "allowances",
    APPROVER_ONLY,
    "The standing allows (Allow for …) in force for this tenant, newest first",
    "listAllowances",
    {"200": _json(_ref(allowances.AllowanceList), "Standing allows in force")},
    _AUTH,
)


ALLOWANCE_REVOKE = Endpoint(
    "/v1/allowances/{allowanceId}",
    "delete",
    "allowance_revoke",
    APPROVER_ONLY,
    "Revoke a standing allow: from the next call, those it covered are asked again",
    "revokeAllowance",
    {"200": _json(_ref(allowances.Allowance), "Revoked (again: the first revocation stands)")},
    (*_AUTH, E.AllowanceNotFound),
)


# The route table: served in this order (`bot.http.api.Api.routes` pairs each with its handler).
ENDPOINTS: tuple[Endpoint, ...] = (
    CREATE,
    ADMIT,
    GET,
    EVENTS,
    CANCEL,
    RESULT,
    AUDIT,
    DECISION,
    HOOK_CLAUDE_CODE,
    KEYS,
    DENIALS,
    DENIAL_LIFT,
    ALLOWANCES,
    ALLOWANCE_REVOKE,
)


def _paths() -> dict[str, Any]:
    paths: dict[str, Any] = {}
    for endpoint in ENDPOINTS:
        paths.setdefault(endpoint.doc_path, {})[endpoint.method] = endpoint.document()
    return paths


@cache
def openapi() -> dict[str, Any]:
    """The OpenAPI 3.1 document of the agent API."""
    _, defs = models_json_schema(
        [(m, "validation") for m in _REQUESTS] + [(m, "serialization") for m in _ANSWERS],
        ref_template="#/components/schemas/{model}",
    )
    return {
        "openapi": "3.1.0",
        "info": {"title": "Cosigner agent API", "version": "1"},
        "paths": _paths(),
        "components": {
            "schemas": defs.get("$defs", {}),
            "securitySchemes": {
                "tenantKey": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "Tenant API key from `cosigner tenants create`",
                }
            },
        },
        "security": [{"tenantKey": []}],
    }
