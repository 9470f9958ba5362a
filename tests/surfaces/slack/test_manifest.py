"""manifest.yml asks for exactly the scopes the code calls for and points at the real routes."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import yaml

from surfaces.slack import SlackAdapter, SlackConfig
from surfaces.slack.web_client import SCOPES, bot_scopes

ROOT = Path(__file__).resolve().parents[3]
SOURCES = [p for p in (ROOT / "surfaces" / "slack").glob("*.py") if not p.name.startswith("emulat")]
CALL = re.compile(r"\bclient\.([a-z]+(?:_[a-zA-Z0-9]+)+)\(")


def manifest() -> dict[str, Any]:
    data = yaml.safe_load((ROOT / "manifest.yml").read_text())
    assert isinstance(data, dict)
    return data


def test_manifest_has_the_required_sections() -> None:
    m = manifest()
    assert m["_metadata"]["major_version"] == 1
    assert m["display_information"]["name"] == "Cosigner"
    assert m["features"]["bot_user"]["display_name"]
    settings = m["settings"]
    assert settings["interactivity"]["is_enabled"] is True
    assert settings["socket_mode_enabled"] is False
    assert settings["token_rotation_enabled"] is False
    assert isinstance(settings["org_deploy_enabled"], bool)
    # The one event handled: the Home tab's (surfaces/slack/home.py).
    assert settings["event_subscriptions"]["bot_events"] == ["app_home_opened"]


def test_every_web_api_call_in_the_code_has_its_scope_listed() -> None:
    called = set()
    for path in SOURCES:
        for name in CALL.findall(path.read_text()):
            called.add(name.replace("_", "."))
    assert called, "no Web API calls found; has the client variable been renamed?"
    assert called <= set(SCOPES), f"add these methods to SCOPES: {sorted(called - set(SCOPES))}"


def test_manifest_scopes_are_exactly_the_ones_the_code_needs() -> None:
    assert sorted(manifest()["oauth_config"]["scopes"]["bot"]) == list(bot_scopes())
    assert SlackConfig(signing_secret="s", bot_token="t").scopes == bot_scopes()


def test_manifest_urls_are_routes_the_adapter_serves(desk: Any) -> None:
    adapter = SlackAdapter(SlackConfig(signing_secret="s", bot_token="t"), desk)
    served = {(r.path, m) for r in adapter.routes() for m in r.methods}
    m = manifest()
    events = urlparse(m["settings"]["interactivity"]["request_url"])
    assert events.scheme == "https" and (events.path, "POST") in served
    for url in m["oauth_config"]["redirect_urls"]:
        assert (urlparse(url).path, "GET") in served
    assert ("/slack/install", "GET") in served
