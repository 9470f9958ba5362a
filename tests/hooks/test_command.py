"""`cosigner-hook` as a subprocess against a real Cosigner on loopback: stdin in, stdout out."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from cosigner.hooks.event import Agent, read_tool_use
from tests.hooks.fixtures import CLAUDE_BASH, CLAUDE_EDIT, CODEX_BASH, event
from tests.hooks.running import EXAMPLE_POLICY, decision_of, hook_env, run_hook, start_hook
from tests.loopback import LiveServer, loopback_server
from tests.processes import PROCESS_LIMIT

SURFACE = "dashboard:u_dev"


@pytest.fixture(scope="module")
def live() -> Iterator[tuple[LiveServer, str, str]]:
    with loopback_server(EXAMPLE_POLICY) as server:
        key = server.call(server.harness.create_tenant("demo"))
        yield server, key, server.harness.approver_key("demo")


@pytest.fixture
def env(live: tuple[LiveServer, str, str], tmp_path: Path) -> dict[str, str]:
    server, key, _ = live
    return hook_env(tmp_path, server.url, key, SURFACE)


@pytest.mark.parametrize(("agent", "base"), [("claude-code", CLAUDE_BASH), ("codex", CODEX_BASH)])
def test_a_read_the_policy_allows_is_allowed_at_once(
    env: dict[str, str], agent: str, base: dict[str, Any]
) -> None:
    done = run_hook(base, env, agent)
    assert done.returncode == 0, done.stderr
    decision, reason = decision_of(done.stdout)
    assert decision == "allow" and "tools.Bash.when[1]" in reason


def test_cosigner_hook_is_also_cosigner_hook(env: dict[str, str]) -> None:
    done = run_hook(event(CLAUDE_BASH, call="toolu_alias"), env, "claude-code", via="cosigner")
    assert done.returncode == 0, done.stderr
    assert decision_of(done.stdout)[0] == "allow"


def test_a_recursive_rm_is_denied_with_the_policys_reason(env: dict[str, str]) -> None:
    done = run_hook(event(CLAUDE_BASH, command="git status; rm -rf /", call="toolu_rm"), env)
    decision, reason = decision_of(done.stdout)
    assert decision == "deny" and "a recursive rm is never run by an agent" in reason


def test_a_push_waits_and_a_denys_comment_reaches_the_model(
    live: tuple[LiveServer, str, str], env: dict[str, str]
) -> None:
    server, key, approver = live
    push = event(CODEX_BASH, command="git push origin main", call="call_push_1")
    proc = start_hook(push, env, "codex")
    approval = pending_approval(server.url, key, push, Agent.CODEX)
    denied = httpx.post(
        f"{server.url}/v1/approvals/{approval}/decision",
        json={"decision": "deny", "userId": "u_admin", "comment": "push to the staging remote first"},
        headers={"Authorization": f"Bearer {approver}"},
    )
    assert denied.status_code == 200, denied.text
    out, err = proc.communicate(timeout=PROCESS_LIMIT)
    assert proc.returncode == 0, err
    decision, reason = decision_of(out)
    assert decision == "deny"
    assert "push to the staging remote first" in reason and "u_admin" in reason


def test_an_approved_push_is_allowed_with_the_approvers_name(
    live: tuple[LiveServer, str, str], env: dict[str, str]
) -> None:
    server, key, approver = live
    push = event(CLAUDE_BASH, command="git push origin main", call="toolu_push_ok")
    proc = start_hook(push, env)
    approval = pending_approval(server.url, key, push, Agent.CLAUDE_CODE)
    body = {"decision": "approve", "userId": "u_admin"}
    r = httpx.post(
        f"{server.url}/v1/approvals/{approval}/decision",
        json=body,
        headers={"Authorization": f"Bearer {approver}"},
    )
    assert r.status_code == 200, r.text
    out, _ = proc.communicate(timeout=PROCESS_LIMIT)
    decision, reason = decision_of(out)
    assert decision == "allow" and "u_admin" in reason


def test_no_answer_within_the_timeout_is_a_deny_and_the_request_is_withdrawn(
    live: tuple[LiveServer, str, str], env: dict[str, str]
) -> None:
    server, key, _ = live
    push = event(CLAUDE_BASH, command="git push --force", call="toolu_push_slow")
    done = run_hook(push, env, "claude-code", "--timeout", "3")
    decision, reason = decision_of(done.stdout)
    assert decision == "deny" and "no answer" in reason
    approval = pending_approval(server.url, key, push, Agent.CLAUDE_CODE, settled=True)
    got = httpx.get(
        f"{server.url}/v1/approvals/{approval}", headers={"Authorization": f"Bearer {key}"}
    ).json()
    assert got["status"] == "cancelled"  # nobody can approve a call that was not run


def test_an_edit_shows_the_change_to_the_person(
    live: tuple[LiveServer, str, str], env: dict[str, str]
) -> None:
    # Edit is a tool the example policy does not know: a danger tool, asked of the requester.
    server, key, _ = live
    proc = start_hook(CLAUDE_EDIT, env)
    approval = pending_approval(server.url, key, CLAUDE_EDIT, Agent.CLAUDE_CODE)
    got = httpx.get(
        f"{server.url}/v1/approvals/{approval}", headers={"Authorization": f"Bearer {key}"}
    ).json()
    assert got["parameters"]["old_string"] == "total = price * qty"
    assert got["parameters"]["new_string"] == "total = round(price * qty, 2)"
    httpx.post(f"{server.url}/v1/approvals/{approval}/cancel", headers={"Authorization": f"Bearer {key}"})
    out, _ = proc.communicate(timeout=PROCESS_LIMIT)
    assert decision_of(out)[0] == "deny"


def test_cosigner_unreachable_is_a_deny_naming_it(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, never listening: connections are refused
        env = hook_env(tmp_path, f"http://127.0.0.1:{port}", "csk_agent_x", SURFACE)
        # A refused connection is told at once; the timeout only bounds a wait gone wrong (a
        # loaded machine may take seconds to start the hook, and must not turn this into a
        # "no answer in time" deny).
        done = run_hook(CLAUDE_BASH, env, "claude-code", "--timeout", "120")
    decision, reason = decision_of(done.stdout)
    assert decision == "deny" and f"127.0.0.1:{port}" in reason


def test_a_cosigner_that_never_answers_is_a_deny_at_the_timeout(tmp_path: Path) -> None:
    with silent_server() as url:
        done = run_hook(
            CLAUDE_BASH, hook_env(tmp_path, url, "csk_agent_x", SURFACE), "claude-code", "--timeout", "1"
        )
    decision, reason = decision_of(done.stdout)
    assert decision == "deny" and "no answer" in reason and done.returncode == 0


@pytest.mark.parametrize(
    ("stdin", "field"),
    [
        (b"{oops", "body"),
        (b'{"hook_event_name": "PreToolUse"}', "session_id"),
        (event(CLAUDE_BASH, hook_event_name="PostToolUse"), "hook_event_name"),
        ({k: v for k, v in CLAUDE_BASH.items() if k != "tool_use_id"}, "tool_use_id"),
        (event(CLAUDE_BASH, tool_input=["ls"]), "tool_input"),
    ],
)
def test_input_that_is_not_the_agents_is_a_deny_naming_the_field(
    tmp_path: Path, stdin: bytes | dict[str, Any], field: str
) -> None:
    # Nothing listens at the URL: a bad input is refused before anything is asked.
    done = run_hook(stdin, hook_env(tmp_path, "http://127.0.0.1:9", "k", SURFACE))
    decision, reason = decision_of(done.stdout)
    assert decision == "deny" and f"{field}:" in reason


def test_missing_configuration_is_a_deny_naming_the_variable(tmp_path: Path) -> None:
    env = hook_env(tmp_path, "http://127.0.0.1:9", "k", SURFACE)
    del env["COSIGNER_SURFACE"]
    decision, reason = decision_of(run_hook(CLAUDE_BASH, env).stdout)
    assert decision == "deny" and "COSIGNER_SURFACE" in reason


def test_a_bad_surface_is_a_deny_naming_it(env: dict[str, str]) -> None:
    env = {**env, "COSIGNER_SURFACE": "slack:T0ACME"}
    decision, reason = decision_of(run_hook(event(CLAUDE_BASH, call="toolu_surface"), env).stdout)
    assert decision == "deny" and "COSIGNER_SURFACE" in reason


def test_where_the_answer_cannot_be_written_the_hook_exits_2_with_the_reason(tmp_path: Path) -> None:
    import subprocess

    from tests.hooks.running import command

    env = hook_env(tmp_path, "http://127.0.0.1:9", "k", SURFACE)
    bad = event(CLAUDE_BASH, hook_event_name="Stop")
    with open(tmp_path / "err", "wb") as err:
        proc = subprocess.Popen(
            command("claude-code"), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, env=env
        )
        assert proc.stdout is not None and proc.stdin is not None
        proc.stdout.close()  # the agent went away: nothing can be written to it
        proc.stdin.write(__import__("json").dumps(bad).encode())
        proc.stdin.close()
        assert proc.wait(timeout=PROCESS_LIMIT) == 2
    assert "hook_event_name" in (tmp_path / "err").read_text()


def pending_approval(
    url: str, key: str, hook_event: dict[str, Any], agent: Agent, *, settled: bool = False
) -> str:
    """The approval the hook made for `hook_event`, found by asking again for the same call
    (the same execution, call and parameters return the existing approval)."""
    import time

    use = read_tool_use(__import__("json").dumps(hook_event).encode(), agent)
    body = {
        "executionId": use.session_id,
        "toolCallId": use.tool_use_id,
        "toolName": use.tool_name,
        "parameters": use.tool_input,
        "surface": {"type": "dashboard", "userId": "u_dev"},
    }
    deadline = time.monotonic() + PROCESS_LIMIT
    while time.monotonic() < deadline:
        found = httpx.post(f"{url}/v1/approvals", json=body, headers={"Authorization": f"Bearer {key}"})
        if found.status_code in (200, 201) and (settled or found.json().get("status") == "pending"):
            aid: str = found.json()["approvalId"]
            return aid
        time.sleep(0.05)
    raise AssertionError("the hook made no approval")


class silent_server:
    """A TCP server that accepts connections and never answers."""

    def __enter__(self) -> str:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.held: list[socket.socket] = []
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}"

    def _accept(self) -> None:
        try:
            while True:
                conn, _ = self.sock.accept()
                self.held.append(conn)
        except OSError:
            return

    def __exit__(self, *exc: object) -> None:
        self.sock.close()
        for conn in self.held:
            conn.close()
