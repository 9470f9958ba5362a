"""The signed status-callback webhook: every status audited, undelivered fails closed."""

from __future__ import annotations

from typing import Any

from contracts.enums import ApprovalStatus
from surfaces.sms.caller import TwilioCaller


async def test_undelivered_status_fails_the_request_closed(
    phone: TwilioCaller, desk: Any, kit: Any, one_pending: str
) -> None:
    await desk.store.record_sent(one_pending, "+15550000099", "SM" + "9" * 32)
    response = await phone.status("SM" + "9" * 32, "undelivered", to=kit.alice, error_code="30006")
    assert response.status_code == 204
    assert desk.failures == [(one_pending, "SURFACE_UNAVAILABLE", "text undelivered: ErrorCode 30006")]
    assert desk.notes == [
        (
            one_pending,
            "sms_status",
            {"messageSid": "SM" + "9" * 32, "status": "undelivered", "errorCode": "30006"},
        )
    ]


async def test_delivered_status_is_only_noted(
    phone: TwilioCaller, desk: Any, kit: Any, one_pending: str
) -> None:
    await desk.store.record_sent(one_pending, "+15550000099", "SM" + "8" * 32)
    for status in ("sent", "delivered"):
        assert (await phone.status("SM" + "8" * 32, status)).status_code == 204
    assert [note[2]["status"] for note in desk.notes] == ["sent", "delivered"]
    assert desk.status(one_pending) is ApprovalStatus.PENDING


async def test_failed_status_after_a_decision_changes_nothing(
    phone: TwilioCaller, desk: Any, kit: Any
) -> None:
    desk.add(kit.card(status=ApprovalStatus.APPROVED), kit.route(kit.alice))
    await desk.store.record_sent("apr_1", "+15550000099", "SM" + "7" * 32)
    await phone.status("SM" + "7" * 32, "failed", error_code="30008")
    assert desk.failures == [] and desk.status("apr_1") is ApprovalStatus.APPROVED


async def test_status_for_an_unknown_message_is_ignored(phone: TwilioCaller, desk: Any) -> None:
    assert (await phone.status("SM" + "6" * 32, "failed")).status_code == 204
    assert desk.notes == []


async def test_forged_status_is_refused(phone: TwilioCaller, desk: Any, kit: Any, one_pending: str) -> None:
    await desk.store.record_sent(one_pending, "+15550000099", "SM" + "5" * 32)
    response = await phone.status("SM" + "5" * 32, "failed", token="guess")
    assert response.status_code == 403
    assert desk.failures == [] and desk.notes == []
