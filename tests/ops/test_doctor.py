"""`cosigner doctor`: each check against the real thing, and each failure named with its fix.

The command runs as a subprocess, as an operator runs it, against the bundled emulators on
loopback (Slack with the one bot token it accepts, Twilio, Teams, Slack's OpenID issuer) and
a real database (SQLite, and PostgreSQL when COSIGNER_TEST_POSTGRES_URL is set). Every
failure is a real one: a wrong token or password the emulator refuses, a closed port, a path
nothing can be created at, an issuer URL with no discovery document, a database migrated to
an older revision, a weak secret. The runner's own promises (a crashing check fails with its
class and message, a hanging one cannot hang doctor, a secret is never printed) are tested in
process on the same table.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from alembic import command

from bot.cli.doctor import Context, Status, diagnose, exit_status, render
from bot.cli.doctor_checks import CHECKS
from bot.settings import DEV_SECRET, read_settings
from storage import raw
from storage.database import Database, _alembic_config
from surfaces.slack.emulator import SlackEmulator
from surfaces.sms.emulator import TwilioEmulator
from surfaces.teams.emulator import TeamsEmulator
from tests.harness import postgres_url
from tests.mailbox import smtp_server
from tests.processes import clean_env, cosigner_async, free_port, fresh_database

SECRET = secrets.token_urlsafe(32)
BOT_TOKEN = "xoxb-doctor-good-token"
TWILIO_SID, TWILIO_TOKEN = "AC" + "d" * 32, "twilio-doctor-token"
APP_ID, HOME = "8c1f3a4e-2b7d-4c55-9a10-6f0e2d3c4b5a", "0d9e8f7a-6b5c-4d3e-8f2a-1b0c9d8e7f6a"
APP_PASSWORD = "teams-doctor-password"
CLIENT_ID, CLIENT_SECRET = "cosigner-inbox", "oidc-doctor-client-secret"
SMTP_LOGIN = ("cosigner", "smtp-doctor-password")
POLICY = """
[tools.issue_refund]
kind = "danger"
"""


@dataclass
class World:
    """The emulators doctor is pointed at, and the environment that points it there."""

    slack: SlackEmulator
    twilio: TwilioEmulator
    teams: TeamsEmulator
    env: dict[str, str]
    folder: Path


@asynccontextmanager
async def world(tmp_path: Path, database_url: str) -> AsyncIterator[World]:
    """Every emulator on loopback, and an operator's environment with every surface on."""
    async with AsyncExitStack() as stack:
        slack = await stack.enter_async_context(SlackEmulator.running(bot_tokens=(BOT_TOKEN,)))
        twilio = await stack.enter_async_context(TwilioEmulator.running(TWILIO_SID, TWILIO_TOKEN))
        teams = await stack.enter_async_context(
            TeamsEmulator.running(app_id=APP_ID, app_password=APP_PASSWORD, tenant_id=HOME)
        )
        slack.openid.register_client(CLIENT_ID, CLIENT_SECRET)
        mail = stack.enter_context(smtp_server(login=SMTP_LOGIN, login_in_clear=True))
        (tmp_path / "policy.toml").write_text(POLICY)
        env = clean_env(
            tmp_path,
            COSIGNER_DATABASE_URL=database_url,
            COSIGNER_SECRET=SECRET,
            COSIGNER_POLICY=str(tmp_path / "policy.toml"),
            COSIGNER_PUBLIC_URL="https://cosigner.example.com",
            SLACK_SIGNING_SECRET="doctor-signing-secret",
            SLACK_BOT_TOKEN=BOT_TOKEN,
            SLACK_API_URL=slack.api_url,
            TWILIO_ACCOUNT_SID=TWILIO_SID,
            TWILIO_AUTH_TOKEN=TWILIO_TOKEN,
            TWILIO_FROM_NUMBER="+15550000001",
            TWILIO_API_URL=twilio.api_url,
            MICROSOFT_APP_ID=APP_ID,
            MICROSOFT_APP_PASSWORD=APP_PASSWORD,
            MICROSOFT_APP_TENANT_ID=HOME,
            TEAMS_API_URL=teams.api_url,
            COSIGNER_OIDC_ISSUER=slack.openid.issuer,
            COSIGNER_OIDC_CLIENT_ID=CLIENT_ID,
            COSIGNER_OIDC_CLIENT_SECRET=CLIENT_SECRET,
            COSIGNER_SMTP_URL=f"smtp://{SMTP_LOGIN[0]}:{SMTP_LOGIN[1]}@127.0.0.1:{mail.port}",
            COSIGNER_SMTP_FROM="cosigner@acme.example",
        )
        yield World(slack, twilio, teams, env, tmp_path)


