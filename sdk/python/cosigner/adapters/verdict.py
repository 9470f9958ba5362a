"""What every framework adapter shares: ask Cosigner about one tool call, and word the answer.

An adapter turns the framework's pending tool call into a `ToolCall` (the framework's run or
thread id, its tool call id, the tool name and the exact arguments the tool will get), asks
an `Approver`, and acts on the `Verdict`: run the call when `allowed`, keep waiting when
`pending`, otherwise hand `message` to the model instead of a result. A call runs only with
an approved decision whose digest matches these arguments and whose grant verifies.
"""

from __future__ import annotations

import asyncio
import copy
import logging
from dataclasses import dataclass
from typing import Any

from pydantic_core import to_jsonable_python

from cosigner import ApprovalStatus, AsyncCosigner, Cosigner, DeciderKind, Decision, parameters_digest
from cosigner.errors import (
    ApprovalModeUnsupported,
    CosignerError,
    ParametersMismatch,
    PermissionDenied,
    ToolCallCapExceeded,
)
from cosigner.surfaces import Surface

__all__ = [
    "REFUSALS",
    "Approver",
    "ToolCall",
    "Verdict",
    "denial_message",
    "edited_note",
    "expiry_message",
    "refusal_message",
]

log = logging.getLogger("cosigner.adapters")
MAX_ERROR = 2000

REFUSALS = (PermissionDenied, ApprovalModeUnsupported, ToolCallCapExceeded)
"""Errors that end one call closed, with their message to the model, instead of ending the run."""


@dataclass(frozen=True)
class ToolCall:
    """One call a framework is about to run: its run, its call id, its tool and exact arguments."""

    execution_id: str
    tool_call_id: str
    tool_name: str
    parameters: dict[str, Any]
    schema: dict[str, Any] | None = None  # the tool's JSON Schema, sent when edits are accepted


@dataclass(frozen=True)
class Verdict:
    """Cosigner's answer for one call: run it, wait for it, or tell the model why it did not run.

    `arguments` are what the tool runs with: the call's own, or the approver's edited call."""

    call: ToolCall
    decision: Decision | None
    message: str | None = None
    edited: dict[str, Any] | None = None

    @property
    def arguments(self) -> dict[str, Any]:
        """The arguments to run the tool with: the approved (possibly edited) call."""
        return self.edited if self.edited is not None else self.call.parameters

    @property
    def allowed(self) -> bool:
        """True only for an approved decision bound to exactly this call."""
        return self.message is None and self.decision is not None and self.decision.approved

    @property
    def pending(self) -> bool:
        """True while a person has yet to answer."""
        return self.message is None and self.decision is not None and self.decision.pending


def denial_message(decision: Decision) -> str:
    """What the model reads instead of a result when the call was not approved."""
    name = decision.tool_name
    if decision.status is ApprovalStatus.EXPIRED:
        return expiry_message(name)
    if decision.status is ApprovalStatus.CANCELLED:
        return (
            f"Not run: the approval request for this `{name}` call was withdrawn. "
            "Do not retry it unless the user asks you to."
        )
    by = decision.decided_by
    if by is not None and by.kind is DeciderKind.SYSTEM:
        return (
            f"Not run: Cosigner could not reach an approver for this `{name}` call ({by.code}). "
            "Do not retry it; tell the user the approval could not be asked."
        )
    who = "the policy" if by is not None and by.kind is DeciderKind.POLICY else "the approver"
    said = f' with the comment: "{decision.comment}"' if decision.comment else ""
    return (
        f"Not run: {who} denied this `{name}` call{said}. Do not retry the same call; "
        "follow the comment or ask the user how to proceed."
    )


def edited_note(verdict: Verdict) -> str:
    """What the model reads beside the result of an edited call, so it does not retry its own."""
    decision = verdict.decision
    if decision is None or not decision.edited:
        return ""
    changed = ", ".join(f"{name}={verdict.arguments.get(name)!r}" for name in decision.edited_fields)
    return (
        f"(An approver edited this `{verdict.call.tool_name}` call before approving it; it ran with "
        f"{changed}. Do not run the original call again.)"
    )


def expiry_message(tool_name: str) -> str:
    """What the model reads when nobody answered in time."""
    return (
        f"Not run: nobody approved this `{tool_name}` call before its approval request expired "
        "(expiry means deny). Do not call it again on your own; tell the user it still needs approval."
    )


def refusal_message(call: ToolCall, exc: CosignerError) -> str:
    """What the model reads when Cosigner refused the call outright (a standing deny, no surface, cap)."""
    if isinstance(exc, ApprovalModeUnsupported):
        return (
            f"Not run: `{call.tool_name}` needs a person's approval and this run has nobody who can "
            f"give it: {exc.message} Do not retry it."
        )
    if isinstance(exc, ToolCallCapExceeded):
        return f"Not run: this run has used up its gated tool calls: {exc.message} Do not retry it."
    return f"Not run: the policy forbids `{call.tool_name}`: {exc.message} Do not retry it."


