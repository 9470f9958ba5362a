"""What the SMS surface keeps between texts, through a store it is handed (`SmsStore`).

SMS and WhatsApp (which goes through the same Twilio messaging) remember who opted out, what
was texted to which number and showing which version of the call, the MessageSids of the
texts they sent, whose outcomes were texted, and which inbound texts were handled. Storage
implements the port (`storage.sms_state.SmsState`); the approvals themselves are read and
answered through the `SmsDesk` of `contracts.ports`.
"""

from __future__ import annotations

from typing import Protocol


class SmsStore(Protocol):
    """The SMS surface's own state: inbound texts handled, opt-outs, texts sent and shown."""

    async def message_seen(self, message_sid: str) -> bool:
        """True if this inbound text was handled before."""
        ...

    async def mark_message_seen(self, message_sid: str) -> bool:
        """Record an inbound text as handled; True the first time, False for a copy."""
        ...

    async def opted_out(self, number: str) -> bool:
        """True while `number` has opted out by STOP."""
        ...

    async def set_opted_out(self, number: str, out: bool) -> None:
        """Record an opt-out (STOP) or clear it (START)."""
        ...

    async def mark_texting(
        self, approval_id: str, number: str, digest: str | None = None, unshown: str | None = None
    ) -> None:
        """Record that the request is about to be texted to `number`, showing the call with
        `digest` (`ApprovalCard.digest`), and `unshown`: why the texts cannot show that call
        whole, if they cannot (a YES to it is then refused)."""
        ...

    async def texted_digest(self, approval_id: str, number: str) -> str | None:
        """The digest of the call last texted to `number` (what its answer is given for)."""
        ...

    async def texted_unshown(self, approval_id: str, number: str) -> str | None:
        """Why the request's latest text to `number` could not show the call whole (None: it could)."""
        ...

    async def shown(self, approval_id: str, number: str) -> None:
        """Record that a text about the request (a reminder, its whole call) went to `number`
        now; the request's own texts are recorded by `mark_texting`."""
        ...

    async def texted_other(self, number: str, approval_id: str, within: float) -> str | None:
        """Another request texted to `number` in the last `within` seconds, or since this
        request's latest text to it (a bare YES could mean either); None when none was."""
        ...

    async def was_texted(self, approval_id: str, number: str) -> bool:
        """True once the request was (or was being) texted to `number`."""
        ...

    async def record_sent(self, approval_id: str, number: str, message_sid: str) -> None:
        """Record the MessageSid of the request texted to `number`."""
        ...

    async def sent_sid(self, approval_id: str, number: str) -> str | None:
        """The MessageSid of the request already texted to `number`, if any."""
        ...

    async def approval_of_sid(self, message_sid: str) -> str | None:
        """The approval a request text with this MessageSid belongs to."""
        ...

    async def first_outcome(self, approval_id: str, number: str) -> bool:
        """Record that the outcome is texted to `number`; False if it was before. An interim
        outcome is recorded under the approval id with a suffix (`apv_…#reconciling`)."""
        ...
