"""What happened to an approval, as one readable line for `cosigner dev`'s console.

The engine attaches an `Activity` to its log records (`extra={"activity": …}`). The
readable formatter of `cosigner dev` (`bot/observability/logs.py`) prints its `line()`; the JSON
formatter of `serve` drops it, as it drops every field off its allow-list, so `serve`'s
lines are unchanged. The line is built only when printed. It names the approval, tenant,
tool, who and the outcome, never parameters, reasons or comments.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from contracts.answers import AgentDecider, DecidedBy, PersonDecider, PolicyDecider, SystemDecider
from contracts.enums import ApprovalStatus
from storage.records import Record

__all__ = ["Activity", "PersonAnswer", "Step", "decider"]


class Step(StrEnum):
    """The moments of an approval the console shows."""

    CREATED = "created"
    ANSWERED = "answered"
    DECIDED = "decided"


@dataclass(frozen=True)
class PersonAnswer:
    """A person's answer: who, what they asked for, and the code it was refused with, if it was."""

    by: PersonDecider
    wanted: ApprovalStatus
    refused: str | None


@dataclass(frozen=True)
class Activity:
    """One moment of one approval (`answer` is set for `Step.ANSWERED`)."""

    step: Step
    record: Record
    answer: PersonAnswer | None = None

    def line(self) -> str:
        """The console line, e.g. `decided  apv_…  acme  issue_refund: approved by slack:U0ALICE`."""
        rec = self.record
        if self.answer is not None:
            a = self.answer
            what = f"{decider(a.by)} answered {a.wanted.value}, " + (
                f"refused ({a.refused})" if a.refused else "accepted"
            )
        elif self.step is Step.DECIDED:
            what = f"{rec.status.value} by {decider(rec.decided_by)}"
        elif rec.closed:
            what = f"asked by {rec.triggered_by()}, {rec.status.value} at once by {decider(rec.decided_by)}"
        else:
            where = rec.route.surface.value if rec.route is not None else "no surface"
            what = f"asked by {rec.triggered_by()}, waiting for a person on {where}"
        return f"{self.step.value:<8} {rec.id}  {rec.tenant}  {rec.tool_name}: {what}"


def decider(by: DecidedBy | None) -> str:
    """Who or what decided, in words."""
    if isinstance(by, PersonDecider):
        # A WhatsApp approver's id is already its address (`whatsapp:+1555…`): not prefixed twice.
        prefix = f"{by.surface.value}:"
        return by.userId if by.userId.startswith(prefix) else prefix + by.userId
    if isinstance(by, PolicyDecider):
        return f"the policy ({by.rule})"
    if isinstance(by, SystemDecider):
        return f"Cosigner, failing closed ({by.code})"
    if isinstance(by, AgentDecider):
        return "the agent"
    return "nobody in time (expiry means deny)" if by is not None else "nobody"
