"""What `Cosigner.gate` and `AsyncCosigner.gate` share: binding a call and checking its decision.

A gated function runs only when Cosigner approved exactly the arguments it is about to run
with: the arguments are digested again after the decision, so an argument changed while
waiting (or a decision for another call) is refused before the body starts.
"""

from __future__ import annotations

import copy
import inspect
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import TypeAdapter
from pydantic_core import to_jsonable_python

from cosigner import context
from cosigner.decision import Decision
from cosigner.digest import canonical_json, parameters_digest
from cosigner.enums import ApprovalStatus
from cosigner.errors import ApprovalDenied, ApprovalExpired, CosignerError, ParametersMismatch, error_for
from cosigner.surfaces import Surface

log = logging.getLogger("cosigner")
MAX_ERROR = 2000


@dataclass(frozen=True)
class Options:
    """How a function is gated: fixed at decoration time."""

    surface: Surface | None
    tool_name: str | None
    execution_id: str | None
    reason: str | None
    timeout_seconds: int | None
    allow_edits: bool = False
    parameters_schema: dict[str, Any] | None = None


def schema_of(fn: Callable[..., Any]) -> dict[str, Any] | None:
    """The JSON Schema of `fn`'s arguments, as pydantic builds it from the signature (None
    when it cannot): sent with `allow_edits` so the approver gets typed inputs."""
    try:
        schema: dict[str, Any] = TypeAdapter(fn).json_schema()  # type: ignore[arg-type]
    except Exception:
        return None
    return schema


@dataclass(frozen=True)
class Call:
    """One gated call, ready to send."""

    execution_id: str
    tool_call_id: str
    tool_name: str
    parameters: dict[str, Any]
    surface: Surface
    reason: str | None
    timeout_seconds: int | None
    accepts_edits: bool = False
    parameters_schema: dict[str, Any] | None = None

    def request(self) -> dict[str, Any]:
        """Keyword arguments of `request_approval` for this call."""
        return {
            "accepts_edits": self.accepts_edits,
            "parameters_schema": self.parameters_schema,
            "execution_id": self.execution_id,
            "tool_call_id": self.tool_call_id,
            "tool_name": self.tool_name,
            "parameters": self.parameters,
            "surface": self.surface,
            "reason": self.reason,
            "timeout_seconds": self.timeout_seconds,
        }


