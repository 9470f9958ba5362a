"""Ask Cosigner about one tool use through the SDK's blocking client, within a deadline.

The session is the execution and the tool use the call, so asking again for the same tool
use (a second hook, a retry) finds the same approval. The approval is asked to expire when
the hook gives up, and is withdrawn if it is still pending then, so that nobody approves a
call that will not run.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from cosigner.hooks.event import ToolUse
from cosigner.hooks.settings import HookSettings
from cosigner.hooks.verdict import Verdict, deny, verdict_of

if TYPE_CHECKING:
    from cosigner.client import Cosigner
    from cosigner.decision import Decision

__all__ = ["Asking", "verdict_for"]

WITHDRAW_SECONDS = 2.0
"""How long withdrawing a request may take once the hook's time is up."""


def verdict_for(decision: Decision) -> Verdict:
    """The hook's answer for a settled decision (anything else is a deny)."""
    by = decision.decided_by
    return verdict_of(
        status=decision.status.value,
        decider=None if by is None else by.kind.value,
        user_id=None if by is None else by.user_id,
        surface=None if by is None else by.surface,
        rule=None if by is None else by.rule,
        comment=decision.comment,
    )


class Asking:
    """One tool use asked about; remembers the approval so that it can be withdrawn."""

    def __init__(self, settings: HookSettings) -> None:
        self.settings = settings
        self.approval_id: str | None = None

    def run(self, use: ToolUse, deadline: float) -> Verdict:
        """Ask, then wait until decided or `deadline` (`time.monotonic()`); a deny on any error."""
        from cosigner.errors import CosignerError

        try:
            return self._run(use, deadline)
        except CosignerError as exc:
            return deny(f"Cosigner refused the call ({exc.code}): {exc.message}")
        except TimeoutError:
            withdrawn = self.withdraw()
            return withdrawn or self.too_late()
        except Exception as exc:  # the network, a bad URL: anything means the call is not run
            return deny(f"Cosigner at {self.settings.url} could not be asked ({type(exc).__name__}: {exc})")

    def _run(self, use: ToolUse, deadline: float) -> Verdict:
        from cosigner.mcp_gateway.surface_spec import SurfaceSpecError, parse_surface

        try:
            surface = parse_surface(self.settings.surface)
        except SurfaceSpecError as exc:
            return deny(f"COSIGNER_SURFACE: {exc}")
        left = deadline - time.monotonic()
        if left <= 0:
            return self.too_late()
        # Retrying an unreachable Cosigner stops well before the deadline, so that the
        # deny names the network error rather than the timeout.
        with self._client(left, retry_for=min(left - 2.0, left / 2)) as client:
            decision = client.request_approval(
                execution_id=use.session_id,
                tool_call_id=use.tool_use_id,
                tool_name=use.tool_name,
                parameters=use.tool_input,
                surface=surface,
                reason=use.reason(),
                timeout_seconds=max(1, int(left)),
                wait=False,
            )
            self.approval_id = decision.approval_id
            if not decision.settled:
                decision = client.wait(decision, timeout=max(0.0, deadline - time.monotonic()))
        return verdict_for(decision)

    def withdraw(self) -> Verdict | None:
        """Cancel the pending request; if a person answered meanwhile, that answer's verdict."""
        if self.approval_id is None:
            return None
        from cosigner.errors import AlreadyDecided

        try:
            with self._client(WITHDRAW_SECONDS) as client:
                try:
                    client.cancel(self.approval_id)
                except AlreadyDecided:
                    return verdict_for(client.get(self.approval_id))
        except Exception:  # withdrawing is a courtesy to the approver; the answer is deny either way
            return None
        return None

    def too_late(self) -> Verdict:
        """The deny for no answer within the hook's time."""
        return deny(
            f"no answer from Cosigner within the hook's {self.settings.timeout:g} s; the call was not "
            "run (a person may still be reading it: ask again later)"
        )

    def _client(self, seconds: float, retry_for: float = 0.0) -> Cosigner:
        from cosigner.client import Cosigner

        budget = max(0.5, seconds)
        return Cosigner(
            self.settings.url, self.settings.api_key, timeout=min(10.0, budget), retry_for=max(0.0, retry_for)
        )
