"""The Teams settings: all three turn the surface on through the app factory; a partial set warns."""

from __future__ import annotations

import pytest

from bot.http.app import ConfigurationError, build_app, partial_configuration, parts_of
from bot.policy.rules import load_policy
from bot.settings import Settings
from tests.harness import TEST_SECRET
from tests.surfaces.teams.world import APP_ID, HOME, POLICY

TEAMS = {
    "MICROSOFT_APP_ID": APP_ID,
    "MICROSOFT_APP_PASSWORD": "s3cret-app-password",
    "MICROSOFT_APP_TENANT_ID": HOME,
}


def settings(**env: str) -> Settings:
    return Settings(**{"COSIGNER_SECRET": TEST_SECRET, **env})  # type: ignore[arg-type]


def test_the_three_variables_turn_teams_on() -> None:
    app = build_app(settings(**TEAMS), policy=load_policy(POLICY), run_workers=False)
    assert set(parts_of(app).surfaces) == {"teams"}
    assert "/teams/messages" in [getattr(r, "path", "") for r in app.routes]


def test_a_partial_set_leaves_teams_off_and_says_what_is_missing() -> None:
    partial = settings(MICROSOFT_APP_ID=APP_ID)
    assert not partial.teams_enabled
    assert partial_configuration(partial) == [
        "Teams is off: MICROSOFT_APP_PASSWORD or MICROSOFT_APP_CERTIFICATE and MICROSOFT_APP_TENANT_ID "
        "is not set"
    ]


def test_a_malformed_app_id_is_refused_naming_the_variable() -> None:
    with pytest.raises(ConfigurationError, match="MICROSOFT_APP_ID must be"):
        build_app(settings(**{**TEAMS, "MICROSOFT_APP_ID": "cosigner-bot"}), policy=load_policy(POLICY))


def test_the_password_is_never_shown_in_a_settings_error() -> None:
    with pytest.raises(ValueError) as caught:
        settings(**TEAMS, TEAMS_API_URL="not a url")
    assert "TEAMS_API_URL" in str(caught.value) or "teams_api_url" in str(caught.value)
    assert "s3cret-app-password" not in str(caught.value)