def check_binding(call: ToolCall, decision: Decision, arguments: dict[str, Any] | None = None) -> None:
    """Raise unless the decision is for exactly this call and these arguments (`arguments`: the
    edited call to run instead, which keeps the tool name)."""
    same_call = (decision.execution_id, decision.tool_call_id, decision.tool_name) == (
        call.execution_id,
        call.tool_call_id,
        call.tool_name,
    )
    to_run = call.parameters if arguments is None else arguments
    if not same_call or parameters_digest(to_run) != decision.parameters_digest:
        raise ParametersMismatch(
            f"the decision {decision.approval_id} is not for this {call.tool_name} call with these "
            "arguments; the call was not run",
            approvalId=decision.approval_id,
        )


def result_report(result: Any) -> dict[str, Any]:
    """The `/result` report of a call that returned `result` (non-JSON values as their repr)."""
    return {"result": to_jsonable_python(result, fallback=repr)}


def error_report(error: BaseException | str) -> dict[str, Any]:
    """The `/result` report of a call that failed."""
    text = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
    return {"error": text[:MAX_ERROR]}


class Approver:
    """Asks Cosigner about tool calls for one surface, with a blocking or an asyncio client.

    `ask` needs the blocking `Cosigner`; `aask` takes either (a blocking client waits in a
    worker thread). Refusals (`REFUSALS`) and decisions other than approved become a
    `Verdict` with the model's message; any other error is raised, so a broken set-up stops
    the run instead of running the call.
    """

    def __init__(
        self,
        client: Cosigner | AsyncCosigner,
        surface: Surface,
        *,
        reason: str | None = None,
        timeout_seconds: int | None = None,
        accepts_edits: bool = False,
    ) -> None:
        self.client = client
        self.surface = surface
        self.reason = reason
        self.timeout_seconds = timeout_seconds
        # Only an adapter whose framework can run edited arguments says it accepts edits.
        self.accepts_edits = accepts_edits

    def _request(self, call: ToolCall, wait: bool, callback_url: str | None) -> dict[str, Any]:
        return {
            "execution_id": call.execution_id,
            "tool_call_id": call.tool_call_id,
            "tool_name": call.tool_name,
            "parameters": call.parameters,
            "surface": self.surface,
            "reason": self.reason,
            "timeout_seconds": self.timeout_seconds,
            "wait": wait,
            "callback_url": callback_url,
            "accepts_edits": self.accepts_edits,
            "parameters_schema": call.schema if self.accepts_edits else None,
        }

    def _blocking(self) -> Cosigner:
        if not isinstance(self.client, Cosigner):
            raise TypeError(
                "this framework called the adapter synchronously, and an AsyncCosigner cannot "
                "answer there: pass a Cosigner (the blocking client), or run the agent with its async API"
            )
        return self.client

    def ask(self, call: ToolCall, *, wait: bool = True, callback_url: str | None = None) -> Verdict:
        """Ask about `call` (and wait for the decision unless `wait=False`); blocking."""
        client = self._blocking()
        try:
            decision = client.request_approval(**self._request(call, wait, callback_url))
        except REFUSALS as exc:
            return Verdict(call, None, refusal_message(call, exc))
        return self.settle(call, decision)

    def settle(self, call: ToolCall, decision: Decision) -> Verdict:
        """The verdict for a decision already fetched; checks its binding and grant; blocking."""
        if decision.pending:
            return Verdict(call, decision)
        if not decision.approved:
            return Verdict(call, decision, denial_message(decision))
        decision, edited = self._edited(call, decision)
        check_binding(call, decision, edited)
        self._blocking().verify_grant(
            decision.grant,
            edited or call.parameters,
            tool_name=call.tool_name,
            tool_call_id=call.tool_call_id,
        )
        return Verdict(call, decision, edited=edited)

    def _edited(self, call: ToolCall, decision: Decision) -> tuple[Decision, dict[str, Any] | None]:
        """An approved edit: the decision with the whole call to run, and that call (None when
        approved as asked). An edit this adapter did not ask for is refused, never run."""
        if not decision.edited:
            return decision, None
        if not self.accepts_edits:
            raise ParametersMismatch(
                f"{call.tool_name} was approved with an edit, which this adapter cannot run; "
                "the call was not run",
                approvalId=decision.approval_id,
            )
        decision = decision.with_original(call.parameters)
        return decision, snapshot(decision.parameters)

    def wait(self, verdict: Verdict) -> Verdict:
        """Wait until a pending verdict is decided; blocking."""
        if not verdict.pending or verdict.decision is None:
            return verdict
        return self.settle(verdict.call, self._blocking().wait(verdict.decision))

    async def aask(self, call: ToolCall, *, wait: bool = True, callback_url: str | None = None) -> Verdict:
        """Ask about `call` (and wait for the decision unless `wait=False`)."""
        client = self.client
        if not isinstance(client, AsyncCosigner):
            return await asyncio.to_thread(self.ask, call, wait=wait, callback_url=callback_url)
        try:
            decision = await client.request_approval(**self._request(call, wait, callback_url))
        except REFUSALS as exc:
            return Verdict(call, None, refusal_message(call, exc))
        return await self.asettle(call, decision)

    async def asettle(self, call: ToolCall, decision: Decision) -> Verdict:
        """The verdict for a decision already fetched; checks its binding and grant."""
        client = self.client
        if not isinstance(client, AsyncCosigner):
            return await asyncio.to_thread(self.settle, call, decision)
        if decision.pending:
            return Verdict(call, decision)
        if not decision.approved:
            return Verdict(call, decision, denial_message(decision))
        decision, edited = self._edited(call, decision)
        check_binding(call, decision, edited)
        await client.verify_grant(
            decision.grant,
            edited or call.parameters,
            tool_name=call.tool_name,
            tool_call_id=call.tool_call_id,
        )
        return Verdict(call, decision, edited=edited)

    async def aconfirm(self, call: ToolCall) -> Verdict:
        """Confirm with Cosigner a call about to run: asked again (idempotent), or, when these are
        an approver's edited arguments (Cosigner then answers PARAMETERS_MISMATCH for the asked
        ones), the approval read by its id and checked to have approved exactly this edited call."""
        try:
            return await self.aask(call, wait=False)
        except ParametersMismatch as exc:
            approval_id = exc.details.get("approvalId")
            if not self.accepts_edits or not isinstance(approval_id, str):
                raise
            client = self.client
            if isinstance(client, AsyncCosigner):
                decision = await client.get(approval_id)
            else:
                decision = await asyncio.to_thread(client.get, approval_id)
            if not (decision.approved and decision.edited):
                raise
            check_binding(call, decision)
            if isinstance(client, AsyncCosigner):
                await client.verify_grant(
                    decision.grant, call.parameters, tool_name=call.tool_name, tool_call_id=call.tool_call_id
                )
            else:
                await asyncio.to_thread(
                    client.verify_grant,
                    decision.grant,
                    call.parameters,
                    tool_name=call.tool_name,
                    tool_call_id=call.tool_call_id,
                )
            return Verdict(call, decision, edited=call.parameters)

    async def await_decision(self, verdict: Verdict) -> Verdict:
        """Wait until a pending verdict is decided."""
        client = self.client
        if not verdict.pending or verdict.decision is None:
            return verdict
        if not isinstance(client, AsyncCosigner):
            return await asyncio.to_thread(self.wait, verdict)
        return await self.asettle(verdict.call, await client.wait(verdict.decision))

    def report(self, verdict: Verdict, report: dict[str, Any], *, wait: bool = True) -> None:
        """Put an executed call's result (or error) on the audit record; logs, never raises.

        With `wait=False` the report is queued and sent while the caller goes on (see
        `Cosigner.report_result`); the adapters report that way, off the call's path.
        """
        if verdict.decision is None:
            return
        try:
            self._blocking().report_result(verdict.decision, wait=wait, **report)
        except Exception as exc:  # the call already ran: its outcome must not be lost to a report
            _log_unreported(verdict.decision.approval_id, exc)

    async def areport(self, verdict: Verdict, report: dict[str, Any], *, wait: bool = True) -> None:
        """Put an executed call's result (or error) on the audit record; logs, never raises.

        With `wait=False` the report is queued and sent while the caller goes on.
        """
        client = self.client
        if verdict.decision is None:
            return
        if not isinstance(client, AsyncCosigner):
            if wait:
                await asyncio.to_thread(self.report, verdict, report)
            else:
                self.report(verdict, report, wait=False)
            return
        try:
            await client.report_result(verdict.decision, wait=wait, **report)
        except Exception as exc:  # the call already ran: its outcome must not be lost to a report
            _log_unreported(verdict.decision.approval_id, exc)


def snapshot(parameters: Any) -> dict[str, Any]:
    """A private copy of a call's arguments, so what is shown cannot change before it runs."""
    if not isinstance(parameters, dict):
        raise TypeError(f"tool arguments must be a JSON object, not {type(parameters).__name__}")
    return copy.deepcopy(parameters)


def _log_unreported(approval_id: str, exc: Exception) -> None:
    code = exc.code if isinstance(exc, CosignerError) else type(exc).__name__
    log.warning("could not report the result of approval %s (%s)", approval_id, code)
