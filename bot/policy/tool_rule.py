"""A tool's merged rule, as every decision reads it, and what its `when` blocks make of it.

`ToolRule` is one tool's rule for one tenant after the merge (`bot.policy.rules`). A rule
with `when` blocks carries, for each block, the rule that decides a call the block matches
(`WhenRule.then`) and the one for a call it cannot evaluate (`WhenRule.unknown`: a person
approves, as the tool's approvers); both are worked out here once, when the policy loads.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from bot.policy.allow_for import AllowFor
from bot.policy.oncall_refs import OnCallRef
from bot.policy.schema import EscalateStep, HandoffSection
from bot.policy.when import Block, State, compile_block
from bot.policy.when_schema import Then, WhenBlock
from contracts.enums import ApprovalMode, ApproverKind, ToolKind
from contracts.reach import Channel

Confirm = bool | Literal["always"] | None


@dataclass(frozen=True, slots=True)
class Threshold:
    """`allow_below` or `deny_above`: `parameter` compared with `value`; with `digits` it may
    also be a string of digits 0-9, compared as the number it spells."""

    parameter: str
    value: float
    digits: bool = False


@dataclass(frozen=True, slots=True)
class ToolRule:
    """A tool's effective rule for one tenant, with `source` naming where it came from."""

    name: str
    kind: ToolKind
    confirm: Confirm
    approvers: tuple[ApproverKind, ...]  # with `oncall`: who is asked when no one on call can be
    redact: tuple[str, ...]
    timeout: float | None
    deny: bool
    deny_reason: str | None
    allow_below: Threshold | None
    gate_all: bool
    source: str
    mode: ApprovalMode
    handoff: HandoffSection | None = None
    deny_above: Threshold | None = None
    # `editable`: the top-level parameters an approver may change (True: every one).
    editable: bool | tuple[str, ...] = False
    quorum: int = 1  # distinct approvers who must approve
    separate_duties: bool = False  # the requester never counts toward the quorum
    step_up: bool = False  # an Approve counts only once confirmed with a passkey (WebAuthn)
    # Which section set each key the merge picked (`kind` → "tenants.acme.tools.x").
    origins: tuple[tuple[str, str], ...] = ()
    # Follow-ups while nobody answers (`bot.workers.follow_ups`): one reminder, then the escalations.
    remind_after: float | None = None
    escalate: tuple[EscalateStep, ...] = ()
    # Rotations whose on-call people are asked (`bot.oncall`), before `approvers`.
    oncall: tuple[OnCallRef, ...] = ()
    audience: str | None = None  # the executor its grants are for (`aud`)
    notify: tuple[Channel, ...] = ()  # also told by these channels, never asked there (`notify`)
    show: tuple[str, ...] = ()  # secret-looking names shown all the same (`redact` still wins)
    # `when` blocks, first match wins, each with the rules it decides by (`with_when`).
    when: tuple[WhenRule, ...] = field(default=(), compare=False)
    # The key path of the `when` block whose outcome this rule is (`tools.Bash.when[1]`);
    # `unevaluable`: the block could not be evaluated on the call, so a person approves it.
    block: str | None = None
    unevaluable: bool = False
    # `parameters_schema` as the merge picked it (a table, or a file's path): for checks only.
    parameters_schema: dict[str, Any] | str | None = field(default=None, compare=False)
    # "Allow for …": the longest standing allow an approver may give, and what it covers.
    allow_for: AllowFor | None = None

    def origin(self, key: str) -> str:
        """The key path of `key` as the merge took it: the tenant's override or the tool's."""
        taken = dict(self.origins)
        # A tool the policy does not name has no section: name the one that would define it.
        section = taken.get(key) or (self.source if "kind" in taken else f"tools.{self.name}")
        return f"{section}.{key}"

    def describe(self) -> str:
        """One line for cards and errors: where the rule lives and what it means."""
        where = self.source
        if self.block is not None:
            where = self.block + (" (could not be evaluated)" if self.unevaluable else "")
        return f"{where}: {self.kind.value} → {self.mode.value}"


