"""Multi-workspace mode: OAuth installs into the database, refused for unknown orgs, then used."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import parse_qs, urlparse

import httpx
import pytest
import sqlalchemy as sa
from starlette.applications import Starlette

from bot.http.app import build_app, parts_of
from bot.policy.rules import load_policy
from contracts.errors import SurfaceUnavailable
from storage import raw
from storage.database import Database
from storage.sealing import TokenSeal
from storage.slack_installs import SlackInstallStores
from surfaces.slack import SlackAdapter, SlackConfig
from surfaces.slack.emulator import SlackEmulator
from tests.harness import DEFAULT_POLICY, TEST_SECRET, database, make_settings

TOKEN_SECRET = TEST_SECRET

# slack_sdk builds aiohttp.BasicAuth for oauth.v2.access, which aiohttp 3.14 deprecates.
pytestmark = pytest.mark.filterwarnings("ignore:BasicAuth is deprecated:DeprecationWarning")


@pytest.fixture
async def db(db_kind: str) -> AsyncIterator[Database]:
    async with database(db_kind) as migrated:
        yield migrated


@pytest.fixture
async def emu() -> AsyncIterator[SlackEmulator]:
    async with SlackEmulator.running(team_id="T0DEFAULT", client_id="cid", client_secret="csec") as emulator:
        yield emulator


@asynccontextmanager
async def oauth_adapter(
    db: Database, emu: SlackEmulator, desk: Any, secret: str, token_secret: str = TOKEN_SECRET
) -> AsyncIterator[tuple[SlackAdapter, httpx.AsyncClient]]:
    """A started multi-workspace adapter on `db`, served over an ASGI client."""
    stores = SlackInstallStores.on(db, client_id="cid", token_secret=token_secret)
    await stores.seal_plaintext()  # what the app does at start
    config = SlackConfig(
        signing_secret=secret,
        client_id="cid",
        client_secret="csec",
        api_url=emu.api_url,
        installations=stores.installations,
        oauth_states=stores.states,
    )
    slack = SlackAdapter(config, desk)
    await slack.start()
    transport = httpx.ASGITransport(app=Starlette(routes=slack.routes()))
    try:
        async with httpx.AsyncClient(transport=transport, base_url="https://cosigner.test") as http:
            yield slack, http
    finally:
        await slack.stop()


@pytest.fixture
async def oauth(
    db: Database, emu: SlackEmulator, desk: Any, secret: str
) -> AsyncIterator[tuple[SlackAdapter, SlackEmulator, httpx.AsyncClient]]:
    async with oauth_adapter(db, emu, desk, secret) as (slack, http):
        yield slack, emu, http


async def install(http: httpx.AsyncClient, emu: SlackEmulator, **org: Any) -> httpx.Response:
    page = await http.get("/slack/install")
    assert page.status_code == 200
    link = re.search(r'href="(https://slack\.com/oauth/v2/authorize\?[^"]+)"', page.text)
    assert link is not None
    query = parse_qs(urlparse(link.group(1).replace("&amp;", "&")).query)
    assert query["client_id"] == ["cid"]
    assert set(query["scope"][0].split(",")) == {"chat:write", "commands", "im:write", "users:read.email"}
    code = emu.issue_oauth_code(**org)
    return await http.get("/slack/oauth_redirect", params={"code": code, "state": query["state"][0]})


async def test_install_then_deliver_with_the_installed_token(
    oauth: Any, make_card: Any, make_route: Any
) -> None:
    slack, emu, http = oauth
    done = await install(http, emu, team_id="T1")
    assert done.status_code == 200 and "Cosigner is installed" in done.text
    delivered = await slack.deliver(make_card(), make_route(team_id="T1"))
    (posted,) = emu.messages
    assert posted.team_id == "T1"  # the installed bot token, not some default
    assert delivered.app_id == "A0EMU"  # learned from the installation


async def test_an_install_from_an_org_without_a_tenant_is_refused(
    oauth: Any, make_card: Any, make_route: Any
) -> None:
    slack, emu, http = oauth
    refused = await install(http, emu, team_id="T666")
    assert refused.status_code == 403
    assert "T666" in refused.text and "slack_team" in refused.text
    with pytest.raises(SurfaceUnavailable, match="not installed"):
        await slack.deliver(make_card(), make_route(team_id="T666"))
    assert emu.messages == []


async def test_org_wide_install_serves_every_workspace_of_the_org(
    oauth: Any, desk: Any, make_card: Any, make_route: Any
) -> None:
    slack, emu, http = oauth
    desk.orgs["E1"] = "acme"
    done = await install(http, emu, team_id=None, enterprise_id="E1", is_enterprise_install=True)
    assert done.status_code == 200
    await slack.deliver(make_card(), make_route(team_id="T5", enterprise_id="E1"))
    assert len(emu.messages) == 1


async def test_a_state_that_was_not_issued_is_refused(oauth: Any) -> None:
    _, emu, http = oauth
    code = emu.issue_oauth_code("T1")
    response = await http.get("/slack/oauth_redirect", params={"code": code, "state": "forged"})
    assert response.status_code in (400, 401)


async def test_clicks_are_authorized_by_the_installation(
    oauth: Any, desk: Any, secret: str, make_card: Any, make_route: Any
) -> None:
    slack, emu, http = oauth
    await install(http, emu, team_id="T1")
    delivered = await slack.deliver(make_card(), make_route(team_id="T1"))
    response = await emu.click(
        http,
        channel=delivered.conversation,
        ts=delivered.message_refs[0],
        action_id="cosigner.approve",
        secret=secret,
        team="T1",
    )
    assert response.status_code == 200
    assert [a.org for a in desk.answers] == ["T1"]
    checks = [m for m, _ in emu.calls].count("auth.test")
    await emu.click(
        http,
        channel=delivered.conversation,
        ts=delivered.message_refs[0],
        action_id="cosigner.approve",
        secret=secret,
        team="T1",
    )
    assert len(desk.answers) == 2
    assert [m for m, _ in emu.calls].count("auth.test") == checks  # authorization is cached


async def stored_rows(db: Database) -> list[dict[str, Any]]:
    """Every row of slack_sdk's installation and bot tables, as the database holds them."""
    async with raw.read(db) as conn:
        rows: list[dict[str, Any]] = []
        for table in ("slack_installations", "slack_bots"):
            result = await conn.execute(sa.text(f"SELECT * FROM {table}"))
            rows.extend(dict(row) for row in result.mappings())
    return rows


