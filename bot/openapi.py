"""`/openapi.json`, generated from the request models in `contracts.wire` and the answer
models in `contracts.answers`: the same models parse every request and build every body."""

from __future__ import annotations

from functools import cache
from typing import Any, Literal

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from contracts import answers, denials, errors, handoff, wire
from contracts.errors import CosignerError

_REQUESTS: list[type[BaseModel]] = [
    wire.ApprovalRequest,
    wire.OperationRequest,
    wire.AdmitRequest,
    wire.DecisionRequest,
    wire.ResultReport,
    wire.CancelRequest,
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


def _paths() -> dict[str, Any]:
    start = {"oneOf": [_ref(answers.ApprovalStart), _ref(handoff.HandoffStart)]}
    decision = _ref(answers.Decision)
    either = {"oneOf": [*start["oneOf"], decision]}
    wait = {
        "name": "wait",
        "in": "query",
        "required": False,
        "schema": {"type": "integer", "minimum": 0, "maximum": 60},
    }
    closed = (E.AlreadyDecided, E.ApprovalExpired)
    post: Literal["post"] = "post"
    return {
        "/v1/approvals": {
            post: _operation(
                "Ask before a gated tool call, or propose an operation its application carries out",
                "createApproval",
                {
                    "201": _json(start, "A person must decide (a handoff: do a step)"),
                    "200": _json(decision, "Decided by policy, or an earlier proposal's outcome"),
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
        },
        "/v1/runs/admit": {
            post: _operation(
                "Check a run can host the approvals it may need",
                "admitRun",
                {"200": _json(_ref(answers.AdmitResponse), "The run may start")},
                (*_BODY, *_AUTH, E.WrongTenant, E.ApprovalModeUnsupported),
                body=_body(wire.AdmitRequest),
            )
        },
        "/v1/approvals/{approvalId}": {
            "get": _operation(
                "Read an approval; with ?wait=N (≤ 60) long-poll until it is decided",
                "getApproval",
                {"200": _json(either, "approval_start while pending, else the decision")},
                (*_BODY, *_ANY_KEY, *_ID),
                approval=True,
                query=[wait],
            )
        },
        "/v1/approvals/{approvalId}/events": {
            "get": _operation(
                "Server-sent events: approval_start, then approval_decided",
                "streamApproval",
                {
                    "200": {
                        "description": "text/event-stream; each event's data is one of these",
                        "content": {"text/event-stream": {"schema": either}},
                    }
                },
                (*_AUTH, *_ID),
                approval=True,
            )
        },
        "/v1/approvals/{approvalId}/cancel": {
            post: _operation(
                "Withdraw a pending request",
                "cancelApproval",
                {"200": _json(decision, "Cancelled")},
                (*_BODY, *_AUTH, *_ID, *closed),
                body=_body(wire.CancelRequest, required=False),
                approval=True,
            )
        },
        "/v1/approvals/{approvalId}/result": {
            post: _operation(
                "Report what the executed call returned (goes on the audit record)",
                "reportResult",
                {"200": _json(_ref(answers.ResultRecorded), "Recorded")},
                (*_BODY, *_AUTH, *_ID, E.AlreadyDecided, E.ApprovalPending),
                body=_body(wire.ResultReport),
                approval=True,
            )
        },
        "/v1/approvals/{approvalId}/audit": {
            "get": _operation(
                "The approval's hash-chained audit events",
                "getAudit",
                {"200": _json(_ref(answers.AuditTrail), "Events, oldest first")},
                (*_ANY_KEY, *_ID),
                approval=True,
            )
        },
        "/v1/approvals/{approvalId}/decision": {
            post: _operation(
                "Decide a dashboard request on behalf of a signed-in user",
                "decideApproval",
                {"200": _json(either, "Decided; a handoff's done: its outcome once checked")},
                (*_BODY, *_AUTH, E.NotAnApprover, E.WrongConversation, *_ID, *closed),
                body=_body(wire.DecisionRequest),
                approval=True,
            )
        },
        "/v1/denials": {
            "get": _operation(
                "The standing denies (Always deny) in force for this tenant, newest first",
                "listDenials",
                {"200": _json(_ref(denials.DenialList), "Standing denies in force")},
                _AUTH,
            )
        },
        "/v1/denials/{denialId}": {
            "delete": {
                **_operation(
                    "Lift a standing deny: later requests it covered are asked again",
                    "liftDenial",
                    {"200": _json(_ref(denials.Denial), "Lifted (again: the first lift stands)")},
                    (*_AUTH, E.DenialNotFound),
                ),
                "parameters": [
                    {
                        "name": "denialId",
                        "in": "path",
                        "required": True,
                        "schema": {"type": "string"},
                    }
                ],
            }
        },
        "/v1/keys": {
            "get": {
                **_operation(
                    "JWKS with the public key that signs grants",
                    "getKeys",
                    {"200": _json(_ref(answers.Jwks), "JWKS")},
                    (),
                ),
                "security": [],
            }
        },
    }


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
