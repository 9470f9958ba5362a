"""Starting `cosigner serve` and `cosigner dev` as real processes: every setting is checked
first, a taken port is one clear line, `cosigner started` means listening, and everything
on stderr while serving is a JSON line that carries no parameters or SQL values."""

from __future__ import annotations

import asyncio
import json
import socket
import sqlite3
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.harness import until
from tests.processes import REPO, clean_env, cosigner, free_port, serving

SECRET = "ops-startup-secret-" + "s" * 32
HIDDEN = "hunter2-do-not-print"
SLACK_ON = {"SLACK_SIGNING_SECRET": "signing-" + HIDDEN, "SLACK_BOT_TOKEN": "xoxb-1"}
SMS_ON = {"TWILIO_ACCOUNT_SID": "AC" + "0" * 32, "TWILIO_AUTH_TOKEN": "token-" + HIDDEN}

BAD_SETTINGS = {
    "log_level": ({"COSIGNER_LOG_LEVEL": "LOUD"}, ["COSIGNER_LOG_LEVEL", "DEBUG, INFO, WARNING"]),
    "pool_size": ({"COSIGNER_DATABASE_POOL_SIZE": "-3"}, ["COSIGNER_DATABASE_POOL_SIZE", "1 to 500"]),
    "pool_word": ({"COSIGNER_DATABASE_POOL_SIZE": "many"}, ["COSIGNER_DATABASE_POOL_SIZE", "1 to 500"]),
    "user_token": (
        {**SLACK_ON, "SLACK_BOT_TOKEN": "xoxp-" + HIDDEN},
        ["SLACK_BOT_TOKEN", "xoxb-"],
    ),
    "app_token": (
        {"SLACK_BOT_TOKEN": "xoxb-1", "SLACK_APP_TOKEN": "xoxb-" + HIDDEN},
        ["SLACK_APP_TOKEN", "xapp-"],
    ),
    "short_secret": ({"COSIGNER_SECRET": HIDDEN}, ["COSIGNER_SECRET", "at least 32 bytes"]),
    "slack_url": (
        {**SLACK_ON, "COSIGNER_PUBLIC_URL": "cosigner.example.com"},
        ["COSIGNER_PUBLIC_URL", "absolute http:// or https:// URL"],
    ),
    "sms_url": (
        {**SMS_ON, "COSIGNER_PUBLIC_URL": "ftp://cosigner.example.com"},
        ["COSIGNER_PUBLIC_URL", "absolute http:// or https:// URL"],
    ),
    "api_url": ({"SLACK_API_URL": "localhost:9000"}, ["SLACK_API_URL", "absolute"]),
    "sqlite_sync": (
        {"COSIGNER_SQLITE_SYNCHRONOUS": "off"},
        ["COSIGNER_SQLITE_SYNCHRONOUS must be one of NORMAL, FULL", "(it is 'OFF')"],
    ),
    "sqlite_sync_on_postgres": (
        {
            "COSIGNER_DATABASE_URL": "postgresql+asyncpg://cosigner@127.0.0.1:1/cosigner",
            "COSIGNER_SQLITE_SYNCHRONOUS": "full",
        },
        ["COSIGNER_SQLITE_SYNCHRONOUS applies to SQLite only", "synchronous_commit"],
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_SETTINGS))
def test_a_bad_setting_is_one_error_line_and_exit_2(case: str, tmp_path: Path) -> None:
    extra, expected = BAD_SETTINGS[case]
    env = clean_env(tmp_path, **{"COSIGNER_SECRET": SECRET, **extra})
    done = cosigner(env, "serve", "--port", str(free_port()), cwd=tmp_path)
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert done.stderr.startswith("error: ") and done.stderr.count("\n") == 1, done.stderr
    for text in expected:
        assert text in done.stderr, done.stderr
    assert HIDDEN not in done.stderr, "a secret was echoed"
    assert not (tmp_path / "cosigner.db").exists(), "nothing was started"


