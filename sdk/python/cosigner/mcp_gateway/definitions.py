"""Pinned tool definitions: the upstream's tools are offered only as an approver approved them.

With `--pin FILE` the gateway compares each tool the upstream lists with its lock file
(`pins.py`). A tool whose definition is the pinned one is offered as listed. One whose
definition differs, or that the file does not name (with `--new-tools ask`, the default
then), is not offered and its calls are refused (`TOOL_DEFINITION_CHANGED`) while an
approver is asked through Cosigner's own API: an approval request for the pseudo-tool
`mcp.definition` (after the `--tool-prefix`) whose parameters are the upstream's name, the
tool's name and its `old` and `new` definitions, so every surface shows both. The policy
decides it like any call (a tool it does not name is `danger`: a person, every time).
Once approved, and its grant checked against exactly those parameters, the new definition
is written to the lock file and the tool is offered again. Denied, expired or cancelled,
the tool stays refused until the gateway restarts or the upstream lists another definition.

Annotations (`readOnlyHint`, `destructiveHint`, …) are part of the definition, so a change
of them is approved like any other change; they are the upstream's claim and never let a
call through: every call of an offered tool is still put to the policy by its name.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from mcp.types import Tool

from cosigner import AsyncCosigner, Decision, Surface
from cosigner.digest import CanonicalFormError
from cosigner.errors import CosignerError, GrantRefused, ToolDefinitionChanged
from cosigner.mcp_gateway.pins import DEFINITION_FIELDS, LockFile, NewTools, Pinned, definition_digest

__all__ = ["DEFINITION_TOOL", "Definitions", "definition_of"]

log = logging.getLogger("cosigner.mcp_gateway")

DEFINITION_TOOL = "mcp.definition"
"""The tool name (after `--tool-prefix`) the policy sees for the approval of a definition."""

UNTIL = (
    "so it is not offered or run until the upstream lists another definition or the gateway restarts "
    "(which asks again)"
)


def definition_of(tool: Tool) -> dict[str, Any]:
    """What is pinned of `tool`: its listing's name, title, description, schemas, annotations."""
    listed = tool.model_dump(mode="json", by_alias=True, exclude_none=True)
    return {name: listed[name] for name in DEFINITION_FIELDS if name in listed}


class Standing(StrEnum):
    """Where a held tool's new definition is."""

    ASKING = "asking"
    """An approver is asked (or is about to be)."""
    REFUSED = "refused"
    """Not approved (denied, expired, cancelled, refused by Cosigner) or `--new-tools deny`."""
    UNASKED = "unasked"
    """Cosigner could not be asked; asked again when the tool is listed or called next."""


@dataclass
class Held:
    """A listed tool that is not offered: its definition is not the pinned one."""

    tool: str
    definition: dict[str, Any]
    digest: str
    """The listed definition's; empty for a tool refused whatever its definition."""
    old: Pinned | None
    standing: Standing = Standing.ASKING
    approval_id: str | None = None
    why: str = ""
    """For a refused or unasked one: what happened, as the refusal's text says it."""
    task: asyncio.Task[None] | None = field(default=None, repr=False)