def mode_of(kind: ToolKind, confirm: Confirm, gate_all: bool, handoff: bool = False) -> ApprovalMode:
    """The approval mode of a kind and `confirm`, raised from `none` to `ask` by gate_all;
    a tool with a handoff is always handed to a person."""
    if handoff:
        return ApprovalMode.HANDOFF
    if confirm == "always" or (kind is ToolKind.DANGER and confirm is not False):
        mode = ApprovalMode.ASK_ALWAYS
    elif confirm is True:
        mode = ApprovalMode.ASK
    else:
        mode = ApprovalMode.NONE
    if gate_all and mode is ApprovalMode.NONE:
        return ApprovalMode.ASK
    return mode


@dataclass(frozen=True, slots=True)
class WhenRule:
    """One `when` block with the rules it decides by: `then` for a call it matches, `unknown`
    for a call it cannot evaluate."""

    block: Block
    then: ToolRule
    unknown: ToolRule


def outcomes(rule: ToolRule) -> list[ToolRule]:
    """`rule` and every rule its `when` blocks may decide by, for checks that span them."""
    return [rule, *(w.then for w in rule.when if not w.then.deny), *(w.unknown for w in rule.when)]


def with_when(rule: ToolRule, sections: tuple[WhenBlock, ...], origin: str) -> ToolRule:
    """`rule` with its `when` blocks (`origin` is their key path, `tools.Bash.when`), each
    compiled and its outcomes worked out once."""
    if not sections:
        return rule
    blocks = (compile_block(s, f"{origin}[{i}]") for i, s in enumerate(sections))
    return replace(rule, when=tuple(_outcomes(rule, b) for b in blocks))


def _outcomes(base: ToolRule, block: Block) -> WhenRule:
    # A block decides the call, so no threshold of the tool's applies after it.
    own: dict[str, Any] = {"when": (), "block": block.path, "allow_below": None}
    section = block.section
    if block.then is Then.DENY:
        reason = section.reason or f"{block.path} refuses this {base.name} call ({block.summary})"
        then = replace(base, **own, deny=True, deny_reason=reason)
    elif block.then is Then.ALLOW:
        # gate_all: every tool of the tenant needs at least ask, a block's allow too.
        then = replace(base, **own, mode=ApprovalMode.ASK if base.gate_all else ApprovalMode.NONE)
    else:
        origins = dict(base.origins)
        for key in ("approvers", "quorum", "separate_duties", "step_up"):
            if getattr(section, key) is not None:
                origins[key] = block.path
        quorum = section.quorum if section.quorum is not None else base.quorum
        if section.separate_duties is not None:
            separate = section.separate_duties
        elif "separate_duties" in dict(base.origins):
            separate = base.separate_duties
        else:
            separate = quorum > 1
        then = replace(
            base,
            **own,
            # ask_always: "Approve for this run" would let the tool's other calls through too.
            mode=ApprovalMode.ASK_ALWAYS,
            approvers=section.approvers or base.approvers,
            # A block naming its own approvers asks them, not the tool's on-call rotation.
            oncall=() if section.approvers else base.oncall,
            quorum=quorum,
            separate_duties=separate,
            step_up=section.step_up if section.step_up is not None else base.step_up,
            origins=tuple(origins.items()),
        )
    unknown = replace(base, **own, mode=ApprovalMode.ASK_ALWAYS, unevaluable=True)
    return WhenRule(block, then, unknown)


_SAYS = {Then.ALLOW: "none: nobody is asked", Then.ASK: "ask_always", Then.DENY: "the call is refused"}


def first_block(
    rule: ToolRule, parameters: Mapping[str, Any], annotations: Mapping[str, Any] | None = None
) -> tuple[ToolRule, list[tuple[str, str]], str | None]:
    """The rule the first block that matches (or cannot be evaluated) decides by, else `rule`;
    a (key path, what it says) step for each block tried; why that block could not be evaluated."""
    steps: list[tuple[str, str]] = []
    for w in rule.when:
        block = w.block
        state, why = block.verdict(parameters, annotations)
        if state is State.NO:
            steps.append((block.path, f"not met: {why}"))
        elif state is State.MATCH:
            said = f'{block.summary}: then = "{block.then.value}" → {_SAYS[block.then]}'
            if block.then is Then.DENY:
                said += f" ({w.then.deny_reason})"
            return w.then, [*steps, (block.path, said)], None
        else:
            said = f"cannot be evaluated: {why}; a person decides (ask_always), whatever the block says"
            return w.unknown, [*steps, (block.path, said)], why
    steps.append((rule.origin("when"), "no block matches: the tool's own rule decides"))
    return rule, steps, None
