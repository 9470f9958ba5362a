"""Ask Cosigner about one tool use, within a deadline, through the hook's own client.

The session is the execution and the tool use the call, so asking again for the same tool
use (a second hook, a retry) finds the same approval. The approval is asked to expire when
the hook gives up, and is withdrawn if it is still pending then, so that nobody approves a
call that will not run. The client (`cosigner.hooks.plain`) is the standard library's: the
hook starts a new process per tool call, and the SDK's client would take longer to load than
the whole answer.
"""

from __future__ import annotations

import time

from cosigner.hooks.event import ToolUse
from cosigner.hooks.plain import Answer, BadAnswer, Call, PlainClient, Refused, Unreachable
from cosigner.hooks.settings import HookSettings
from cosigner.hooks.surface import SurfaceError, surface_json
from cosigner.hooks.verdict import Verdict, deny, verdict_of

__all__ = ["Asking", "verdict_for"]

WITHDRAW_SECONDS = 2.0
"""How long withdrawing a request may take once the hook's time is up."""
ALREADY_DECIDED = "ALREADY_DECIDED"


def verdict_for(answer: Answer) -> Verdict:
    """The hook's answer for a decision about the call (anything but `approved` is a deny)."""
    if not answer.settled:
        return deny("Cosigner's answer is still pending; the call was not run")
    return verdict_of(
        status=answer.status,
        decider=answer.decider,
        user_id=answer.user_id,
        surface=answer.surface,
        rule=answer.rule,
        comment=answer.comment,
    )


class Asking:
    """One tool use asked about; remembers the approval so that it can be withdrawn."""

    def __init__(self, settings: HookSettings) -> None:
        self.settings = settings
        self.call: Call | None = None

    @property
    def approval_id(self) -> str | None:
        """The approval Cosigner made for the call, once it answered."""
        return None if self.call is None else self.call.approval_id

    def run(self, use: ToolUse, deadline: float) -> Verdict:
        """Ask, then wait until decided or `deadline` (`time.monotonic()`); a deny on any error."""
        try:
            return self._run(use, deadline)
        except Refused as exc:
            return deny(f"Cosigner refused the call ({exc.code}): {exc.message}")
        except BadAnswer as exc:
            return deny(f"Cosigner's answer could not be trusted ({exc}); the call was not run")
        except TimeoutError:
            withdrawn = self.withdraw()
            return withdrawn or self.too_late()
        except Exception as exc:  # the network, a bad URL: anything means the call is not run
            return deny(f"Cosigner at {self.settings.url} could not be asked ({type(exc).__name__}: {exc})")

    def _run(self, use: ToolUse, deadline: float) -> Verdict:
        try:
            surface = surface_json(self.settings.surface)
        except SurfaceError as exc:
            return deny(f"COSIGNER_SURFACE {exc}")
        left = deadline - time.monotonic()
        if left <= 0:
            return self.too_late()
        # Retrying an unreachable Cosigner stops well before the deadline, so that the
        # deny names the network error rather than the timeout.
        client = self._client(left, retry_for=min(left - 2.0, left / 2))
        self.call = call = Call.of(use)
        answer = client.create(call, surface, use.reason(), max(1, int(left)))
        while not answer.settled:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError
            answer = client.wait(call, remaining)
        return verdict_for(answer)

    def withdraw(self) -> Verdict | None:
        """Cancel the pending request; if a person answered meanwhile, that answer's verdict."""
        call = self.call
        if call is None or call.approval_id is None:
            return None
        client = self._client(WITHDRAW_SECONDS)
        try:
            try:
                client.cancel(call)
            except Refused as exc:
                if exc.code != ALREADY_DECIDED:
                    return None
                return verdict_for(client.get(call))
        except (Refused, BadAnswer, Unreachable, OSError):
            return None  # withdrawing is a courtesy to the approver; the answer is deny either way
        return None

    def too_late(self) -> Verdict:
        """The deny for no answer within the hook's time."""
        return deny(
            f"no answer from Cosigner within the hook's {self.settings.timeout:g} s; the call was not "
            "run (a person may still be reading it: ask again later)"
        )

    def _client(self, seconds: float, retry_for: float = 0.0) -> PlainClient:
        budget = max(0.5, seconds)
        return PlainClient(
            self.settings.url, self.settings.api_key, timeout=min(10.0, budget), retry_for=max(0.0, retry_for)
        )
