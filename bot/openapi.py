"""`/openapi.json`, generated from the wire models in `contracts.wire`."""

from __future__ import annotations

from functools import cache
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from contracts import wire
from contracts.enums import ErrorCode

_MODELS: list[type[BaseModel]] = [
    wire.ApprovalRequest,
    wire.AdmitRequest,
    wire.AdmitResponse,
    wire.DecisionRequest,
    wire.ResultReport,
    wire.ApprovalStart,
    wire.Decision,
    wire.ErrorBody,
]


def _ref(model: type) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{model.__name__}"}


def _json(model: type, description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": _ref(model)}}}


def _errors(*codes: ErrorCode) -> dict[str, Any]:
    text = "Error body; code one of " + ", ".join(c.value for c in codes)
    return {"4XX": _json(wire.ErrorBody, text)}


@cache
def openapi() -> dict[str, Any]:
    """The OpenAPI 3.1 document of the agent API."""
    _, defs = models_json_schema(
        [(m, "validation") for m in _MODELS], ref_template="#/components/schemas/{model}"
    )
    schemas = defs.get("$defs", {})
    approval = {"name": "approvalId", "in": "path", "required": True, "schema": {"type": "string"}}
    both = {"oneOf": [_ref(wire.ApprovalStart), _ref(wire.Decision)]}
    E = ErrorCode
    paths: dict[str, Any] = {
        "/v1/approvals": {
            "post": {
                "summary": "Ask before a gated tool call",
                "operationId": "createApproval",
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": _ref(wire.ApprovalRequest)}},
                },
                "responses": {
                    "201": _json(wire.ApprovalStart, "A person must decide"),
                    "200": _json(wire.Decision, "Decided by policy"),
                    **_errors(
                        E.INVALID_REQUEST,
                        E.UNAUTHENTICATED,
                        E.PERMISSION_DENIED,
                        E.APPROVAL_MODE_UNSUPPORTED,
                        E.TOOL_CALL_CAP_EXCEEDED,
                        E.PARAMETERS_MISMATCH,
                        E.WRONG_TENANT,
                    ),
                },
            }
        },
        "/v1/runs/admit": {
            "post": {
                "summary": "Check a run can host the approvals it may need",
                "operationId": "admitRun",
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": _ref(wire.AdmitRequest)}},
                },
                "responses": {
                    "200": _json(wire.AdmitResponse, "The run may start"),
                    **_errors(E.APPROVAL_MODE_UNSUPPORTED, E.INVALID_REQUEST),
                },
            }
        },
        "/v1/approvals/{approvalId}": {
            "get": {
                "summary": "Read an approval; with ?wait=N (≤ 60) long-poll until it is decided",
                "operationId": "getApproval",
                "parameters": [
                    approval,
                    {
                        "name": "wait",
                        "in": "query",
                        "required": False,
                        "schema": {"type": "integer", "minimum": 0, "maximum": 60},
                    },
                ],
                "responses": {
                    "200": {
                        "description": "approval_start while pending, else the decision",
                        "content": {"application/json": {"schema": both}},
                    },
                    **_errors(E.APPROVAL_NOT_FOUND, E.INVALID_REQUEST),
                },
            }
        },
        "/v1/approvals/{approvalId}/events": {
            "get": {
                "summary": "Server-sent events: approval_start, then approval_decided",
                "operationId": "streamApproval",
                "parameters": [approval],
                "responses": {
                    "200": {
                        "description": "text/event-stream",
                        "content": {"text/event-stream": {"schema": both}},
                    }
                },
            }
        },
        "/v1/approvals/{approvalId}/cancel": {
            "post": {
                "summary": "Withdraw a pending request",
                "operationId": "cancelApproval",
                "parameters": [approval],
                "responses": {
                    "200": _json(wire.Decision, "Cancelled"),
                    **_errors(E.ALREADY_DECIDED, E.APPROVAL_NOT_FOUND),
                },
            }
        },
        "/v1/approvals/{approvalId}/result": {
            "post": {
                "summary": "Report what the executed call returned (goes on the audit record)",
                "operationId": "reportResult",
                "parameters": [approval],
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": _ref(wire.ResultReport)}},
                },
                "responses": {
                    "200": {"description": "Recorded"},
                    **_errors(E.ALREADY_DECIDED, E.APPROVAL_NOT_FOUND),
                },
            }
        },
        "/v1/approvals/{approvalId}/audit": {
            "get": {
                "summary": "The approval's hash-chained audit events",
                "operationId": "getAudit",
                "parameters": [approval],
                "responses": {"200": {"description": "Events"}},
            }
        },
        "/v1/approvals/{approvalId}/decision": {
            "post": {
                "summary": "Decide a dashboard request on behalf of a signed-in user",
                "operationId": "decideApproval",
                "parameters": [approval],
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": _ref(wire.DecisionRequest)}},
                },
                "responses": {
                    "200": _json(wire.Decision, "Decided"),
                    **_errors(E.NOT_AN_APPROVER, E.WRONG_CONVERSATION, E.ALREADY_DECIDED, E.APPROVAL_EXPIRED),
                },
            }
        },
        "/v1/keys": {
            "get": {
                "summary": "JWKS with the public key that signs grants",
                "operationId": "getKeys",
                "security": [],
                "responses": {"200": {"description": "JWKS"}},
            }
        },
    }
    return {
        "openapi": "3.1.0",
        "info": {"title": "Cosigner agent API", "version": "1"},
        "paths": paths,
        "components": {
            "schemas": schemas,
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
