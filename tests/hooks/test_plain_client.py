"""The hook's standard-library client denies every answer that is not an approval of its call.

A scripted server on loopback answers what the real Cosigner never would: malformed JSON,
another approval, another call, an error status, fields the wire does not have. Each is a
deny; the same script with a well-formed approval is an allow, so the deny is the answer's doing.
"""

from __future__ import annotations

import http.client
import json
import socket
import time
from pathlib import Path
from typing import Any

import pytest

from cosigner.hooks import plain
from cosigner.hooks.asking import Asking
from cosigner.hooks.plain import DECIDED_FIELDS, DECIDERS, START_FIELDS, Call, PlainClient, Unreachable
from cosigner.hooks.settings import HookSettings
from cosigner.hooks.verdict import Permission, Verdict
from tests.hooks.fixtures import CLAUDE_BASH, event
from tests.hooks.running import decision_of, hook_env, run_hook
from tests.hooks.scripted import APPROVAL, OTHER_APPROVAL, Script, decided, scripted_cosigner, started, use_of

USE = use_of(CLAUDE_BASH)
APPROVALS = "POST /v1/approvals"
POLL = f"GET /v1/approvals/{APPROVAL}"


def ask(script: Script, seconds: float = 20.0) -> Verdict:
    with scripted_cosigner(script) as url:
        settings = HookSettings(url, "csk_agent_test", "dashboard:u_dev", seconds)
        return Asking(settings).run(USE, time.monotonic() + seconds)


def pending_then(answer: bytes | dict[str, Any], status: int = 200) -> Script:
    script = Script()
    script.add(APPROVALS, 201, started(USE))
    script.add(POLL, status, answer)
    return script


def test_a_well_formed_approval_of_the_call_is_an_allow() -> None:
    script = pending_then(decided(USE))
    verdict = ask(script)
    assert verdict.permission is Permission.ALLOW and "U0ADMIN" in verdict.reason
    method, path, body = script.seen[0]
    sent = json.loads(body)
    assert (method, path) == ("POST", "/v1/approvals")
    assert sent["executionId"] == USE.session_id and sent["toolCallId"] == USE.tool_use_id
    assert sent["surface"] == {"type": "dashboard", "userId": "u_dev"}
    assert script.seen[1][1].startswith(f"/v1/approvals/{APPROVAL}?wait=")


def test_a_policy_allow_at_once_needs_no_poll() -> None:
    script = Script()
    script.add(APPROVALS, 200, decided(USE, decidedBy={"kind": "policy", "rule": "tools.Bash.when[1]"}))
    verdict = ask(script)
    assert verdict.permission is Permission.ALLOW and "tools.Bash.when[1]" in verdict.reason
    assert len(script.seen) == 1


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        (b'{"type": "approval_decided", "status": "approved"', "not plain JSON"),
        (b"[]", "not a JSON object"),
        (
            json.dumps(decided(USE))[:-1].encode() + b', "status": "approved"}',
            "not plain JSON",
        ),  # a repeated key: two parsers could read two answers
        (decided(USE, approvalId=OTHER_APPROVAL), OTHER_APPROVAL),
        (decided(USE, approvalId="apv_short"), "approvalId"),
        (decided(USE, toolCallId="toolu_someone_else"), "another tool use"),
        (decided(USE, executionId="another-session"), "another execution"),
        (decided(USE, toolName="Write"), "another tool"),
        (decided(use_of(event(CLAUDE_BASH, command="rm -rf /"))), "parametersDigest"),
        (decided(USE, status="approving"), "not an approval status"),
        (decided(USE, status="pending"), "pending"),
        (decided(USE, type="handoff_start"), "handoff_start"),
        (decided(USE, allowed=True), "allowed"),
        ({k: v for k, v in decided(USE).items() if k != "decidedBy"}, "decidedBy"),
        (decided(USE, decidedBy={"kind": "root"}), "decidedBy"),
        (decided(USE, decidedBy={"kind": "policy", "rule": 7}), "decidedBy.rule"),
        (decided(USE, decidedBy={"kind": "policy"}), "rule"),
        (decided(USE, comment=["ok"]), "comment"),
        (decided(USE, decidedAt="yesterday"), "decidedAt"),
        (decided(USE, operation="issue_refund"), "operation"),
        (decided(USE, edited=True), "edited"),
        (decided(USE, quorum=0), "quorum"),
        (started(USE, status="approved"), "approval_start"),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_an_answer_that_is_not_an_approval_of_this_call_is_a_deny(
    answer: bytes | dict[str, Any], said: str
) -> None:
    verdict = ask(pending_then(answer))
    assert verdict.permission is Permission.DENY
    assert said in verdict.reason