def test_every_command_checks_the_settings(tmp_path: Path) -> None:
    env = clean_env(tmp_path, COSIGNER_LOG_LEVEL="LOUD")
    done = cosigner(env, "tenants", "list", cwd=tmp_path)
    assert done.returncode == 2 and done.stderr.startswith("error: COSIGNER_LOG_LEVEL"), done.stderr


@pytest.mark.slow
def test_a_taken_port_is_one_error_line_for_serve_and_dev(tmp_path: Path) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        env = clean_env(tmp_path, COSIGNER_SECRET=SECRET)
        for command in (["serve"], ["dev", "--data", str(tmp_path / "sandbox")]):
            done = cosigner(env, *command, "--port", str(port), cwd=tmp_path)
            assert done.returncode == 2, (command, done.returncode, done.stderr)
            assert done.stderr.splitlines()[-1] == (
                f"error: port {port} is already in use; stop what holds it or pick another "
                f"with `cosigner {command[0]} --port N`"
            ), done.stderr
            assert "cosigner started" not in done.stderr and "Traceback" not in done.stderr


def test_started_is_logged_once_listening_with_named_fields(tmp_path: Path) -> None:
    env = clean_env(tmp_path, COSIGNER_SECRET=SECRET)
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "bot.cli", "serve", "--port", str(port)],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        started = None
        for line in proc.stderr:
            if json.loads(line)["msg"] == "cosigner started":
                started = json.loads(line)
                break
        assert started is not None, "serve exited without starting"
        # The line means the port accepts connections now, not soon.
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
        assert started["port"] == port and started["database"] == "sqlite"
        assert started["sqlite_synchronous"] == "NORMAL"
        assert started["surfaces"] == ["dashboard"] and started["url"] == "http://127.0.0.1:8000"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.mark.slow
def test_everything_on_stderr_is_json_even_a_crash_in_a_route(tmp_path: Path) -> None:
    env = clean_env(tmp_path, COSIGNER_SECRET=SECRET)  # no policy: a warning
    created = cosigner(env, "tenants", "create", "acme", cwd=tmp_path)
    key = next(w for w in created.stdout.split() if w.startswith("csk_"))
    port = free_port()
    log = tmp_path / "serve.log"
    marker = "run_marker_in_sql_values"
    with serving(env, tmp_path, port, log, terminate=True):
        with sqlite3.connect(tmp_path / "cosigner.db") as conn:
            conn.execute("DROP TABLE audit_events")  # every write now fails inside the app
        r = httpx.post(
            f"http://127.0.0.1:{port}/v1/approvals",
            headers={"Authorization": f"Bearer {key}"},
            json={
                "executionId": marker,
                "toolCallId": "call_1",
                "toolName": "issue_refund",
                "parameters": {"cardToken": HIDDEN},
                "surface": {"type": "dashboard", "userId": "u_1"},
            },
        )
        assert r.status_code == 500 and r.json()["error"]["code"] == "INTERNAL", r.text
        with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
            raw.sendall(b"NOT HTTP AT ALL\r\n\r\n")  # uvicorn warns about it
            raw.recv(1024)
        asyncio.run(until(lambda: "Invalid HTTP" in log.read_text(), seconds=10, interval=0.05))
    text = log.read_text()
    lines = [json.loads(line) for line in text.splitlines()]  # raises on any plain-text line
    crash = [line for line in lines if line.get("error") == "OperationalError"]
    assert crash and "no such table: audit_events" in crash[-1]["error_text"], text
    assert crash[-1]["traceback"] and all(":" in frame for frame in crash[-1]["traceback"])
    assert any(line["logger"].startswith("uvicorn") and "Invalid HTTP" in line["msg"] for line in lines)
    assert any("COSIGNER_POLICY is not set" in line["msg"] for line in lines)
    assert marker not in text and HIDDEN not in text, "parameters or SQL values reached the log"
    assert str(REPO) in " ".join(crash[-1]["traceback"]), "frames name the code that failed"
