"""Exactly once, whatever the application's answers do: lost, late, not started, reconciling.

The example application runs over real HTTP; the app's clock is a ManualClock, so retries
and backoff happen when the test moves time, never by sleeping.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from bot.operations.execution import Execution
from tests.harness import Harness, cosigner_app, until, until_async
from tests.operations.application import SECRET, SECRET_ENV, contract_application, policy_for
from tests.operations.test_lifecycle import decide, proposal, propose

ALLOW = "127.0.0.1"


@pytest.fixture(autouse=True)
def secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SECRET_ENV, SECRET)


async def events(h: Harness, key: str, aid: str) -> list[dict[str, Any]]:
    trail = (await h.client.get(f"/v1/approvals/{aid}/audit", headers=h.auth(key))).json()
    found: list[dict[str, Any]] = trail["events"]
    return found


async def started(h: Harness, key: str) -> str:
    r = await propose(h, key, proposal())
    assert r.status_code == 201, r.text
    aid = str(r.json()["approvalId"])
    assert (await decide(h, key, aid)).status_code == 200
    return aid


async def outcome(h: Harness, key: str, aid: str) -> Any:
    return (await h.client.get(f"/v1/approvals/{aid}", headers=h.auth(key))).json().get("outcome")


async def test_a_timed_out_execute_is_reconciled_by_status_without_a_second_execute(db_kind: str) -> None:
    with contract_application() as app:
        app.shop.hold_execute = threading.Event()  # refunds, then answers too late
        policy = policy_for(app.url, execute_timeout="0.3s")
        async with cosigner_app(policy, database_kind=db_kind, callback_allow=ALLOW) as h:
            key = await h.create_tenant("acme")
            aid = await started(h, key)
            await until(lambda: app.shop.refunds == 1)
            # The answer is lost to the timeout; the retry (on the moved clock) asks `status`.
            await h.advance_until(lambda: app.shop.calls["status"] >= 1, step=1.0)
            await _settled(h, key, aid)
            kinds = [e["event"] for e in await events(h, key, aid)]
            assert (await outcome(h, key, aid))["message"] == "Refunded $129.00"
            assert app.shop.calls["execute"] == 1 and app.shop.refunds == 1
            assert app.shop.calls["status"] >= 1
            assert kinds.count("execute_sent") == 1 and "status_asked" in kinds
            app.shop.hold_execute.set()


async def test_not_started_allows_one_retry_with_the_same_key(db_kind: str) -> None:
    with contract_application() as app:
        app.shop.lose_next_execute = True  # the first execute does nothing and fails
        async with cosigner_app(policy_for(app.url), database_kind=db_kind, callback_allow=ALLOW) as h:
            key = await h.create_tenant("acme")
            aid = await started(h, key)
            await until(lambda: app.shop.calls["execute"] == 1)
            await h.advance_until(lambda: app.shop.refunds == 1, step=1.0)
            await _settled(h, key, aid)
            assert app.shop.calls["execute"] == 2 and app.shop.refunds == 1
            assert app.shop.calls["status"] == 1
            sent = [e for e in await events(h, key, aid) if e["event"] == "execute_sent"]
            assert [e["data"]["idempotencyKey"] for e in sent] == [aid, aid]
            assert list(app.shop.done) == [aid]


async def test_needs_reconciliation_is_polled_with_backoff_until_final(db_kind: str) -> None:
    with contract_application() as app:
        app.shop.reconcile = 3  # needs_reconciliation, then in_progress three times
        async with cosigner_app(policy_for(app.url), database_kind=db_kind, callback_allow=ALLOW) as h:
            key = await h.create_tenant("acme")
            aid = await started(h, key)
            # The agent is told as soon as the outcome needs reconciliation...
            first = (await h.client.get(f"/v1/approvals/{aid}?wait=10", headers=h.auth(key))).json()
            assert first["outcome"] == {
                "type": "needs_reconciliation",
                "message": "pending at the bank",
                "statusPath": f"/refunds/{aid}",
            }
            # ...and the final one once `status` knows it.
            await h.advance_until(lambda: app.shop.calls["status"] >= 4, step=2.0)
            await _settled(h, key, aid)
            assert (await outcome(h, key, aid))["type"] == "succeeded"
            assert app.shop.calls["execute"] == 1
            assert "reconciled" in [e["event"] for e in await events(h, key, aid)]


@pytest.mark.parametrize("ending", ["deny", "expire", "cancel"])
async def test_deny_expiry_and_cancel_never_execute(ending: str) -> None:
    with contract_application() as app:
        async with cosigner_app(policy_for(app.url), callback_allow=ALLOW) as h:
            key = await h.create_tenant("acme")
            r = await propose(h, key, proposal())
            aid = r.json()["approvalId"]
            if ending == "deny":
                await decide(h, key, aid, "deny")
            elif ending == "cancel":
                await h.client.post(f"/v1/approvals/{aid}/cancel", headers=h.auth(key))
            else:
                h.advance(400)
            done = (await h.client.get(f"/v1/approvals/{aid}?wait=5", headers=h.auth(key))).json()
            assert done["status"] == {"deny": "denied", "expire": "expired", "cancel": "cancelled"}[ending]
            assert "outcome" not in done
            h.advance(3600)
            await h.parts.engine.closer.expire_due()
            kinds = [e["event"] for e in await events(h, key, aid)]
            assert "claimed" not in kinds and "execute_sent" not in kinds
            assert app.shop.calls["execute"] == 0 and app.shop.calls["status"] == 0


async def test_a_forged_call_is_refused_by_the_application(monkeypatch: pytest.MonkeyPatch) -> None:
    with contract_application() as app:
        monkeypatch.setenv(SECRET_ENV, "not-the-applications-secret-" + "x" * 20)
        async with cosigner_app(policy_for(app.url), callback_allow=ALLOW) as h:
            key = await h.create_tenant("acme")
            r = await propose(h, key, proposal())
            assert r.status_code == 503 and r.json()["error"]["code"] == "OPERATION_UNAVAILABLE"
            assert app.shop.forged == 1 and app.shop.calls["prepare"] == 0


async def _settled(h: Harness, key: str, aid: str) -> None:
    async def final() -> bool:
        found = await outcome(h, key, aid)
        return found is not None and found["type"] != "needs_reconciliation"

    await until_async(final)


async def test_the_approval_counts_its_execute_so_a_sender_lost_before_sending_is_covered_by_status(
    db_kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Approving claims the `execute` job and counts the first `execute` as sent in the
    # approval's own transaction. Here the replica that approved never sends it (it died
    # between its commit and the call): the job is taken over once its hold ends, and since
    # an `execute` may have left, the next attempt asks `status` before sending one.
    with contract_application() as app:
        async with cosigner_app(policy_for(app.url), database_kind=db_kind, callback_allow=ALLOW) as h:

            async def died_before_sending(self: Execution, approval_id: str, claimed: object = None) -> None:
                return None

            monkeypatch.setattr(Execution, "start", died_before_sending)
            key = await h.create_tenant("acme")
            aid = await started(h, key)
            kinds = [e["event"] for e in await events(h, key, aid)]
            assert kinds[-3:] == ["approved", "claimed", "execute_sent"]
            assert app.shop.calls["execute"] == 0
            await h.advance_until(lambda: app.shop.calls["execute"] >= 1, step=5.0)
            await _settled(h, key, aid)
            assert app.shop.calls["status"] == 1, "asked what became of the counted execute first"
            assert app.shop.calls["execute"] == 1 and app.shop.refunds == 1
            assert (await outcome(h, key, aid))["type"] == "succeeded"
