"""The run's surface as the server reads it: the wire model (`contracts.wire.Surface`) a
stored approval holds, or its wire fields, as a request being admitted still holds them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from contracts.wire import DashboardSurface, SlackSurface, SmsSurface, Surface, TeamsSurface, WhatsAppSurface

SurfaceLike = Surface | Mapping[str, Any]


def surface_fields(surface: SurfaceLike) -> Mapping[str, Any]:
    """The surface's wire fields (`type`, `userId`, `phone`, …), to read as a mapping."""
    if isinstance(surface, Mapping):
        return surface
    return surface.__dict__  # a wire model's fields as they are: cheaper than a dump


def person_of(surface: Surface) -> str | None:
    """The id of the person who triggered the run (a user id or a phone number), if any."""
    if isinstance(surface, SlackSurface | TeamsSurface | DashboardSurface):
        return surface.userId
    if isinstance(surface, SmsSurface | WhatsAppSurface):
        return surface.phone
    return None
