"""A small in-memory SmsDesk and SmsStore, and the fixtures the SMS tests share."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette

from contracts.enums import ApprovalMode, ApprovalStatus, AuditEvent, SurfaceType, ToolKind, Verdict
from contracts.errors import (
    AlreadyDecided,
    ApprovalExpired,
    ApprovalModeUnsupported,
    ApprovalNotFound,
    NotAnApprover,
    WrongConversation,
    WrongTenant,
)
from contracts.ports import (
    Answer,
    ApprovalCard,
    Delivered,
    Ending,
    Look,
    Placed,
    SmsRoute,
)
from surfaces.sms import SmsAdapter, SmsConfig
from surfaces.sms.caller import TwilioCaller
from surfaces.sms.emulator import TwilioEmulator

ACCOUNT = "AC" + "0123456789abcdef" * 2
TOKEN = "test-auth-token"
PUBLIC = "https://cosigner.example.com"
BOT = "+15550000001"  # the tenant's sms_from
ALICE = "+15550000002"
BOB = "+15550000003"
MALLORY = "+15550000666"
START = datetime(2026, 1, 2, 15, 0, tzinfo=UTC)


def make_card(
    approval_id: str = "apr_1",
    short_code: str = "4821",
    *,
    tool_name: str = "issue_refund",
    parameters: Mapping[str, Any] | None = None,
    reason: str | None = "Customer says the discount was not applied",
    status: ApprovalStatus = ApprovalStatus.PENDING,
    outcome: Ending | None = None,
    created_at: datetime = START,
) -> ApprovalCard:
    """A card as the engine would hand it over (parameters already redacted)."""
    return ApprovalCard(
        approval_id=approval_id,
        short_code=short_code,
        tenant="acme",
        execution_id="run_81",
        tool_call_id=f"call_{approval_id}",
        tool_name=tool_name,
        kind=ToolKind.DANGER,
        mode=ApprovalMode.ASK_ALWAYS,
        parameters=(
            {"orderId": "ord_4421", "amountCents": 12900, "cardToken": "[REDACTED]"}
            if parameters is None
            else parameters
        ),
        reason=reason,
        triggered_by=f"sms:{ALICE}",
        policy_rule="tools.issue_refund: danger → ask_always",
        created_at=created_at,
        expires_at=created_at + timedelta(hours=1),
        status=status,
        outcome=outcome,
    )


def sms_route(*approvers: str, from_number: str | None = BOT, service: str | None = None) -> SmsRoute:
    return SmsRoute(
        surface=SurfaceType.SMS,
        from_number=from_number,
        messaging_service_sid=service,
        approvers=approvers or (ALICE,),
    )


class FakeStore:
    """The storage side of `SmsStore`, in memory: what the SMS surface keeps itself."""

    def __init__(self) -> None:
        self.opted: set[str] = set()
        self.sids: dict[str, str] = {}  # MessageSid → approval id
        self.sent: dict[tuple[str, str], str] = {}  # (approval id, number) → MessageSid
        self.marks: set[tuple[str, str]] = set()
        self.texted: dict[tuple[str, str], str | None] = {}
        self.unshown: dict[tuple[str, str], str | None] = {}
        self.shown_at: dict[tuple[str, str], float] = {}  # (number, approval id) → when texted
        self.now = 0.0  # the store's clock, for a bare YES soon after another request's text

    def _mark(self, namespace: str, key: str) -> bool:
        if (namespace, key) in self.marks:
            return False
        self.marks.add((namespace, key))
        return True

    async def message_seen(self, message_sid: str) -> bool:
        return ("seen", message_sid) in self.marks

    async def mark_message_seen(self, message_sid: str) -> bool:
        return self._mark("seen", message_sid)

    async def opted_out(self, number: str) -> bool:
        return number in self.opted

    async def set_opted_out(self, number: str, out: bool) -> None:
        if out:
            self.opted.add(number)
        else:
            self.opted.discard(number)

    async def mark_texting(
        self, approval_id: str, number: str, digest: str | None = None, unshown: str | None = None
    ) -> None:
        self._mark("texted", f"{approval_id}:{number}")
        self.texted[(approval_id, number)] = digest
        self.unshown[(approval_id, number)] = unshown
        await self.shown(approval_id, number)

    async def texted_digest(self, approval_id: str, number: str) -> str | None:
        return self.texted.get((approval_id, number))

    async def texted_unshown(self, approval_id: str, number: str) -> str | None:
        return self.unshown.get((approval_id, number))

    async def shown(self, approval_id: str, number: str) -> None:
        self.shown_at[(number, approval_id)] = self.now

    async def texted_other(self, number: str, approval_id: str, within: float) -> str | None:
        # Like storage.sms_state.texted_other, on the store's own clock (`now`).
        own = self.shown_at.get((number, approval_id))
        start = self.now - within if own is None else min(self.now - within, own)
        others = [
            a for (n, a), at in self.shown_at.items() if n == number and a != approval_id and at >= start
        ]
        return others[0] if others else None

    async def was_texted(self, approval_id: str, number: str) -> bool:
        return ("texted", f"{approval_id}:{number}") in self.marks

    async def record_sent(self, approval_id: str, number: str, message_sid: str) -> None:
        self.sids[message_sid] = approval_id
        self.sent[(approval_id, number)] = message_sid

    async def sent_sid(self, approval_id: str, number: str) -> str | None:
        return self.sent.get((approval_id, number))

    async def approval_of_sid(self, message_sid: str) -> str | None:
        return self.sids.get(message_sid)

    async def first_outcome(self, approval_id: str, number: str) -> bool:
        return self._mark("outcome", f"{approval_id}:{number}")


class FakeDesk:
    """The engine's side of `SmsDesk`, in memory, with the same checks `answer` makes."""

    def __init__(self, store: FakeStore) -> None:
        self.store = store  # an answer's message id is recorded where the surface looks for it
        self.approvals: dict[str, Placed] = {}
        self.notes: list[tuple[str, str, dict[str, Any]]] = []
        self.answers: list[Answer] = []
        self.failures: list[tuple[str, str, str]] = []

    def add(self, card: ApprovalCard, route: SmsRoute, conversation: str | None = BOT) -> Placed:
        delivered = None if conversation is None else Delivered(SurfaceType.SMS, conversation, ("SMx",))
        placed = Placed(card=card, route=route, delivered=delivered)
        self.approvals[card.approval_id] = placed
        return placed

    def status(self, approval_id: str) -> ApprovalStatus:
        return self.approvals[approval_id].card.status

    def close(self, approval_id: str, status: ApprovalStatus, kind: str, who: str | None) -> None:
        placed = self.approvals[approval_id]
        outcome = Ending(status=status, decided_at=START, decider_kind=kind, decider=who)
        card = dataclasses.replace(placed.card, status=status, outcome=outcome)
        self.approvals[approval_id] = dataclasses.replace(placed, card=card)

    async def answer(self, answer: Answer) -> ApprovalCard:
        placed = self.approvals.get(answer.approval_id)
        if placed is None:
            raise ApprovalNotFound("no such approval")
        if answer.message_id is not None:
            # Like the engine: the message id is recorded with the answer or its refusal.
            if not await self.store.mark_message_seen(answer.message_id):
                return placed.card
        if placed.card.status is ApprovalStatus.EXPIRED:
            raise ApprovalExpired("the request expired; nothing was done.")
        if placed.card.status is not ApprovalStatus.PENDING:
            raise AlreadyDecided(f"the request is already {placed.card.status.value}.")
        if placed.delivered is None or answer.conversation != placed.delivered.conversation:
            raise WrongConversation("this number was not asked.")
        if answer.org != placed.delivered.conversation:
            raise WrongTenant("another tenant's number.")
        if answer.actor not in placed.route.approvers:
            raise NotAnApprover("you are not an approver of this request.")
        if answer.mismatch is not None:
            raise WrongConversation(answer.mismatch)  # a WhatsApp tap not this number's to give
        self.answers.append(answer)
        if answer.unshown is not None and answer.verdict is Verdict.APPROVE:
            raise ApprovalModeUnsupported(answer.unshown)  # as check_answer: nothing unseen approved
        status = ApprovalStatus.APPROVED if answer.verdict is Verdict.APPROVE else ApprovalStatus.DENIED
        self.close(answer.approval_id, status, "person", answer.actor)
        return self.approvals[answer.approval_id].card

    async def full_call(self, look: Look) -> ApprovalCard:
        placed = self.approvals.get(look.approval_id)
        if placed is None:
            raise ApprovalNotFound("no such approval")
        if look.actor not in placed.route.approvers:
            raise NotAnApprover("you are not an approver of this request.")
        return placed.card

    async def placed(self, approval_id: str) -> Placed | None:
        return self.approvals.get(approval_id)

    async def sending(self, approval_id: str, receipt: Delivered) -> None:
        placed = self.approvals.get(approval_id)
        if placed is not None and placed.delivered is None:
            self.approvals[approval_id] = dataclasses.replace(placed, delivered=receipt)

    def _between(self, to_number: str, from_number: str) -> list[Placed]:
        # Like the engine: filed by the route's sender from creation on, delivered or not.
        return [
            p
            for p in self.approvals.values()
            if isinstance(p.route, SmsRoute)
            and (p.route.from_number or p.route.messaging_service_sid) == to_number
            and from_number in p.route.approvers
        ]

    async def pending_for_number(self, to_number: str, from_number: str) -> Sequence[Placed]:
        return [p for p in self._between(to_number, from_number) if p.card.status is ApprovalStatus.PENDING]

    async def latest_for_number(self, to_number: str, from_number: str) -> Placed | None:
        between = self._between(to_number, from_number)
        return max(between, key=lambda p: p.card.created_at) if between else None

    async def fail_closed(self, approval_id: str, code: str, message: str) -> None:
        if self.status(approval_id) is ApprovalStatus.PENDING:
            self.failures.append((approval_id, code, message))
            self.close(approval_id, ApprovalStatus.DENIED, "system", code)

    async def note(self, approval_id: str, event: AuditEvent, data: Mapping[str, Any]) -> None:
        self.notes.append((approval_id, event, dict(data)))

    def tenant_for_org(self, surface: SurfaceType, org: str) -> str | None:
        return "acme" if (surface, org) == (SurfaceType.SMS, BOT) else None


