"""`cosigner policy suggest`: `when` blocks learned from decisions recorded through the real
API (people approving and denying on the dashboard, one call left to expire), each replayed
before it is printed; never over a refused value, never for a danger tool, never on too
little evidence; the printed TOML passes `policy check` once appended."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.cli import main
from bot.policy import ENABLED, load_policy, load_policy_file, rule_on
from bot.policy.history import Evidence, collect
from bot.policy.suggest import suggest
from bot.policy.suggest_regions import GUARD
from bot.policy.suggest_thresholds import Thresholds
from contracts.wire import DashboardSurface
from storage.audit import stream_events
from storage.database import Database
from tests.harness import Harness, cosigner_app, until_async

POLICY = """
[defaults]
timeout = "5m"

[tools.issue_credit]
kind = "write"
confirm = true
approvers = ["tenant_admins"]

[tools.read_file]
kind = "write"
confirm = true
approvers = ["tenant_admins"]

[tools.deploy]
kind = "write"
confirm = true
approvers = ["tenant_admins"]

[tools.lookup]
kind = "write"
confirm = true
approvers = ["tenant_admins"]

[tools.solo]
kind = "write"
confirm = true
approvers = ["tenant_admins"]

[tools.wire_money]
kind = "danger"
approvers = ["tenant_admins"]