# Each check's timeout in the subprocess runs: generous, so a machine busy with other work
# does not turn a slow answer into a failure (the timeout itself is tested in process).
TIMEOUT = "30"


async def doctor(w: World, **env: str) -> tuple[int, dict[str, dict[str, str]], str]:
    """`cosigner doctor --json` with `env` over the world's: (exit status, findings by check,
    everything it printed)."""
    args = ("doctor", "--json", "--timeout", TIMEOUT)
    code, out, err = await cosigner_async({**w.env, **env}, *args, cwd=w.folder)
    findings = json.loads(out)
    return code, {f["check"]: f for f in findings}, out + err


async def migrated(w: World) -> None:
    code, out, err = await cosigner_async(w.env, "migrate", cwd=w.folder)
    assert code == 0, out + err


def statuses(found: dict[str, dict[str, str]]) -> dict[str, str]:
    return {name: f["status"] for name, f in found.items()}


# --- everything right ------------------------------------------------------------------------


async def test_every_check_passes_against_the_emulators(db_kind: str, tmp_path: Path) -> None:
    async with fresh_database(db_kind, tmp_path) as url, world(tmp_path, url) as w:
        await migrated(w)
        w.env["COSIGNER_AUDIT_SINK_URL"] = "https://siem.example.com/cloudevents"  # nothing waits for it
        code, out, err = await cosigner_async(w.env, "doctor", "--json", "--timeout", TIMEOUT, cwd=w.folder)
        text_code, text, _ = await cosigner_async(w.env, "doctor", "--timeout", TIMEOUT, cwd=w.folder)
    assert code == 0 and text_code == 0, out + err
    findings = json.loads(out)
    # The documented shape: a list of {check, status, message}, in the table's order.
    assert [f["check"] for f in findings] == list(CHECKS)
    assert all(set(f) == {"check", "status", "message"} for f in findings)
    assert all(f["status"] in {s.value for s in Status} and f["message"] for f in findings)
    found = {f["check"]: f for f in findings}
    want = {name: "ok" for name in CHECKS}
    if db_kind == "sqlite":
        want["clock"] = "skip"  # one machine, one clock
    assert statuses(found) == want, findings
    assert "auth.test" in found["slack"]["message"] and "T0EMU" in found["slack"]["message"]
    assert TWILIO_SID in found["twilio"]["message"] and "active" in found["twilio"]["message"]
    assert APP_ID in found["teams"]["message"]
    assert "JWKS (1 key(s))" in found["oidc"]["message"]
    assert "in clear" in found["smtp"]["message"] and "as cosigner" in found["smtp"]["message"]
    assert "has every audit event" in found["audit-sink"]["message"]
    # The text form: one line per check (status, name, message), then the tally.
    lines = text.strip().splitlines()
    assert len(lines) == len(CHECKS) + 1
    assert lines[0].split()[:2] == ["ok", "settings"]
    assert lines[-1].startswith(f"{len(CHECKS) - (db_kind == 'sqlite')} ok")


# --- each failure ----------------------------------------------------------------------------


async def test_wrong_credentials_fail_each_check_without_printing_them(tmp_path: Path) -> None:
    canaries = {
        "SLACK_BOT_TOKEN": "xoxb-canary-" + secrets.token_hex(8),
        "TWILIO_AUTH_TOKEN": "canary-twilio-" + secrets.token_hex(8),
        "MICROSOFT_APP_PASSWORD": "canary-teams-" + secrets.token_hex(8),
        "COSIGNER_OIDC_CLIENT_SECRET": "canary-oidc-" + secrets.token_hex(8),
    }
    async with fresh_database("sqlite", tmp_path) as url, world(tmp_path, url) as w:
        await migrated(w)
        nowhere = w.twilio.api_url + "/no-issuer-here"  # a server, but no discovery document
        code, found, printed = await doctor(w, COSIGNER_OIDC_ISSUER=nowhere, **canaries)
    assert code == 1
    assert statuses(found) == {
        **{name: "ok" for name in CHECKS},
        "clock": "skip",
        "audit-sink": "skip",  # no sink set
        "slack": "fail",
        "twilio": "fail",
        "teams": "fail",
        "oidc": "fail",
    }
    assert "invalid_auth" in found["slack"]["message"] and "SLACK_BOT_TOKEN" in found["slack"]["message"]
    assert "Twilio refused" in found["twilio"]["message"] and "HTTP 401" in found["twilio"]["message"]
    assert "invalid_client" in found["teams"]["message"]
    assert "MICROSOFT_APP_PASSWORD" in found["teams"]["message"]
    assert "HTTP 404" in found["oidc"]["message"] and "COSIGNER_OIDC_ISSUER" in found["oidc"]["message"]
    for name, value in canaries.items():
        assert value not in printed, f"{name} was printed"


