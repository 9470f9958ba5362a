"""A push service's POST through the server's checked, pinned client (`bot.egress`).

Push endpoints come from browsers, so they are treated like callback URLs: the same
egress rules (public addresses over https unless COSIGNER_CALLBACK_ALLOW says otherwise),
the address pinned once checked, no redirect followed.
"""

from __future__ import annotations

from collections.abc import Mapping

from bot.egress import Egress, EgressFailed, EgressRefused
from contracts.reach import Post, Unsent


def egress_post(egress: Egress) -> Post:
    """A `Post` over `egress`: (status, reason), or `Unsent` when no answer came."""

    async def post(url: str, body: bytes, headers: Mapping[str, str]) -> tuple[int, str]:
        try:
            answer = await egress.post(url, content=body, headers=headers)
        except EgressRefused as exc:
            raise Unsent(f"the egress rules refuse this push service: {exc}", lasting=True) from None
        except EgressFailed as exc:
            raise Unsent(f"the push service did not answer ({exc.reason})", lasting=False) from None
        return answer.status_code, ""

    return post