[tenants.acme]
admins = { dashboard = ["u_a", "u_b", "u_c"] }
"""

PEOPLE = ("u_a", "u_b", "u_c")
APPROVE, DENY, EXPIRE = "approve", "deny", "expire"

# (tool, parameters, what happens, who answers)
CALLS: list[tuple[str, dict[str, Any], str, str]] = [
    *[("issue_credit", {"amountCents": 2000 - 47 * i}, APPROVE, PEOPLE[i % 3]) for i in range(41)],
    ("issue_credit", {"amountCents": 2500}, DENY, "u_a"),
    ("issue_credit", {"amountCents": 3000}, DENY, "u_b"),
    ("issue_credit", {"amountCents": 9000}, EXPIRE, ""),
    *[("read_file", {"path": f"src/app/mod{i}.py"}, APPROVE, PEOPLE[i % 2]) for i in range(7)],
    *[("read_file", {"path": f"src/lib/util{i}.py"}, APPROVE, PEOPLE[i % 2]) for i in range(6)],
    ("read_file", {"path": "secrets/prod.env"}, DENY, "u_c"),
    ("read_file", {"path": "src/../secrets/prod.env"}, DENY, "u_c"),
    *[("deploy", {"region": "eu-west", "dryRun": i % 2 == 0}, APPROVE, PEOPLE[i % 3]) for i in range(6)],
    *[("deploy", {"region": "us-east", "dryRun": i % 2 == 0}, APPROVE, PEOPLE[i % 3]) for i in range(6)],
    *[("deploy", {"region": "ap-south", "dryRun": False}, APPROVE, "u_a") for _ in range(2)],
    ("deploy", {"region": "cn-north", "dryRun": False}, DENY, "u_b"),
    ("deploy", {"region": "cn-north", "dryRun": True}, DENY, "u_b"),
    *[("wire_money", {"amountCents": 100 + i}, APPROVE, PEOPLE[i % 3]) for i in range(15)],
    *[("lookup", {"id": i}, APPROVE, PEOPLE[i % 3]) for i in range(5)],
    *[("solo", {"n": i}, APPROVE, "u_a") for i in range(12)],
]


async def _record(h: Harness, key: str) -> None:
    expiring = []
    for i, (tool, params, what, who) in enumerate(CALLS):
        r = await h.client.post(
            "/v1/approvals",
            headers=h.auth(key),
            json={
                "executionId": f"run_{i}",
                "toolCallId": "c1",
                "toolName": tool,
                "parameters": params,
                "surface": {"type": "dashboard", "userId": "u_agent"},
            },
        )
        assert r.status_code == 201, r.text
        aid = r.json()["approvalId"]
        if what == EXPIRE:
            expiring.append(aid)
            continue
        answered = await h.client.post(
            f"/v1/approvals/{aid}/decision",
            headers=h.auth(h.approver_key("acme")),
            json={"decision": what, "userId": who},
        )
        assert answered.json()["status"] == ("approved" if what == APPROVE else "denied"), answered.text
    h.advance(600)

    async def expired() -> bool:
        for aid in expiring:
            got = await h.client.get(f"/v1/approvals/{aid}", headers=h.auth(key))
            if got.json()["status"] != "expired":
                return False
        return True

    await until_async(expired)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("suggest") / "c.db"

    async def go() -> None:
        db = Database(f"sqlite+aiosqlite:///{path}")
        await db.migrate()
        try:
            async with cosigner_app(POLICY, db=db) as h:
                await _record(h, await h.create_tenant("acme"))
        finally:
            await db.close()

    asyncio.run(go())
    return path


@pytest.fixture
def policy_file(recorded: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("COSIGNER_DATABASE_URL", f"sqlite+aiosqlite:///{recorded}")
    monkeypatch.delenv("COSIGNER_POLICY", raising=False)
    path = tmp_path / "policy.toml"
    path.write_text(POLICY)
    yield path


def _suggest(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    assert main(["policy", "suggest", *args]) == 0
    return capsys.readouterr().out


def test_each_suggestion_carries_its_replay_figures(
    policy_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = _suggest(capsys, "--policy", str(policy_file))
    assert (
        "# issue_credit: approved 41 of 41 asked with amountCents from 0 to 2000 in the last 30d, "
        "by 3 people.\n"
        "# Replayed on the same 44 requests: would have asked 3 of 44 instead of 44; 0 of the 3 denied, "
        "expired, cancelled or unanswered would have been allowed.\n"
        "[[tools.issue_credit.when]]\n"
        "match = { amountCents = { above = -1, below = 2001 } }\n"
        'then = "allow"\n'
    ) in out
    # A prefix at a path separator, guarded: `cat src/`, not `src/../secrets`.
    assert (
        "# read_file: approved 13 of 13 asked with path starting with 'src/' in the last 30d, by 2 people.\n"
    ) in out
    assert f"match = {{ path = {{ prefix = \"src/\", matches = '{GUARD}' }} }}" in out
    # Few distinct strings: the ones approved often enough and never refused.
    assert "# deploy: approved 12 of 12 asked with region one of 'eu-west', 'us-east'" in out
    assert 'match = { region = { in = ["eu-west", "us-east"] } }' in out


def test_no_refused_call_falls_inside_an_allow(
    policy_file: Path, recorded: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = _suggest(capsys, "--policy", str(policy_file))
    assert out.count("[[tools.") == 3
    proposed = load_policy(POLICY + "\n" + out)
    dash = DashboardSurface(type="dashboard", userId="u_agent")
    refused = [(tool, params) for tool, params, what, _ in CALLS if what != APPROVE]
    for tool, params in refused:
        assert rule_on(proposed, "acme", tool, params, dash, enabled=ENABLED).label != "none", (tool, params)
    # and the allows are real: the approved values inside run unasked now
    assert (
        rule_on(proposed, "acme", "issue_credit", {"amountCents": 2000}, dash, enabled=ENABLED).label
        == "none"
    )
    assert (
        rule_on(proposed, "acme", "read_file", {"path": "src/new.py"}, dash, enabled=ENABLED).label == "none"
    )

    # The same on the module's own reading of the record.
    async def read() -> Any:
        db = Database(f"sqlite+aiosqlite:///{recorded}")
        try:
            return await db.run_read(
                lambda tx: collect(stream_events(tx, 0.0, {"requested", "approved", "denied", "expired"})),
                snapshot=True,
            )
        finally:
            await db.close()

    calls, unreadable = asyncio.run(read())
    assert unreadable == 0 and len(calls) == len(CALLS)
    assert sum(c.evidence is Evidence.REFUSED for c in calls) == len(refused)
    found = suggest(calls, load_policy(POLICY), POLICY)
    for s in found.suggestions:
        assert s.refused_allowed == 0
        allowed = load_policy(POLICY + "\n" + s.block)
        for c in calls:
            if c.tool == s.tool and c.evidence is Evidence.REFUSED:
                assert rule_on(allowed, "acme", c.tool, c.parameters, dash, enabled=ENABLED).label != "none"


def test_danger_tools_and_thin_evidence_are_never_suggested(
    policy_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = _suggest(capsys, "--policy", str(policy_file))
    assert "tools.wire_money" not in out
    assert "# wire_money: a danger tool (or one the policy does not name); never suggested." in out
    assert "tools.lookup" not in out and "# lookup: 5 approvals by 3 people on record" in out
    assert "tools.solo" not in out and "# solo: 12 approvals by 1 person on record" in out
    # A tool the policy does not name is danger: a policy without issue_credit gets nothing for it.
    unnamed = policy_file.parent / "unnamed.toml"
    unnamed.write_text(POLICY.replace("[tools.issue_credit]", "[tools.other]"))
    out = _suggest(capsys, "--policy", str(unnamed), "--tool", "issue_credit")
    assert "[[tools." not in out and "# issue_credit: a danger tool" in out
    # Evidence thresholds are flags.
    out = _suggest(capsys, "--policy", str(policy_file), "--min-approvals", "50")
    assert "[[tools." not in out and out.rstrip().endswith("# Nothing to suggest.")
    out = _suggest(capsys, "--policy", str(policy_file), "--tool", "solo", "--min-people", "1")
    assert "[[tools.solo.when]]" in out
    out = _suggest(capsys, "--policy", str(policy_file), "--tool", "deploy", "--min-per-value", "2")
    assert 'in = ["ap-south", "eu-west", "us-east"]' in out
    with pytest.raises(SystemExit):
        main(["policy", "suggest", "--policy", str(policy_file), "--min-people", "0"])
    assert "at least 1" in capsys.readouterr().err


def test_the_tool_filter_and_the_window(policy_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = _suggest(capsys, "--policy", str(policy_file), "--tool", "issue_credit")
    assert out.count("[[tools.") == 1 and "[[tools.issue_credit.when]]" in out
    assert "read_file" not in out and "wire_money" not in out
    out = _suggest(capsys, "--policy", str(policy_file), "--since", "2999-01-01T00:00:00Z")
    assert out.rstrip().endswith("# Nothing to suggest.")


def test_a_policy_that_already_allows_gets_no_suggestion(
    policy_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The block would change nothing on replay: it is not printed.
    already = policy_file.parent / "already.toml"
    already.write_text(
        POLICY
        + '\n[[tools.issue_credit.when]]\nmatch = { amountCents = { below = 100000 } }\nthen = "allow"\n'
    )
    out = _suggest(capsys, "--policy", str(already), "--tool", "issue_credit")
    assert "[[tools." not in out


def test_the_printed_toml_passes_policy_check(
    policy_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = _suggest(capsys, "--policy", str(policy_file))
    appended = tmp_path / "appended.toml"
    appended.write_text(POLICY + "\n" + out)
    assert main(["policy", "check", str(appended)]) == 0
    checked = capsys.readouterr().out
    assert "issue_credit (ask, 1 when blocks)" in checked
    assert load_policy_file(appended).rule_for("acme", "deploy").when
    # Nothing was applied: the policy file is as it was.
    assert policy_file.read_text() == POLICY
    # Without a policy, the command says how to give one.
    assert main(["policy", "suggest"]) == 2
    assert "--policy FILE, or set COSIGNER_POLICY" in capsys.readouterr().err


def test_a_denied_value_in_an_in_list_is_left_out() -> None:
    # Unit-level: the region logic excludes a value refused once even if approved often.
    from bot.policy.history import Call
    from bot.policy.suggest_regions import regions
    from storage.audit import Requested

    def call(i: int, region: str, closed: str, who: str) -> Call:
        from contracts.enums import ApprovalStatus

        c = Call(Requested(f"apv_{i}", "acme", 0.0, "{}"), "deploy", {"region": region}, "ask:dashboard")
        c.closed = ApprovalStatus(closed)
        c.people = {f"dashboard:{who}"} if closed == "approved" else set()
        return c

    calls = [call(i, "eu", "approved", PEOPLE[i % 2]) for i in range(10)]
    calls += [call(10 + i, "us", "approved", PEOPLE[i % 2]) for i in range(10)]
    calls.append(call(99, "us", "denied", "u_c"))
    found = regions(calls, Thresholds())
    assert found and found[0].conditions == {"equals": "eu"}
    assert all("us" not in json.dumps(r.conditions) for r in found)


async def test_the_record_is_read_alike_on_each_database(db_kind: str) -> None:
    # `storage.audit.stream_events` on SQLite and PostgreSQL: requests with how they closed.

    calls = [
        *[("issue_credit", {"amountCents": 100 * (i + 1)}, APPROVE, PEOPLE[i % 2]) for i in range(10)],
        ("issue_credit", {"amountCents": 5000}, DENY, "u_c"),
    ]
    async with cosigner_app(POLICY, database_kind=db_kind) as h:
        key = await h.create_tenant("acme")
        for i, (tool, params, what, who) in enumerate(calls):
            r = await h.client.post(
                "/v1/approvals",
                headers=h.auth(key),
                json={
                    "executionId": f"run_{i}",
                    "toolCallId": "c1",
                    "toolName": tool,
                    "parameters": params,
                    "surface": {"type": "dashboard", "userId": "u_agent"},
                },
            )
            await h.client.post(
                f"/v1/approvals/{r.json()['approvalId']}/decision",
                headers=h.auth(h.approver_key("acme")),
                json={"decision": what, "userId": who},
            )
        read, unreadable = await h.parts.db.run_read(
            lambda tx: collect(stream_events(tx, 0.0, {"requested", "approved", "denied"})), snapshot=True
        )
    assert unreadable == 0
    assert sorted((c.evidence.value, sorted(c.people)) for c in read)[0] == ("approved", ["dashboard:u_a"])
    found = suggest(read, load_policy(POLICY), POLICY)
    (made,) = found.suggestions
    assert made.region.conditions == {"above": -1, "below": 1001} and made.refused == 1