async def test_tokens_are_sealed_at_rest_and_the_install_still_posts(
    oauth: Any, db: Database, make_card: Any, make_route: Any
) -> None:
    slack, emu, http = oauth
    assert (await install(http, emu, team_id="T1")).status_code == 200
    rows = await stored_rows(db)
    assert len(rows) == 2
    assert all(row["bot_token"].startswith("cosigner-seal:v1:") for row in rows)
    assert "xox" not in repr(rows)
    await slack.deliver(make_card(), make_route(team_id="T1"))
    (posted,) = emu.messages
    assert posted.team_id == "T1"


async def test_another_cosigner_secret_fails_clearly_and_leaks_no_token(
    oauth: Any, db: Database, desk: Any, secret: str, make_card: Any, make_route: Any
) -> None:
    _, emu, http = oauth
    await install(http, emu, team_id="T1")
    async with oauth_adapter(db, emu, desk, secret, token_secret="another-secret-" + "y" * 32) as (other, _):
        with pytest.raises(SurfaceUnavailable) as refused:
            await other.deliver(make_card(), make_route(team_id="T1"))
    message = refused.value.message
    assert "COSIGNER_SECRET" in message and "reinstall" in message
    assert "xox" not in message and "xox" not in repr(refused.value.body())
    assert emu.messages == []


async def test_plain_text_tokens_of_an_older_version_are_sealed_at_start(
    oauth: Any, db: Database, desk: Any, secret: str, make_card: Any, make_route: Any
) -> None:
    _, emu, http = oauth
    await install(http, emu, team_id="T1")
    seal = TokenSeal(TOKEN_SECRET)
    async with raw.write(db) as conn:  # what slack_sdk stored before tokens were sealed
        for table in ("slack_installations", "slack_bots"):
            for row in (await conn.execute(sa.text(f"SELECT id, bot_token FROM {table}"))).all():
                plain = seal.open(row.bot_token, "bot_token||T1")
                await conn.execute(
                    sa.text(f"UPDATE {table} SET bot_token = :t WHERE id = :id"), {"t": plain, "id": row.id}
                )
    assert "xoxb-" in repr(await stored_rows(db))
    settings = make_settings(
        slack_signing_secret=secret,
        slack_client_id="cid",
        slack_client_secret="csec",
        slack_api_url=emu.api_url,
    )
    app = build_app(settings, policy=load_policy(DEFAULT_POLICY), db=db, run_workers=False, migrate=False)
    async with app.router.lifespan_context(app):
        assert "xox" not in repr(await stored_rows(db))
        await parts_of(app).surfaces["slack"].deliver(make_card(), make_route(team_id="T1"))
    (posted,) = emu.messages
    assert posted.team_id == "T1"