def test_an_approval_start_for_another_call_is_a_deny_before_any_wait() -> None:
    script = Script()
    script.add(APPROVALS, 201, started(USE, toolCallId="toolu_other"))
    verdict = ask(script)
    assert verdict.permission is Permission.DENY and "another tool use" in verdict.reason
    assert len(script.seen) == 1


def test_a_coalesced_question_is_answered_under_the_first_tool_use() -> None:
    # An identical request was pending: the answer names its toolCallId, and says so.
    first = "toolu_first_ask"
    script = Script()
    script.add(APPROVALS, 201, started(USE, toolCallId=first, coalesced=True))
    script.add(POLL, 200, decided(USE, toolCallId=first))
    assert ask(script).permission is Permission.ALLOW
    # ... but a decision under that other toolCallId without the start saying so is not ours.
    script = Script()
    script.add(APPROVALS, 201, started(USE))
    script.add(POLL, 200, decided(USE, toolCallId=first))
    assert ask(script).permission is Permission.DENY


@pytest.mark.parametrize(
    ("status", "body", "said"),
    [
        (500, b"Internal Server Error", "HTTP_500"),
        (500, {"error": {"code": "INTERNAL", "message": "it broke"}}, "(INTERNAL): it broke"),
        (403, {"error": {"code": "KEY_SCOPE", "message": "an approver key"}}, "KEY_SCOPE"),
        (302, b"", "HTTP_302"),
        (202, decided(USE), "HTTP_202"),
    ],
)
def test_an_error_status_is_a_deny_naming_it(status: int, body: bytes | dict[str, Any], said: str) -> None:
    verdict = ask(pending_then(body, status))
    assert verdict.permission is Permission.DENY and said in verdict.reason


def test_a_gateway_error_is_retried_then_the_answer_read() -> None:
    script = Script()
    script.add(APPROVALS, 503, b"<html>Service Unavailable</html>")
    script.add(APPROVALS, 200, decided(USE))
    assert ask(script).permission is Permission.ALLOW
    assert len(script.seen) == 2


def test_a_gateway_that_stays_down_is_a_deny_naming_it() -> None:
    script = Script()
    script.add(APPROVALS, 502, b"Bad Gateway")
    verdict = ask(script, seconds=3.0)
    assert verdict.permission is Permission.DENY and "HTTP 502" in verdict.reason


def test_a_cancel_that_comes_too_late_reads_the_decision_and_checks_it() -> None:
    script = Script()
    script.add(
        f"POST /v1/approvals/{APPROVAL}/cancel", 409, {"error": {"code": "ALREADY_DECIDED", "message": "x"}}
    )
    script.add(f"GET /v1/approvals/{APPROVAL}", 200, decided(USE, toolCallId="toolu_other"))
    with scripted_cosigner(script) as url:
        asking = Asking(HookSettings(url, "k", "dashboard:u_dev", 5.0))
        asking.call = Call.of(USE)
        asking.call.approval_id = APPROVAL
        assert asking.withdraw() is None  # a decision about another call is no answer at all


def test_a_url_that_is_not_http_is_refused() -> None:
    with pytest.raises(ValueError, match="COSIGNER_URL"):
        PlainClient("ftp://cosigner.example.com", "k")