class Definitions:
    """The lock file's view of the upstream's tools, and the approvals of new definitions."""

    def __init__(
        self,
        lock: LockFile,
        new_tools: NewTools,
        cosigner: AsyncCosigner,
        surface: Surface,
        tool_prefix: str,
        upstream_name: Callable[[], str],
        on_pinned: Callable[[str], Awaitable[None]],
    ) -> None:
        self.lock = lock
        self.new_tools = new_tools
        self._cosigner = cosigner
        self._surface = surface
        self._policy_name = tool_prefix + DEFINITION_TOOL
        self._upstream_name = upstream_name
        self._on_pinned = on_pinned
        self._held: dict[str, Held] = {}
        self._chores: set[asyncio.Task[Any]] = set()

    def review(self, tools: list[Tool]) -> list[Tool]:
        """The tools of a listing that are offered; for each other one an approver is asked
        (once per definition), unless `--new-tools deny` refuses it outright."""
        offered: list[Tool] = []
        seen = Counter(t.name for t in tools)
        for tool in tools:
            definition = definition_of(tool)
            if seen[tool.name] > 1:  # which one a call would reach is the upstream's guess
                self._refuse(tool.name, definition, "the upstream lists more than one tool of this name")
                continue
            try:
                digest = definition_digest(definition)
            except CanonicalFormError as exc:  # not plain JSON: nothing to approve it by
                self._refuse(tool.name, definition, f"its definition has no canonical JSON form ({exc})")
                continue
            pinned = self.lock.get(tool.name)
            if pinned is not None and pinned.digest == digest:
                self._release(tool.name)
                offered.append(tool)
            elif pinned is None and self.new_tools is NewTools.ALLOW:
                if self._pin(tool.name, definition):
                    offered.append(tool)
            else:
                self._hold(tool.name, definition, digest, pinned)
        return offered

    def refusal(self, tool: str) -> ToolDefinitionChanged | None:
        """Why a call of `tool` is refused, if its definition is held; a held tool whose
        approval could not be asked for is asked again now."""
        held = self._held.get(tool)
        if held is None:
            return None
        if held.digest == "":
            what = f"{tool} cannot be offered"
        elif held.old is None:
            what = f"{tool} is new since the lock file was written"
        else:
            changed = [k for k in DEFINITION_FIELDS if held.old.definition.get(k) != held.definition.get(k)]
            what = f"the definition of {tool} has changed since it was approved ({', '.join(changed)})"
        if held.standing is Standing.UNASKED:
            then = f"{held.why}; it is asked again now"
            self._ask_again(held)
        elif held.standing is Standing.ASKING:
            where = f" (approval {held.approval_id})" if held.approval_id else ""
            then = (
                f"it is not offered or run until an approver approves the new one{where}; call it again "
                "once it is listed again"
            )
        else:
            then = held.why
        return ToolDefinitionChanged(f"{what}: {then}.", approvalId=held.approval_id)

    def held(self) -> dict[str, Held]:
        """The tools not offered, by name (a copy)."""
        return dict(self._held)

    async def drain(self) -> None:
        """Stop waiting for approvals (they stay open in Cosigner) and finish the chores."""
        for held in self._held.values():
            if held.task is not None:
                held.task.cancel()
        await asyncio.gather(*(h.task for h in self._held.values() if h.task), return_exceptions=True)
        await asyncio.gather(*self._chores, return_exceptions=True)

    def _release(self, tool: str) -> None:
        """`tool` is listed as pinned again: whatever was asked about it is moot."""
        held = self._held.pop(tool, None)
        if held is not None:
            self._withdraw(held)

    def _refuse(self, tool: str, definition: dict[str, Any], problem: str) -> None:
        why = f"{problem}, so it is not offered or run"
        previous = self._held.get(tool)
        if previous is not None and previous.standing is Standing.REFUSED and previous.why == why:
            return
        if previous is not None:
            self._withdraw(previous)
        self._held[tool] = Held(tool, definition, "", self.lock.get(tool), Standing.REFUSED, why=why)

    def _hold(self, tool: str, definition: dict[str, Any], digest: str, pinned: Pinned | None) -> None:
        held = self._held.get(tool)
        if held is not None and held.digest == digest:
            if held.standing is Standing.UNASKED:
                self._ask_again(held)
            return  # asked already, or refused: once per definition
        if held is not None:
            self._withdraw(held)  # the upstream changed it again: the older question is moot
        if pinned is None and self.new_tools is NewTools.DENY:
            why = (
                "the gateway runs with --new-tools deny, so it is not offered or run (with --new-tools ask "
                "an approver is asked to approve it)"
            )
            self._held[tool] = Held(tool, definition, digest, None, Standing.REFUSED, why=why)
            return
        held = Held(tool, definition, digest, pinned)
        self._held[tool] = held
        held.task = asyncio.ensure_future(self._settle(held))

    def _ask_again(self, held: Held) -> None:
        held.standing, held.why = Standing.ASKING, ""
        held.task = asyncio.ensure_future(self._settle(held))

    def _withdraw(self, held: Held) -> None:
        if held.task is not None:
            held.task.cancel()
        if held.approval_id is not None and held.standing is Standing.ASKING:
            # The card of a definition nobody will pin any more says so, rather than wait.
            self._chore(self._cosigner.cancel(held.approval_id))

    def _chore(self, work: Awaitable[Any]) -> None:
        async def run() -> None:
            try:
                await work
            except Exception as exc:  # a courtesy to the audit record, never worth failing for
                log.info("a definition approval's follow-up failed: %s", type(exc).__name__)

        task = asyncio.ensure_future(run())
        self._chores.add(task)
        task.add_done_callback(self._chores.discard)

    def _pin(self, tool: str, definition: dict[str, Any]) -> bool:
        try:
            self.lock.pin(definition)
        except OSError as exc:  # fail closed: offered only once the file says so
            log.warning("could not write the lock file %s: %s", self.lock.path, exc)
            self._refuse(
                tool, definition, f"the lock file {self.lock.path} could not be written ({exc.strerror})"
            )
            return False
        return True

    async def _settle(self, held: Held) -> None:
        """Ask an approver about `held`'s definition, wait for the answer, and pin it if approved."""
        parameters = {
            "server": self._upstream_name(),
            "tool": held.tool,
            "old": _shown(held.old.definition) if held.old else None,
            "new": _shown(held.definition),
        }
        # The same ids for the same change, so a gateway restarted while it is pending finds
        # the same approval rather than sending a second card.
        pair = f"{held.old.digest if held.old else ''}>{held.digest}"
        ids = "mcp-definition-" + hashlib.sha256(pair.encode()).hexdigest()[:32]
        try:
            decision = await self._request(ids, ids, parameters)
            if not decision.pending and not await self._usable(decision, parameters):
                # An answer of an earlier run of the gateway (its grant long expired, or not an
                # approval): ask afresh.
                decision = await self._request(ids, f"{ids}-{uuid.uuid4().hex[:12]}", parameters)
            held.approval_id = decision.approval_id
            decision = await self._cosigner.wait(decision)
            if not await self._usable(decision, parameters):
                held.standing = Standing.REFUSED
                held.why = (
                    f"approval {decision.approval_id} of the new definition {_ended(decision)}, {UNTIL}"
                )
                return
        except CosignerError as error:
            held.standing = Standing.REFUSED
            held.why = f"Cosigner refused to ask about it ({error.code}: {error.message}), {UNTIL}"
            return
        except Exception as exc:  # fail closed: held until Cosigner can be asked
            log.warning(
                "could not ask Cosigner about the definition of %s: %s", held.tool, type(exc).__name__
            )
            held.standing = Standing.UNASKED
            held.why = f"Cosigner could not be asked about the new definition ({type(exc).__name__})"
            return
        if self._held.get(held.tool) is not held or not self._pin(held.tool, held.definition):
            return
        del self._held[held.tool]
        self._chore(
            self._cosigner.report_result(
                decision, result={"pinned": str(self.lock.path), "tool": held.tool, "digest": held.digest}
            )
        )
        await self._on_pinned(held.tool)

    async def _request(self, execution_id: str, tool_call_id: str, parameters: dict[str, Any]) -> Decision:
        return await self._cosigner.request_approval(
            execution_id=execution_id,
            tool_call_id=tool_call_id,
            tool_name=self._policy_name,
            parameters=parameters,
            surface=self._surface,
            wait=False,
            reason=f"The MCP server {parameters['server']} lists {parameters['tool']} with a definition "
            "not approved before: it is not offered to the agent until this is approved.",
        )

    async def _usable(self, decision: Decision, parameters: dict[str, Any]) -> bool:
        """Whether `decision` approves exactly `parameters`, by a grant that verifies now."""
        if not decision.approved:
            return False
        try:
            await self._cosigner.verify_grant(
                decision.grant, parameters, tool_name=self._policy_name, tool_call_id=decision.tool_call_id
            )
        except GrantRefused as exc:
            log.info("the grant of %s does not pin anything: %s", decision.approval_id, exc)
            return False
        return True


def _shown(definition: dict[str, Any]) -> dict[str, Any]:
    """A definition as the approval shows it: the tool is named beside it."""
    return {k: v for k, v in definition.items() if k != "name"}


def _ended(decision: Decision) -> str:
    by = decision.decided_by
    who = f" by {by.user_id}" if by is not None and by.user_id else ""
    if decision.approved:
        return "came with a grant that does not verify"
    return {"denied": f"was denied{who}", "expired": "expired", "cancelled": "was cancelled"}.get(
        decision.status.value, f"ended as {decision.status.value}"
    )