async def test_a_wrong_smtp_password_or_a_closed_port_fails_the_smtp_check(tmp_path: Path) -> None:
    password = "canary-smtp-" + secrets.token_hex(6)
    async with fresh_database("sqlite", tmp_path) as url, world(tmp_path, url) as w:
        await migrated(w)
        port = w.env["COSIGNER_SMTP_URL"].rsplit(":", 1)[1]
        wrong = f"smtp://cosigner:{password}@127.0.0.1:{port}"
        code, found, printed = await doctor(w, COSIGNER_SMTP_URL=wrong)
        closed = f"smtp://127.0.0.1:{free_port()}"
        _, unreachable, _ = await doctor(w, COSIGNER_SMTP_URL=closed)
        _, half, _ = await doctor(w, COSIGNER_SMTP_FROM="")
        _, bad, _ = await doctor(w, COSIGNER_SMTP_URL="http://mail.example.com")
    assert code == 1 and found["smtp"]["status"] == "fail"
    assert "refused the user and password" in found["smtp"]["message"] and "535" in found["smtp"]["message"]
    assert password not in printed
    assert unreachable["smtp"]["status"] == "fail" and "COSIGNER_SMTP_URL" in unreachable["smtp"]["message"]
    assert half["smtp"]["status"] == "warn" and "COSIGNER_SMTP_FROM is not set" in half["smtp"]["message"]
    assert bad["settings"]["status"] == "fail" and "smtp://HOST" in bad["settings"]["message"]
    assert "http://mail.example.com" not in bad["settings"]["message"]  # a URL that may hold a password


async def test_an_unreachable_postgresql_fails_the_database_check(tmp_path: Path) -> None:
    password = "canary-db-" + secrets.token_hex(6)
    closed = f"postgresql+asyncpg://cosigner:{password}@127.0.0.1:{free_port()}/cosigner"
    async with world(tmp_path, closed) as w:
        code, found, printed = await doctor(w)
    assert code == 1
    assert found["database"]["status"] == "fail"
    message = found["database"]["message"]
    assert "ConnectionRefusedError" in message and "COSIGNER_DATABASE_URL" in message
    assert "cosigner:***@127.0.0.1" in message  # the URL, its password masked
    assert found["clock"]["status"] == "skip" and "see database" in found["clock"]["message"]
    assert password not in printed