def arguments(signature: inspect.Signature, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """The call's arguments by parameter name, defaults included, as JSON values."""
    bound = signature.bind(*args, **kwargs)
    bound.apply_defaults()
    values = {name: list(v) if isinstance(v, tuple) else v for name, v in bound.arguments.items()}
    try:
        canonical_json(values)
    except (TypeError, ValueError) as exc:
        raise TypeError(
            f"gated arguments must be JSON values (str, int, float, bool, None, list, dict): {exc}"
        ) from None
    # A deep copy: what is sent must not change if the caller mutates an argument later.
    return copy.deepcopy(values)


def plan(fn: Callable[..., Any], options: Options, default_execution: str | None, *a: Any, **kw: Any) -> Call:
    """Bind a call of `fn` to the execution and surface it runs in."""
    scope = context.current()
    execution_id = options.execution_id or scope.execution_id or default_execution
    surface = options.surface or scope.surface
    name = options.tool_name or fn.__name__
    if execution_id is None:
        raise ValueError(
            f"no execution id for gated {name}: wrap the run in `with cosigner.execution('run_81', "
            "surface=...)`, or pass execution_id= to Cosigner() or gate()"
        )
    if surface is None:
        raise ValueError(f"no surface for gated {name}: pass surface= to gate() or to cosigner.execution()")
    return Call(
        execution_id=execution_id,
        tool_call_id=scope.tool_call_id or context.new_tool_call_id(),
        tool_name=name,
        parameters=arguments(inspect.signature(fn), a, kw),
        surface=surface,
        reason=options.reason,
        timeout_seconds=options.timeout_seconds,
        accepts_edits=options.allow_edits,
        parameters_schema=options.parameters_schema if options.allow_edits else None,
    )


def edited_arguments(
    decision: Decision, signature: inspect.Signature, options: Options, a: tuple[Any, ...], kw: dict[str, Any]
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The arguments to run the body with: the caller's, or for an edited call the caller's with
    the approver's changes. An edit where the gate did not allow one is refused."""
    if not decision.edited or not decision.approved:
        return a, kw
    if not options.allow_edits:
        raise ParametersMismatch(
            f"{decision.tool_name} was approved with an edit, but this gate runs only the call as asked "
            "(gate(allow_edits=True) runs edited calls); the call was not run",
            approvalId=decision.approval_id,
        )
    bound = signature.bind(*a, **kw)
    bound.apply_defaults()
    edited = decision.parameters or {}
    for name in decision.edited_fields:
        if name not in bound.arguments or name not in edited:
            raise ParametersMismatch(
                f"the edit of {decision.approval_id} names {name}, which is not an argument of "
                f"{decision.tool_name}; the call was not run",
                approvalId=decision.approval_id,
            )
        bound.arguments[name] = copy.deepcopy(edited[name])
    return bound.args, bound.kwargs


def refuse_unless_approved(decision: Decision, signature: inspect.Signature, *a: Any, **kw: Any) -> None:
    """Raise unless `decision` approves exactly the arguments the body is about to get."""
    if decision.code is not None:  # a handoff that did not complete
        detail = f": {decision.detail}" if decision.detail else ""
        failed = error_for(
            409,
            decision.code,
            f"handoff {decision.approval_id} for {decision.tool_name} {decision.status.value}{detail}",
            {"approvalId": decision.approval_id, "status": decision.status.value},
        )
        failed.decision = decision
        raise failed
    if decision.status is ApprovalStatus.EXPIRED:
        expired = ApprovalExpired(
            f"approval {decision.approval_id} for {decision.tool_name} expired: expiry means deny",
            approvalId=decision.approval_id,
        )
        expired.decision = decision
        raise expired
    if not (decision.approved or decision.completed):
        who = decision.decided_by.kind.value if decision.decided_by else "nobody"
        said = f": {decision.comment}" if decision.comment else ""
        denied = ApprovalDenied(
            f"{decision.tool_name} was {decision.status.value} by {who}{said}",
            approvalId=decision.approval_id,
            status=decision.status.value,
        )
        denied.decision = decision
        raise denied
    if parameters_digest(arguments(signature, a, kw)) != decision.parameters_digest:
        raise ParametersMismatch(
            f"the arguments of {decision.tool_name} are not the ones approved in "
            f"{decision.approval_id}; the call was not run",
            approvalId=decision.approval_id,
        )


def result_report(result: Any) -> dict[str, Any]:
    """The `/result` report of a body that returned `result` (non-JSON values as their repr)."""
    return {"result": to_jsonable_python(result, fallback=repr)}


def error_report(exc: BaseException) -> dict[str, Any]:
    """The `/result` report of a body that raised `exc`."""
    return {"error": f"{type(exc).__name__}: {exc}"[:MAX_ERROR]}


def log_waiting(decision: Decision) -> None:
    """Note at INFO on the `cosigner` logger that a call waits for a person (shown only where
    the application shows INFO lines; `examples/agent.py` prints them)."""
    log.info(
        "waiting for a person to approve %s (approval %s)",
        decision.tool_name,
        decision.approval_id,
        extra={"approval_id": decision.approval_id, "tool": decision.tool_name},
    )


def log_unreported(approval_id: str, exc: Exception) -> None:
    """A result that could not be reported is logged, never raised over the body's own outcome."""
    code = exc.code if isinstance(exc, CosignerError) else type(exc).__name__
    log.warning("could not report the result of approval %s (%s)", approval_id, code)
