"""Multi-workspace mode: OAuth installs into the database, refused for unknown orgs, then used."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import httpx
import pytest
from sqlalchemy.ext.asyncio import create_async_engine
from starlette.applications import Starlette

from contracts.errors import SurfaceUnavailable
from surfaces.slack import SlackAdapter, SlackConfig, SlackEmulator

# slack_sdk builds aiohttp.BasicAuth for oauth.v2.access, which aiohttp 3.14 deprecates.
pytestmark = pytest.mark.filterwarnings("ignore:BasicAuth is deprecated:DeprecationWarning")


@pytest.fixture
async def oauth(
    tmp_path: Path, desk: Any, secret: str
) -> AsyncIterator[tuple[SlackAdapter, SlackEmulator, httpx.AsyncClient]]:
    engine = create_async_engine(f"sqlite+aiosqlite:///{tmp_path / 'slack.db'}")
    async with SlackEmulator.running(team_id="T0DEFAULT", client_id="cid", client_secret="csec") as emu:
        config = SlackConfig(
            signing_secret=secret, client_id="cid", client_secret="csec", api_url=emu.api_url
        )
        slack = SlackAdapter(config, desk, engine)
        await slack.start()
        app = Starlette(routes=slack.routes())
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="https://cosigner.test") as http:
            yield slack, emu, http
        await slack.stop()
    await engine.dispose()


async def install(http: httpx.AsyncClient, emu: SlackEmulator, **org: Any) -> httpx.Response:
    page = await http.get("/slack/install")
    assert page.status_code == 200
    link = re.search(r'href="(https://slack\.com/oauth/v2/authorize\?[^"]+)"', page.text)
    assert link is not None
    query = parse_qs(urlparse(link.group(1).replace("&amp;", "&")).query)
    assert query["client_id"] == ["cid"]
    assert set(query["scope"][0].split(",")) == {"chat:write", "im:write"}
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
