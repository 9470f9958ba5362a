"""`cosigner policy replay`: thousands of recorded requests decided again by a new policy,
streamed from the database, loosenings first, nothing written."""

from __future__ import annotations

import asyncio
import hashlib
import json
from pathlib import Path

import pytest

from bot.cli import main
from bot.policy.replay import recorded_label
from contracts.audit_events import Requested
from storage.database import Database
from tests.harness import DEFAULT_POLICY, cosigner_app

REQUESTS = 2000
# Raised threshold: refunds of 50-99.99 now run unasked (a loosening). Credits are always asked.
NEW = DEFAULT_POLICY.replace("value = 5000", "value = 10000").replace("confirm = true", 'confirm = "always"')


def populate(path: Path) -> None:
    """Record REQUESTS calls through the real API: refunds of every size, credits, lookups."""

    async def go() -> None:
        db = Database(f"sqlite+aiosqlite:///{path}")
        await db.migrate()
        try:
            async with cosigner_app(db=db, run_workers=False) as h:
                key = await h.create_tenant("acme")
                for i in range(REQUESTS):
                    tool = ("issue_refund", "issue_credit", "lookup_order", "issue_refund")[i % 4]
                    r = await h.client.post(
                        "/v1/approvals",
                        headers=h.auth(key),
                        json={
                            "executionId": f"run_{i}",
                            "toolCallId": "c1",
                            "toolName": tool,
                            "parameters": {"amountCents": (i * 37) % 20000},
                            "surface": {"type": "dashboard", "userId": "u_1"},
                        },
                    )
                    assert r.status_code in (200, 201), r.text
        finally:
            await db.close()

    asyncio.run(go())


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("replay") / "c.db"
    populate(path)
    return path


def expected_counts() -> tuple[int, int]:
    """Refunds between 5000 and 9999 (loosened), and credits (ask → ask_always)."""
    loosened = sum(1 for i in range(REQUESTS) if i % 4 in (0, 3) and 5000 <= (i * 37) % 20000 < 10000)
    return loosened, sum(1 for i in range(REQUESTS) if i % 4 == 1)


def test_replay_lists_loosenings_first_and_writes_nothing(
    recorded: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("COSIGNER_DATABASE_URL", f"sqlite+aiosqlite:///{recorded}")
    new = tmp_path / "new.toml"
    new.write_text(NEW)
    before = hashlib.sha256(recorded.read_bytes()).hexdigest()
    assert main(["policy", "replay", "--policy", str(new)]) == 0
    out = capsys.readouterr().out.splitlines()
    loosened, credits = expected_counts()
    assert out[0] == f"replayed {REQUESTS} requests: {loosened + credits} would be decided otherwise"
    first, second = out[2], out[3]
    assert first.startswith("LOOSENS") and "issue_refund" in first and "ask_always:dashboard → none" in first
    assert f" {loosened} " in first and first.count("apv_") == 3
    assert not second.startswith("LOOSENS") and "ask:dashboard → ask_always:dashboard" in second
    assert f" {credits} " in second
    assert hashlib.sha256(recorded.read_bytes()).hexdigest() == before, "replay must not write"

    assert main(["policy", "replay", "--policy", str(new), "--json", "--examples", "1"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert found["read"] == REQUESTS and found["changes"][0]["loosens"] is True
    assert len(found["changes"][0]["examples"]) == 1


def test_replay_of_the_same_policy_changes_nothing(
    recorded: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("COSIGNER_DATABASE_URL", f"sqlite+aiosqlite:///{recorded}")
    same = tmp_path / "same.toml"
    same.write_text(DEFAULT_POLICY)
    assert main(["policy", "replay", "--policy", str(same), "--since", "3650d"]) == 0
    assert capsys.readouterr().out.strip() == f"replayed {REQUESTS} requests: 0 would be decided otherwise"
    assert main(["policy", "replay", "--policy", str(same), "--since", "yesterday"]) == 2
    assert "--since 'yesterday'" in capsys.readouterr().err


def test_requests_recorded_before_the_decision_was_kept_compare_by_mode_and_route() -> None:
    assert recorded_label(Requested(toolName="t", mode="none", route=None)) == "none"
    assert recorded_label(Requested(toolName="t", mode="ask", route={"surface": "slack"})) == "ask:slack"
    assert recorded_label(Requested(toolName="t", decision="deny", mode="ask")) == "deny"


async def test_replay_says_which_sender_it_lacks_rather_than_report_a_change(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # WhatsApp configured in code (as `cosigner dev` does), not in the environment replay reads.
    from bot.policy import load_policy
    from bot.policy.replay import replay
    from storage.audit import stream_requests
    from tests.surfaces.whatsapp.test_end_to_end import BOT, POLICY, request, whatsapp_app

    for name in ("TWILIO_WHATSAPP_FROM", "TWILIO_FROM_NUMBER", "TWILIO_MESSAGING_SERVICE_SID"):
        monkeypatch.delenv(name, raising=False)
    policy = load_policy(POLICY)
    async with whatsapp_app("sqlite") as (h, _emu, _phone, key):
        await request(h, key)
        db = h.parts.db
        found = await db.run_read(lambda tx: replay(stream_requests(tx, 0.0), policy), snapshot=True)
        assert found.read == 1 and found.changed == 0, found.table()
        assert found.lacking == {"TWILIO_WHATSAPP_FROM (the WhatsApp sender)": 1}
        assert "1 recorded requests were left out: the server routed them with TWILIO_WHATSAPP_FROM" in (
            found.table()
        )
        assert found.to_json()["lacking"] == {"TWILIO_WHATSAPP_FROM (the WhatsApp sender)": 1}
        # With the server's setting, the same policy changes nothing and nothing is left out.
        monkeypatch.setenv("TWILIO_WHATSAPP_FROM", BOT)
        found = await db.run_read(lambda tx: replay(stream_requests(tx, 0.0), policy), snapshot=True)
        assert found.changed == 0 and found.lacking == {}
        # A change the policy makes is still reported as one, settings or not.
        monkeypatch.delenv("TWILIO_WHATSAPP_FROM")
        denied = load_policy(POLICY.replace('approvers = ["requester"]', "deny = true"))
        found = await db.run_read(lambda tx: replay(stream_requests(tx, 0.0), denied), snapshot=True)
        assert found.changed == 1 and found.lacking == {}
        assert found.ordered()[0].after == "deny"
