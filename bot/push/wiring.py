"""The push adapter for `build_app`: built when the inbox's sign-in is on (people subscribe there)."""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import urlsplit

from bot.egress import Egress
from bot.push.book import Book
from bot.push.post import egress_post
from bot.settings import Settings
from contracts.ports import SurfaceAdapter
from storage.database import Database
from storage.sealing import TokenSeal
from surfaces.push import PushAdapter, PushConfig


def contact_of(settings: Settings) -> str:
    """The VAPID `sub`: the mail sender's address, else the public https URL, else a placeholder
    (push services may refuse a VAPID JWT without a real contact: set COSIGNER_SMTP_FROM)."""
    if settings.smtp_from:
        return f"mailto:{settings.smtp_from}"
    url = urlsplit(settings.public_url)
    if url.scheme == "https" and url.hostname:
        return f"https://{url.netloc}"
    return "mailto:cosigner@localhost"


def push_surface(
    settings: Settings, db: Database, seal: TokenSeal, egress: Egress, clock: Callable[[], float]
) -> Callable[[object], SurfaceAdapter]:
    """The factory `build_app` adds to its surfaces (it takes the desk, and needs none)."""
    book = Book(db, seal, clock)
    config = PushConfig(contact_of(settings))
    return lambda desk: PushAdapter(config, book, egress_post(egress), clock)
