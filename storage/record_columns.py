"""An approval row's JSON columns as typed values and back: its route, delivery receipt,
trace context, handoff, edit, follow-ups and the run's surface (`storage.records` builds
its `Record` from them). The row format is what these functions write."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from typing import Any

from pydantic import TypeAdapter

from contracts.edits import EditState
from contracts.enums import ApproverKind, SurfaceType
from contracts.handoff import HandoffState
from contracts.ports import DashboardRoute, Delivered, Route, SlackRoute, SmsRoute, TeamsRoute
from contracts.wire import Surface

_SURFACE: TypeAdapter[Surface] = TypeAdapter(Surface)


def ts(seconds: float) -> datetime:
    """UNIX seconds as an aware UTC datetime."""
    return datetime.fromtimestamp(seconds, tz=UTC)


def iso(seconds: float) -> str:
    """UNIX seconds as ISO 8601 with milliseconds and a Z."""
    return ts(seconds).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def route_fields(route: Route) -> dict[str, Any]:
    """A route as plain fields, as the audit record and the approvals table keep it."""
    return asdict(route)


def route_to_json(route: Route) -> str:
    """Serialise a route for the approvals table."""
    return json.dumps(route_fields(route), separators=(",", ":"))


def route_from_json(text: str | None) -> Route | None:
    """Rebuild a route stored by `route_to_json`."""
    return route_from_fields(json.loads(text)) if text else None


def route_from_fields(fields: Mapping[str, Any]) -> Route:
    """Rebuild a route from its plain fields (`route_fields`), as a job's payload holds it."""
    d = dict(fields)
    d["approvers"] = tuple(d["approvers"])
    d["surface"] = SurfaceType(d["surface"])
    if d["surface"] is SurfaceType.SLACK:
        d["approver_teams"] = tuple(d["approver_teams"])
        return SlackRoute(**d)
    if d["surface"] in (SurfaceType.SMS, SurfaceType.WHATSAPP):
        return SmsRoute(**d)
    if d["surface"] is SurfaceType.TEAMS:
        return TeamsRoute(**d)
    d["email"] = tuple(d.get("email", ()))
    return DashboardRoute(**d)


@dataclass(frozen=True)
class TraceContext:
    """What an approval keeps of its trace besides the trace id: its span's id (hex), the
    sampler's say, and its parent (the incoming span's id, flags and tracestate), enough to
    export the span later anywhere."""

    span: str
    sampled: bool
    parent: str | None = None
    parent_flags: int = 0
    state: str | None = None

    def to_json(self) -> str:
        """The approvals table's `trace_context` text."""
        stored: dict[str, Any] = {"span": self.span, "sampled": self.sampled}
        if self.parent is not None:
            stored.update(parent=self.parent, parentFlags=self.parent_flags, state=self.state)
        return json.dumps(stored, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str | None) -> TraceContext | None:
        """Rebuild a stored trace context; None without one, or for an unreadable one."""
        if not text:
            return None
        try:
            d = json.loads(text)
            parent = str(d["parent"]) if d.get("parent") else None
            return cls(
                str(d["span"]),
                bool(d["sampled"]),
                parent,
                int(d["parentFlags"]) if parent is not None else 0,
                str(d["state"]) if parent is not None and d.get("state") else None,
            )
        except (ValueError, KeyError, TypeError):
            return None


def delivered_to_json(d: Delivered) -> str:
    """Serialise a delivery receipt."""
    return json.dumps(
        {
            "surface": d.surface,
            "conversation": d.conversation,
            "message_refs": list(d.message_refs),
            "app_id": d.app_id,
            "extra": dict(d.extra),
        },
        separators=(",", ":"),
    )


def delivered_from_json(text: str | None) -> Delivered | None:
    """Rebuild a stored delivery receipt."""
    if not text:
        return None
    d = json.loads(text)
    return Delivered(
        surface=SurfaceType(d["surface"]),
        conversation=d["conversation"],
        message_refs=tuple(d["message_refs"]),
        app_id=d.get("app_id"),
        extra=d.get("extra") or {},
    )


def handoff_from_json(text: str | None) -> HandoffState | None:
    """Rebuild a handoff stored as JSON (None for an ordinary approval)."""
    return HandoffState.model_validate_json(text) if text else None


def edit_from_json(text: str | None) -> EditState | None:
    """Rebuild an edit state stored as JSON (None for a call nobody may edit)."""
    return EditState.model_validate_json(text) if text else None


def edit_to_json(state: EditState) -> str:
    """Serialise an edit state for the approvals table."""
    return state.model_dump_json(by_alias=True, exclude_none=True)


def delivery_key(route: Route) -> str:
    """The indexed key that finds pending approvals by where they were delivered."""
    if isinstance(route, SlackRoute):
        return f"slack:{route.channel_id}"
    if isinstance(route, SmsRoute):
        return f"sms:{route.from_number or route.messaging_service_sid}"
    if isinstance(route, TeamsRoute):
        return f"teams:{route.conversation_id}"
    return "dashboard"


@dataclass(frozen=True)
class Escalation:
    """One escalation step taken: which (`step`, its index in the rule's `escalate`), to whom,
    when, the route it was delivered on and, once delivered, the receipt answers are checked
    against."""

    step: int
    to: ApproverKind
    at: float
    route: Route
    delivered: Delivered | None = None


@dataclass(frozen=True)
class FollowUps:
    """What happened while nobody answered: when the reminder went out, the escalations."""

    reminded_at: float | None = None
    escalations: tuple[Escalation, ...] = ()

    def step(self, index: int) -> Escalation | None:
        """The escalation step `index`, if it was taken."""
        return next((e for e in self.escalations if e.step == index), None)

    def with_step(self, e: Escalation) -> FollowUps:
        """These follow-ups with step `e` added, or replaced (its receipt stored)."""
        others = tuple(x for x in self.escalations if x.step != e.step)
        return replace(self, escalations=tuple(sorted((*others, e), key=lambda x: x.step)))

    def to_json(self) -> str:
        """As the approvals table keeps it."""
        return json.dumps(
            {
                "reminded_at": self.reminded_at,
                "escalations": [
                    {
                        "step": e.step,
                        "to": e.to.value,
                        "at": e.at,
                        "route": route_fields(e.route),
                        "delivered": json.loads(delivered_to_json(e.delivered)) if e.delivered else None,
                    }
                    for e in self.escalations
                ],
            },
            separators=(",", ":"),
        )

    @classmethod
    def from_json(cls, text: str | None) -> FollowUps | None:
        """Rebuild what `to_json` stored (None: nothing happened yet)."""
        if not text:
            return None
        d = json.loads(text)
        return cls(
            reminded_at=d.get("reminded_at"),
            escalations=tuple(
                Escalation(
                    step=e["step"],
                    to=ApproverKind(e["to"]),
                    at=e["at"],
                    route=_route(e["route"]),
                    delivered=delivered_from_json(json.dumps(e["delivered"])) if e["delivered"] else None,
                )
                for e in d.get("escalations", ())
            ),
        )


def _route(fields: dict[str, Any]) -> Route:
    route = route_from_json(json.dumps(fields))
    assert route is not None  # a stored escalation always has its route
    return route


def surface_from_json(text: str) -> Surface:
    """The run's surface, stored as its wire fields (the request's, as validated then)."""
    return _SURFACE.validate_json(text)


def surface_fields(surface: Surface | Mapping[str, Any]) -> dict[str, Any]:
    """A surface as its wire fields (camelCase, `type` included), as the row stores it."""
    if isinstance(surface, Mapping):
        return dict(surface)
    return surface.model_dump(mode="json")