class SteppedTime:
    """`time` for the client: `sleep` moves `monotonic` on and is recorded, nothing waits."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def test_a_refused_connection_is_unreachable_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # Nothing listens on the port: asking again would only keep the agent waiting.
    stepped = SteppedTime()
    monkeypatch.setattr(plain, "time", stepped)
    with socket.socket() as bound:
        bound.bind(("127.0.0.1", 0))  # bound, never listening: connections are refused
        client = PlainClient(f"http://127.0.0.1:{bound.getsockname()[1]}", "k", timeout=1.0, retry_for=60)
        with pytest.raises(Unreachable, match="ConnectionRefusedError"):
            client.send("GET", "/v1/approvals/x", None, 1.0, idempotent=True)
    assert stepped.sleeps == []


def test_a_connection_that_times_out_is_retried_then_unreachable(monkeypatch: pytest.MonkeyPatch) -> None:
    stepped = SteppedTime()
    monkeypatch.setattr(plain, "time", stepped)
    attempts: list[str] = []

    def connect(self: http.client.HTTPConnection) -> None:
        attempts.append(self.host)
        raise TimeoutError("timed out")

    monkeypatch.setattr(http.client.HTTPConnection, "connect", connect)
    client = PlainClient("http://cosigner.example.com", "k", timeout=1.0, retry_for=30)
    with pytest.raises(Unreachable, match="TimeoutError"):
        client.send("GET", "/v1/approvals/x", None, 1.0, idempotent=True)
    assert len(attempts) == len(stepped.sleeps) + 1 > 2  # asked again, with backoff, ...
    assert 30 <= stepped.now - 1000.0 < 33  # ... for retry_for seconds


def test_the_field_sets_are_the_wire_models() -> None:
    # The client knows the answers' fields by name; the SDK's models are the published ones.
    from cosigner import answers

    assert set(answers.ApprovalStart.model_fields) == START_FIELDS
    assert set(answers.Decision.model_fields) == DECIDED_FIELDS
    deciders = {
        model.model_fields["kind"].default: model
        for model in (
            answers.PersonDecider,
            answers.TimeoutDecider,
            answers.PolicyDecider,
            answers.AgentDecider,
            answers.SystemDecider,
            answers.AllowanceDecider,
        )
    }
    assert set(deciders) == set(DECIDERS)
    for kind, model in deciders.items():
        required, optional = DECIDERS[kind]
        assert set(model.model_fields) == required | optional
        assert {n for n, f in model.model_fields.items() if f.is_required()} | {"kind"} == required


def test_the_command_hook_loads_neither_pydantic_nor_httpx(tmp_path: Path) -> None:
    # The whole path, an allow included, as the agent runs it; `-X importtime` lists every
    # module the process loaded, so a slow import cannot come back unnoticed.
    script = Script()
    script.add(APPROVALS, 201, started(USE))
    script.add(POLL, 200, decided(USE))
    with scripted_cosigner(script) as url:
        env = hook_env(tmp_path, url, "csk_agent_test", "dashboard:u_dev", PYTHONPROFILEIMPORTTIME="1")
        done = run_hook(CLAUDE_BASH, env)
    assert decision_of(done.stdout)[0] == "allow", done.stderr
    loaded = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.decode().splitlines() if "|" in line}
    assert "cosigner.hooks.plain" in loaded  # the list is the hook's own
    heavy = {m for m in loaded if m.split(".")[0] in {"pydantic", "httpx", "jwt", "cryptography", "rfc8785"}}
    assert heavy == set()
    assert not {"cosigner.client", "cosigner.wire", "cosigner.decision"} & loaded


@pytest.mark.parametrize(
    "spec",
    [
        "slack:T0ACME/D0ALICE/U0ALICE",
        "slack:T0ACME",
        "slack:t0acme/D0ALICE/U0ALICE",
        "sms:+15550100200",
        "sms:5550100200",
        "dashboard:u_42",
        "dashboard:" + "u" * 201,
        "teams:x",
        "nothing",
    ],
)
def test_the_hooks_surface_reading_agrees_with_the_gateways(spec: str) -> None:
    from cosigner.hooks.surface import SurfaceError, surface_json
    from cosigner.mcp_gateway.surface_spec import SurfaceSpecError, parse_surface

    try:
        wire = parse_surface(spec).to_json()
    except SurfaceSpecError:
        with pytest.raises(SurfaceError):
            surface_json(spec)
    else:
        assert surface_json(spec) == wire
