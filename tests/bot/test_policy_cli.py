"""`cosigner policy explain | test`: the decision and why; test files, their failures and exit codes."""

from __future__ import annotations

import json
from pathlib import Path
from xml.etree import ElementTree

import pytest

from bot.cli import main
from tests.harness import DEFAULT_POLICY

REPO = Path(__file__).resolve().parents[2]

CASES = """
[[case]]
name = "small refunds need nobody"
tenant = "acme"
tool = "issue_refund"
params = { amountCents = 4000 }
expect = { mode = "none" }

[[case]]
name = "a big refund asks the requester"
tenant = "acme"
tool = "issue_refund"
params = { amountCents = 9000 }
surface = "slack:T0ACME/C0OPS/U0ALICE"
expect = { mode = "ask_always", approvers = "requester", route = "slack T0ACME/C0OPS" }
"""


@pytest.fixture
def policy(tmp_path: Path) -> Path:
    path = tmp_path / "policy.toml"
    path.write_text(DEFAULT_POLICY)
    return path


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_explain_prints_the_decision_and_why(policy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["policy", "explain", "--policy", str(policy), "--tenant", "acme", "--tool", "issue_refund"]
    code, out, _ = run(capsys, *args, "--params", '{"amountCents": 4000}')
    assert code == 0
    assert "[tenants.acme.tools.issue_refund.allow_below] amountCents 4000 < 5000" in out
    code, out, _ = run(
        capsys,
        *args,
        "--params",
        '{"amountCents": 9000}',
        "--surface",
        "slack:T0ACME/C0OPS/U0ALICE",
        "--json",
    )
    found = json.loads(out)
    assert code == 0 and found["mode"] == "ask_always" and found["rule"] == "tools.issue_refund.kind"
    assert found["decision"] == "person" and found["quorum"] == 1


def test_explain_refuses_bad_input_naming_the_fix(policy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = ["policy", "explain", "--policy", str(policy), "--tool", "x"]
    code, _, err = run(capsys, *base, "--params", "{amount")
    assert code == 2 and "--params is not JSON" in err
    code, _, err = run(capsys, *base, "--surface", "slack:T0ACME")
    assert code == 2 and "slack:TEAM/CHANNEL/USER" in err


def test_passing_cases_exit_0_and_write_junit(
    policy: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tests = tmp_path / "policy.tests.toml"
    tests.write_text(CASES)
    report = tmp_path / "junit.xml"
    code, out, _ = run(capsys, "policy", "test", str(policy), str(tests), "--junit", str(report))
    assert code == 0, out
    assert "2 passed, 0 failed" in out
    suite = ElementTree.parse(report).getroot().find("testsuite")
    assert suite is not None and suite.get("tests") == "2" and suite.get("failures") == "0"


def test_a_wrong_expectation_fails_with_what_was_decided_instead(
    policy: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tests = tmp_path / "policy.tests.toml"
    tests.write_text(CASES.replace('expect = { mode = "none" }', 'expect = { mode = "ask_always" }'))
    report = tmp_path / "junit.xml"
    code, out, _ = run(capsys, "policy", "test", str(policy), str(tests), "--junit", str(report))
    assert code == 1
    assert "FAIL  small refunds need nobody" in out
    assert "expected mode ask_always, got none (by tenants.acme.tools.issue_refund.allow_below)" in out
    assert "decided instead:" in out and "amountCents 4000 < 5000" in out
    failure = ElementTree.parse(report).getroot().find("testsuite/testcase/failure")
    assert failure is not None and "expected mode ask_always" in (failure.get("message") or "")


def test_a_quorum_other_than_the_policys_fails_clearly(
    policy: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tests = tmp_path / "t.toml"
    tests.write_text(CASES.replace('expect = { mode = "none" }', 'expect = { mode = "none", quorum = 2 }'))
    code, out, _ = run(capsys, "policy", "test", str(policy), str(tests))
    assert code == 1 and "expected quorum 2, got 1 (tenants.acme.tools.issue_refund.quorum)" in out


@pytest.mark.parametrize(
    ("text", "where"),
    [
        (
            CASES.replace('expect = { mode = "none" }', 'expect = { mode = "nobody" }'),
            ":7: case[0].expect.mode",
        ),
        (
            CASES.replace("params = { amountCents = 9000 }", "parms = { amountCents = 9000 }"),
            ":13: case[1].parms: unknown key",
        ),
        (
            CASES.replace(
                'tool = "issue_refund"\nparams = { amountCents = 4000 }',
                'tool = "issue_refund"\nparams = { amountCents = 4000',
            ),
            "line 6",
        ),
        (
            CASES.replace('surface = "slack:T0ACME/C0OPS/U0ALICE"', 'surface = "slack:T0ACME"'),
            ":14: case 'a big refund",
        ),
    ],
)
def test_a_malformed_test_file_exits_2_naming_line_and_key(
    policy: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, where: str
) -> None:
    tests = tmp_path / "bad.toml"
    tests.write_text(text)
    code, out, err = run(capsys, "policy", "test", str(policy), str(tests))
    assert code == 2, out
    assert where in err, err


def test_a_policy_with_a_typoed_section_exits_2_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "policy.toml"
    bad.write_text(
        DEFAULT_POLICY.replace("[tenants.acme.tools.issue_refund]", "[tenants.acme.tool.issue_refund]")
    )
    tests = tmp_path / "t.toml"
    tests.write_text(CASES)
    code, _, err = run(capsys, "policy", "test", str(bad), str(tests))
    assert code == 2 and "tenants.acme.tool: unknown key" in err, err
    code, _, err = run(capsys, "policy", "explain", "--policy", str(bad), "--tool", "x")
    assert code == 2 and "tenants.acme.tool: unknown key" in err, err


def test_the_sandbox_policy_passes_its_own_tests(capsys: pytest.CaptureFixture[str]) -> None:
    policy, tests = (
        REPO / "bot" / "dev" / "sandbox_policy.toml",
        REPO / "bot" / "dev" / "sandbox_policy.tests.toml",
    )
    code, out, _ = run(capsys, "policy", "test", str(policy), str(tests))
    assert code == 0, out
    assert "0 failed" in out and "passed" in out


TEAMS_TENANT = "72f988bf-86f1-41af-91ab-2d7cd011db47"
TEAMS_USER = "00000000-0000-0000-0000-0000000000a1"
CONVERSATION = "19:ops@thread.tacv2"
CHAT_CASES = f"""
[[case]]
name = "a refund asked in Teams goes back to that conversation"
tenant = "acme"
tool = "issue_refund"
params = {{ amountCents = 9000 }}
surface = "teams:{TEAMS_TENANT}/{CONVERSATION}/{TEAMS_USER}"
expect = {{ mode = "ask_always", approvers = "requester", route = "teams {TEAMS_TENANT}/{CONVERSATION}" }}

[[case]]
name = "a refund asked on WhatsApp is sent from the WhatsApp number"
tenant = "acme"
tool = "issue_refund"
params = {{ amountCents = 9000 }}
surface = "whatsapp:+15550000002"
expect = {{ mode = "ask_always", approvers = "requester", route = "whatsapp whatsapp:+15550000001" }}
"""


def test_cases_may_come_from_teams_and_whatsapp(
    tmp_path: Path, policy: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    cases = tmp_path / "chat.tests.toml"
    cases.write_text(CHAT_CASES)
    # The WhatsApp sender comes from the variable the server reads.
    monkeypatch.setenv("TWILIO_WHATSAPP_FROM", "+15550000001")
    code, out, err = run(capsys, "policy", "test", str(policy), str(cases))
    assert (code, err) == (0, ""), out
    assert out.count("ok    ") == 2
    # Without a WhatsApp sender the case is refused, and the reason names the variable.
    monkeypatch.delenv("TWILIO_WHATSAPP_FROM")
    code, out, _ = run(capsys, "policy", "test", str(policy), str(cases))
    assert code == 1 and "set tenants.acme.whatsapp_from or TWILIO_WHATSAPP_FROM" in out


def test_a_malformed_teams_surface_names_its_form(
    tmp_path: Path, policy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cases = tmp_path / "bad.tests.toml"
    cases.write_text(CHAT_CASES.replace(f"/{CONVERSATION}/{TEAMS_USER}", ""))
    code, _, err = run(capsys, "policy", "test", str(policy), str(cases))
    assert code == 2 and "teams:TENANT/CONVERSATION/USER" in err
    code, _, err = run(
        capsys,
        "policy",
        "explain",
        "--policy",
        str(policy),
        "--tool",
        "issue_refund",
        "--surface",
        "whatsapp:555",
    )
    assert code == 2 and "whatsapp:+15550000002" in err
