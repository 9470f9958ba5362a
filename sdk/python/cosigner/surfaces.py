"""Where a run was triggered, with Python names; each serialises to the wire surface model.

Each is checked when it is built (the wire model's own rules), so a malformed id fails at
the line that wrote it, not later on the server.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic import TypeAdapter

from cosigner import wire
from cosigner.enums import SurfaceType

__all__ = [
    "DashboardSurface",
    "HeadlessSurface",
    "SlackSurface",
    "SmsSurface",
    "Surface",
    "TeamsSurface",
    "WhatsAppSurface",
]

_WIRE: TypeAdapter[Any] = TypeAdapter(wire.Surface)
HEADLESS = (SurfaceType.API, SurfaceType.SCHEDULE, SurfaceType.BATCH, SurfaceType.WEB_WIDGET)


class _Surface:
    """Base of the SDK's surfaces: built from keyword arguments, sent as the wire model."""

    _model: Any
    _json: dict[str, Any]

    def _check(self, body: dict[str, Any]) -> None:
        model = _WIRE.validate_python(body)
        object.__setattr__(self, "_model", model)
        object.__setattr__(self, "_json", model.model_dump(mode="json", exclude_none=True))

    def to_wire(self) -> Any:
        """The wire surface model."""
        return self._model

    def to_json(self) -> dict[str, Any]:
        """The surface as sent on the wire (camelCase, no unset fields)."""
        return dict(self._json)


@dataclass(frozen=True)
class SlackSurface(_Surface):
    """A run triggered in a Slack conversation by `user_id`."""

    team_id: str
    channel_id: str
    user_id: str
    thread_ts: str | None = None
    enterprise_id: str | None = None
    _model: Any = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._check(
            {
                "type": SurfaceType.SLACK.value,
                "teamId": self.team_id,
                "channelId": self.channel_id,
                "userId": self.user_id,
                "threadTs": self.thread_ts,
                "enterpriseId": self.enterprise_id,
            }
        )


@dataclass(frozen=True)
class SmsSurface(_Surface):
    """A run triggered by a text message from `phone` (E.164, e.g. +15550100200)."""

    phone: str
    _model: Any = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._check({"type": SurfaceType.SMS.value, "phone": self.phone})


@dataclass(frozen=True)
class WhatsAppSurface(_Surface):
    """A run triggered by a WhatsApp message from `phone` (E.164, without `whatsapp:`)."""

    phone: str
    _model: Any = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._check({"type": SurfaceType.WHATSAPP.value, "phone": self.phone})


@dataclass(frozen=True)
class TeamsSurface(_Surface):
    """A run triggered in a Microsoft Teams conversation by `user_id` (the AAD object id)."""

    tenant_id: str
    conversation_id: str
    user_id: str
    _model: Any = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._check(
            {
                "type": SurfaceType.TEAMS.value,
                "tenantId": self.tenant_id,
                "conversationId": self.conversation_id,
                "userId": self.user_id,
            }
        )


@dataclass(frozen=True)
class DashboardSurface(_Surface):
    """The tenant's own app, deciding through the API on behalf of its signed-in `user_id`."""

    user_id: str
    _model: Any = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._check({"type": SurfaceType.DASHBOARD.value, "userId": self.user_id})


@dataclass(frozen=True)
class HeadlessSurface(_Surface):
    """A run with no live person: `api`, `schedule`, `batch` or `web_widget` (with a token kind)."""

    type: SurfaceType | str = SurfaceType.API
    token_kind: str | None = None
    _model: Any = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        kind = SurfaceType(self.type)
        if kind not in HEADLESS:
            raise ValueError(
                f"HeadlessSurface type must be one of {', '.join(h.value for h in HEADLESS)}; "
                f"for {kind.value} use {kind.value.capitalize()}Surface"
            )
        if (kind is SurfaceType.WEB_WIDGET) != (self.token_kind is not None):
            raise ValueError("token_kind ('client' or 'server') is required for web_widget and only for it")
        body: dict[str, Any] = {"type": kind.value}
        if self.token_kind is not None:
            body["tokenKind"] = self.token_kind
        self._check(body)


Surface = SlackSurface | SmsSurface | WhatsAppSurface | TeamsSurface | DashboardSurface | HeadlessSurface
"""Any of the SDK's surfaces."""