@pytest.fixture
def store() -> FakeStore:
    return FakeStore()


@pytest.fixture
def desk(store: FakeStore) -> FakeDesk:
    return FakeDesk(store)


@pytest.fixture
async def emu() -> AsyncIterator[TwilioEmulator]:
    async with TwilioEmulator.running(ACCOUNT, TOKEN) as emulator:
        yield emulator


@pytest.fixture
def config(emu: TwilioEmulator) -> SmsConfig:
    return SmsConfig(
        account_sid=ACCOUNT,
        auth_token=TOKEN,
        from_number=BOT,
        messaging_service_sid=None,
        api_url=emu.api_url,
        public_url=PUBLIC,
    )


@pytest.fixture
async def adapter(config: SmsConfig, desk: FakeDesk, store: FakeStore) -> AsyncIterator[SmsAdapter]:
    sms = SmsAdapter(config, desk, store)
    await sms.start()
    yield sms
    await sms.stop()


@pytest.fixture
async def http(adapter: SmsAdapter) -> AsyncIterator[httpx.AsyncClient]:
    # The bot sits behind a TLS-terminating proxy: it sees http://internal:8000,
    # while Twilio signs https://cosigner.example.com.
    app = Starlette(routes=adapter.routes())
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://internal:8000") as client:
        yield client


@pytest.fixture
def phone(http: httpx.AsyncClient) -> TwilioCaller:
    return TwilioCaller(http, public_url=PUBLIC, account_sid=ACCOUNT, auth_token=TOKEN)


@pytest.fixture
def one_pending(desk: FakeDesk, kit: Kit) -> str:
    desk.add(kit.card("apr_1", "4821"), kit.route(kit.alice))
    return "apr_1"


@pytest.fixture
def two_pending(desk: FakeDesk, kit: Kit) -> None:
    desk.add(kit.card("apr_1", "4821"), kit.route(kit.alice))
    desk.add(kit.card("apr_2", "1234"), kit.route(kit.alice))


@dataclasses.dataclass(frozen=True)
class Kit:
    """The test data, handed to tests as a fixture (importlib mode: no importing conftest)."""

    account: str = ACCOUNT
    token: str = TOKEN
    public: str = PUBLIC
    bot: str = BOT
    alice: str = ALICE
    bob: str = BOB
    mallory: str = MALLORY
    start: datetime = START
    card: Callable[..., ApprovalCard] = make_card
    route: Callable[..., SmsRoute] = sms_route


@pytest.fixture
def kit() -> Kit:
    return Kit()
