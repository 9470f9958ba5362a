"""The approvers' web inbox at `/inbox`: OpenID Connect sign-in, what waits for each person,
history and standing denies, answered through the same checks as every surface.

`inbox_mount(engine, settings, clock)` is the one route `bot.http.app` adds; the session cookie
middleware lives inside the mount, so no other route sees a cookie.
"""

from bot.inbox.site import inbox_mount, not_configured_message

__all__ = ["inbox_mount", "not_configured_message"]