async def test_a_sqlite_path_nothing_can_be_created_at_fails(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("not a folder")
    url = f"sqlite+aiosqlite:///{tmp_path / 'a-file' / 'cosigner.db'}"
    async with world(tmp_path, url) as w:
        code, found, _ = await doctor(w)
    assert code == 1
    assert found["database"]["status"] == "fail"
    assert "is not a folder" in found["database"]["message"]
    assert not (tmp_path / "a-file").is_dir()  # doctor created nothing


async def test_a_database_at_an_older_revision(db_kind: str, tmp_path: Path) -> None:
    async with fresh_database(db_kind, tmp_path) as url, world(tmp_path, url) as w:
        await migrated(w)
        db = Database(url)
        try:
            async with raw.write(db) as conn:
                await conn.run_sync(lambda c: command.downgrade(_alembic_config(c), "0012"))
        finally:
            await db.close()
        code, found, _ = await doctor(w)
    message = found["database"]["message"]
    assert "schema revision 0012" in message, message
    if db_kind == "sqlite":  # serve migrates SQLite itself: a warning, and nothing fails
        assert (code, found["database"]["status"]) == (0, "warn")
        assert "`serve` migrates it at start" in message
    else:  # PostgreSQL is migrated by the operator, once: serve would refuse to start
        assert (code, found["database"]["status"]) == (1, "fail")
        assert "run `cosigner migrate`" in message


@pytest.mark.parametrize(
    ("secret", "wanted", "words"),
    [
        ("short-secret", "fail", ["COSIGNER_SECRET", "at least 32 bytes"]),
        (DEV_SECRET, "fail", ["sandbox's published secret"]),
        ("a" * 40, "warn", ["little variety"]),
    ],
    ids=["too-short", "the-sandbox-secret", "repeated"],
)
async def test_a_weak_secret(tmp_path: Path, secret: str, wanted: str, words: list[str]) -> None:
    async with fresh_database("sqlite", tmp_path) as url, world(tmp_path, url) as w:
        await migrated(w)
        code, found, printed = await doctor(w, COSIGNER_SECRET=secret)
    assert found["secret"]["status"] == wanted
    assert all(word in found["secret"]["message"] for word in words), found["secret"]
    assert code == (1 if wanted == "fail" else 0)
    assert secret not in printed
    if secret == "short-secret":  # the settings line names it too; the other checks still run
        assert found["settings"]["status"] == "fail" and "COSIGNER_SECRET" in found["settings"]["message"]
        assert found["slack"]["status"] == "ok" and found["database"]["status"] == "ok"


async def test_a_malformed_variable_is_named_and_its_checks_skipped(tmp_path: Path) -> None:
    async with fresh_database("sqlite", tmp_path) as url, world(tmp_path, url) as w:
        await migrated(w)
        code, found, printed = await doctor(w, SLACK_BOT_TOKEN="not-a-bot-token")
    assert code == 1
    assert found["settings"]["status"] == "fail"
    assert "SLACK_BOT_TOKEN must be a bot token, starting with xoxb-" in found["settings"]["message"]
    assert found["slack"] == {
        "check": "slack",
        "status": "skip",
        "message": "not checked: SLACK_BOT_TOKEN breaks its rule (see settings)",
    }
    assert found["twilio"]["status"] == "ok"  # the rest is still checked
    assert "not-a-bot-token" not in printed


async def test_a_bad_timeout_is_a_usage_error(tmp_path: Path) -> None:
    code, out, err = await cosigner_async(clean_env(tmp_path), "doctor", "--timeout", "0", cwd=tmp_path)
    assert code == 2 and out == ""
    assert err.startswith("error: ") and "--timeout" in err


# --- the runner, in process ------------------------------------------------------------------


def context(monkeypatch: pytest.MonkeyPatch, *, timeout: float = 5.0, **env: str) -> Context:
    """A doctor context on `env` (nothing else of Cosigner's set)."""
    for name in list(os.environ):
        if name.startswith(("COSIGNER_", "SLACK_", "TWILIO_", "MICROSOFT_")):
            monkeypatch.delenv(name)
    for name, value in {"COSIGNER_SECRET": SECRET, **env}.items():
        monkeypatch.setenv(name, value)
    return Context(read_settings(), timeout=timeout)


async def test_a_crashing_check_fails_with_its_class_and_never_a_secret(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    canary = "xoxb-canary-" + secrets.token_hex(8)
    ctx = context(monkeypatch, SLACK_BOT_TOKEN=canary, SLACK_SIGNING_SECRET="doctor-signing")

    async def crashes(ctx: Context) -> tuple[Status, str]:
        raise RuntimeError(f"the library quoted the token {canary}\nand went on")

    findings = await diagnose(ctx, {"crashes": crashes, "secret": CHECKS["secret"]})
    assert [(f.check, f.status) for f in findings] == [("crashes", Status.FAIL), ("secret", Status.OK)]
    assert findings[0].message == "RuntimeError: the library quoted the token [REDACTED] and went on"
    assert canary not in render(findings)
    assert exit_status(findings) == 1


async def test_a_service_that_hangs_cannot_hang_doctor(monkeypatch: pytest.MonkeyPatch) -> None:
    # A Slack API that accepts the connection and never answers.
    held: list[asyncio.StreamWriter] = []

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    ctx = context(
        monkeypatch,
        timeout=0.5,
        SLACK_SIGNING_SECRET="doctor-signing",
        SLACK_BOT_TOKEN=BOT_TOKEN,
        SLACK_API_URL=f"http://127.0.0.1:{port}/api/",
    )
    try:
        findings = {f.check: f for f in await diagnose(ctx)}
    finally:
        server.close()
        for writer in held:
            writer.close()
    assert (findings["slack"].status, findings["slack"].message) == (Status.FAIL, "no answer within 0.5 s")
    assert findings["callbacks"].status is Status.OK  # the others answered meanwhile


@pytest.mark.parametrize(
    ("allow", "wanted", "words"),
    [
        ("", "ok", ["public addresses over https only"]),
        ("10.20.0.0/16,hooks.internal", "ok", ["10.20.0.0/16, hooks.internal"]),
        ("10.0.0.1/8", "fail", ["COSIGNER_CALLBACK_ALLOW", "did you mean 10.0.0.0/8"]),
        ("169.254.0.0/16", "warn", ["cloud metadata"]),
        ("127.0.0.0/8,localhost", "warn", ["loopback"]),
        ("0.0.0.0/0", "warn", ["most of the internet", "cloud metadata", "loopback"]),
    ],
)
async def test_the_callback_rules(
    monkeypatch: pytest.MonkeyPatch, allow: str, wanted: str, words: list[str]
) -> None:
    ctx = context(monkeypatch, COSIGNER_CALLBACK_ALLOW=allow)
    (found,) = await diagnose(ctx, {"callbacks": CHECKS["callbacks"]})
    assert found.status.value == wanted, found
    assert all(word in found.message for word in words), found


@pytest.mark.parametrize(
    ("url", "slack_on", "wanted", "words"),
    [
        ("https://cosigner.example.com", True, "ok", []),
        ("http://cosigner.example.com", False, "warn", ["TLS", "https"]),
        ("http://127.0.0.1:8000", True, "warn", ["loopback", "Slack"]),
        ("http://127.0.0.1:8000", False, "ok", []),
        ("http://0.0.0.0:8000", False, "fail", ["0.0.0.0", "nobody can call"]),
        ("https://cosigner.example.com/?x=1", False, "fail", ["?query"]),
        ("cosigner.example.com", False, "fail", ["absolute http:// or https:// URL"]),
    ],
)
async def test_the_public_url(
    monkeypatch: pytest.MonkeyPatch, url: str, slack_on: bool, wanted: str, words: list[str]
) -> None:
    secret, token = ("s", BOT_TOKEN) if slack_on else ("", "")  # an empty variable is unset
    ctx = context(monkeypatch, COSIGNER_PUBLIC_URL=url, SLACK_SIGNING_SECRET=secret, SLACK_BOT_TOKEN=token)
    (found,) = await diagnose(ctx, {"public-url": CHECKS["public-url"]})
    assert found.status.value == wanted, found
    assert all(word in found.message for word in words), found


async def test_clock_skew_against_the_database(db_kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    url = postgres_url() if db_kind == "postgres" else "sqlite+aiosqlite:///unused.db"
    assert url

    def found(offset: float) -> Any:
        ctx = context(monkeypatch, COSIGNER_DATABASE_URL=url)
        ctx.clock = lambda: time.time() + offset  # this machine's clock, skewed
        return diagnose(ctx, {"clock": CHECKS["clock"]})

    if db_kind == "sqlite":
        (check,) = await found(0)
        assert check.status is Status.SKIP and "one clock" in check.message
        return
    (right,), (off,), (far,) = [await found(0), await found(-5), await found(-120)]
    assert right.status is Status.OK, right
    assert off.status is Status.WARN and "behind the database's" in off.message, off
    assert far.status is Status.FAIL and "NTP" in far.message, far


async def test_a_twilio_account_that_is_not_active_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    async with TwilioEmulator.running(TWILIO_SID, TWILIO_TOKEN) as twilio:
        twilio.account_status = "suspended"
        ctx = context(
            monkeypatch,
            TWILIO_ACCOUNT_SID=TWILIO_SID,
            TWILIO_AUTH_TOKEN=TWILIO_TOKEN,
            TWILIO_API_URL=twilio.api_url,
            COSIGNER_PUBLIC_URL="https://cosigner.example.com",
        )
        (found,) = await diagnose(ctx, {"twilio": CHECKS["twilio"]})
    assert found.status is Status.FAIL
    assert (
        found.message
        == f"the Twilio account {TWILIO_SID} is suspended: it sends nothing; see the Twilio console"
    )


async def test_an_issuer_whose_discovery_names_another_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    async with SlackEmulator.running() as slack:
        slack.openid.register_client(CLIENT_ID, CLIENT_SECRET)
        # The same issuer under another name: its document names http://127.0.0.1:…, so
        # every ID token's `iss` would differ from the configured issuer.
        spelled = slack.openid.issuer.replace("127.0.0.1", "localhost")
        ctx = context(
            monkeypatch,
            COSIGNER_OIDC_ISSUER=spelled,
            COSIGNER_OIDC_CLIENT_ID=CLIENT_ID,
            COSIGNER_OIDC_CLIENT_SECRET=CLIENT_SECRET,
        )
        (found,) = await diagnose(ctx, {"oidc": CHECKS["oidc"]})
    assert found.status is Status.FAIL, found
    assert f"names the issuer '{slack.openid.issuer}', not COSIGNER_OIDC_ISSUER" in found.message
