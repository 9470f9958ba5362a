"""The base of every audit event model (`cosigner.audit_events`), what a request or an
escalation records of on call, and `UnknownEvent`, the data of a kind no model reads."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict


class _Event(BaseModel):
    """What every event model shares: extra fields are kept, never refused."""

    model_config = ConfigDict(extra="allow", frozen=True, strict=True)

    kind: str  # the stored kind; each model names its own (never part of the stored data)


class OnCallNote(BaseModel):
    """What a request or an escalation step records of on call: the rotations, who was on
    call, who of them was asked and who is unknown here; or why nobody on call could be
    asked (`fallback`), and the rule's other approvers were asked instead."""

    model_config = ConfigDict(extra="allow", frozen=True, strict=True)

    rotations: list[str] | None = None
    onCall: list[str] | None = None
    asked: list[str] | None = None
    unknown: list[str] | None = None
    fallback: str | None = None


class UnknownEvent(BaseModel):
    """A kind this version does not know (or data its kind's model could not read): the kind
    and the stored data, kept whole."""

    model_config = ConfigDict(frozen=True)

    kind: str
    fields: dict[str, Any]
