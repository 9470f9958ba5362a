"""Slack Connect on Enterprise Grid: the clicker's own organization decides, not the install's.

Slack sends the installation's org (`team.enterprise_id`, `enterprise.id`) with every click
on that org's cards, so a person of another organization in a shared channel carries it
too. These clicks are really signed and go through the real app and engine.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest

from surfaces.slack.emulated_methods import Recorded
from surfaces.slack.emulator import SlackEmulator
from tests import harness
from tests.databases import DESK, SLACK_STATE, postgres_elsewhere, sqlite_all_postgres_some
from tests.harness import Harness, slack_app, until
from tests.surfaces.slack.test_scenarios import ask, card_of, refusal_codes, status

# On PostgreSQL, this module's storage path runs in the tests these name.
pytestmark = postgres_elsewhere(DESK, SLACK_STATE)

SECRET = "grid-signing-secret"
APP_ID = "A0COSIGNER"
POLICY = """
[tools.issue_refund]
kind = "danger"

[tenants.acme]
slack_team = "T0ACME"
slack_enterprise = "E0ACME"

[tenants.initech]
slack_team = "T0INITECH"
"""
# How Slack shapes a click on an Enterprise Grid org's card, by kind of installation.
WORKSPACE_INSTALL = {"team": "T0ACME", "enterprise": "E0ACME"}  # team.enterprise_id set
ORG_WIDE_INSTALL = {"team": None, "enterprise": "E0ACME"}  # "team": null, is_enterprise_install
GRID_SURFACE = {"enterpriseId": "E0ACME"}
COMMENT = {"comment": {"comment": {"type": "plain_text_input", "value": "not this one"}}}


@pytest.fixture
async def world(db_kind: str) -> AsyncIterator[tuple[Harness, SlackEmulator, dict[str, str]]]:
    async with slack_app(POLICY, secret=SECRET, app_id=APP_ID, database_kind=db_kind) as (h, emu):
        keys = {name: await h.create_tenant(name) for name in ("acme", "initech")}
        yield h, emu, keys


async def press(h: Harness, card: Recorded, action: str, **who: Any) -> None:
    """Press `action` on `card` as `who` (user, user_team, team, enterprise), signed."""
    r = await harness.press(h.client, card, action, secret=SECRET, app_id=APP_ID, **who)
    assert r.status_code == 200, "every signed click is acked"


async def answer(h: Harness, emu: SlackEmulator, card: Recorded, kind: str, **who: Any) -> str | None:
    """Approve with a click, or deny through the comment modal; the modal's error, if any."""
    if kind == "block_actions":
        await press(h, card, "cosigner.approve", **who)
        return None
    opened = len(emu.views)
    await press(h, card, "cosigner.deny", **who)
    await until(lambda: len(emu.views) > opened)
    r = await emu.submit_view(h.client, secret=SECRET, values=COMMENT, app_id=APP_ID, **who)
    assert r.status_code == 200, r.text
    return str(r.json()["errors"]["comment"]) if r.content else None


async def posted(h: Harness, emu: SlackEmulator, key: str, surface: dict[str, str]) -> tuple[str, Recorded]:
    approval_id = await ask(h, key, surface=surface)
    card = await card_of(emu)
    await h.delivered(approval_id)
    return approval_id, card


OUTSIDERS = [
    (install, outsider_team, kind)
    for install, outsider_team in [
        (WORKSPACE_INSTALL, "T0OUTSIDER"),  # a plain workspace on the other side
        (WORKSPACE_INSTALL, "E0OUTSIDER"),  # another Grid org on the other side
        (ORG_WIDE_INSTALL, "E0OUTSIDER"),
    ]
    for kind in ["block_actions", "view_submission"]
]


# Which install and which outsider change what the click says, not what storage does (one
# refusal, whoever it is): PostgreSQL runs each kind of answer once (tests/databases.py).
@sqlite_all_postgres_some("install, outsider_team, kind", OUTSIDERS, postgres=OUTSIDERS[:2])
async def test_an_outsider_who_started_the_run_in_a_shared_channel_cannot_approve_it(
    world: Any, kind: str, install: dict[str, Any], outsider_team: str
) -> None:
    """W0OUT, of another organization, triggered the run from acme's shared channel, so
    the requester rule names them; Slack sends acme's org with their click all the same."""
    h, emu, keys = world
    approval_id, card = await posted(h, emu, keys["acme"], {**GRID_SURFACE, "userId": "W0OUT"})
    error = await answer(h, emu, card, kind, user="W0OUT", user_team=outsider_team, **install)
    assert await status(h, keys["acme"], approval_id) == "pending"
    assert await refusal_codes(h, keys["acme"], approval_id) == ["NOT_AN_APPROVER"]
    if kind == "view_submission":
        assert error is not None and "NOT_AN_APPROVER" in error
    else:
        (note,) = await until(lambda: emu.ephemerals)
        assert note.user == "W0OUT" and note.text is not None and "NOT_AN_APPROVER" in note.text


GRID_MEMBERS = [
    (install, surface, kind)
    for install, surface in [
        (WORKSPACE_INSTALL, GRID_SURFACE),
        (WORKSPACE_INSTALL, {}),  # the agent named only the workspace; the tenant's org still counts
        (ORG_WIDE_INSTALL, GRID_SURFACE),
    ]
    for kind in ["block_actions", "view_submission"]
]


# The install and the surface change how the clicker is matched, not what storage does: an
# approval (block_actions) or a denial (view_submission), each run once on PostgreSQL.
@sqlite_all_postgres_some("install, surface, kind", GRID_MEMBERS, postgres=GRID_MEMBERS[:2])
async def test_a_grid_member_whose_team_id_is_the_org_decides(
    world: Any, kind: str, install: dict[str, Any], surface: dict[str, str]
) -> None:
    """On Grid, Slack may send the org id (E…) as `user.team_id`; acme sets slack_enterprise."""
    h, emu, keys = world
    approval_id, card = await posted(h, emu, keys["acme"], {**surface, "userId": "W0ALICE"})
    error = await answer(h, emu, card, kind, user="W0ALICE", user_team="E0ACME", **install)
    assert error is None
    wanted = "approved" if kind == "block_actions" else "denied"
    assert await status(h, keys["acme"], approval_id) == wanted  # committed before the ack


@pytest.mark.parametrize("kind", ["block_actions", "view_submission"])
async def test_a_grid_member_of_a_tenant_without_slack_enterprise_is_refused_and_the_operator_warned(
    world: Any, kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    """initech's workspace is part of Grid org E0INITECH, but its policy names only the
    workspace: its member's click (user.team_id = E0INITECH) cannot be told from an outsider's."""
    h, emu, keys = world
    caplog.set_level(logging.WARNING, logger="cosigner.slack")
    surface = {"teamId": "T0INITECH", "userId": "W0BOB"}
    approval_id, card = await posted(h, emu, keys["initech"], surface)
    who = {"user": "W0BOB", "user_team": "E0INITECH", "team": "T0INITECH", "enterprise": "E0INITECH"}
    for _ in range(2):
        error = await answer(h, emu, card, kind, **who)
        if kind == "view_submission":
            assert error is not None and "NOT_AN_APPROVER" in error and "slack_enterprise" in error
    assert await status(h, keys["initech"], approval_id) == "pending"
    assert await refusal_codes(h, keys["initech"], approval_id) == ["NOT_AN_APPROVER"] * 2
    warnings = [r for r in caplog.records if "E0INITECH" in r.getMessage()]
    assert len(warnings) == 1, "warned once, not per click"
    assert warnings[0].levelno == logging.WARNING
    assert 'slack_enterprise = "E0INITECH"' in warnings[0].getMessage()
    assert "[tenants.initech]" in warnings[0].getMessage()


async def test_a_click_that_does_not_say_whose_workspace_the_clicker_is_from_is_refused(world: Any) -> None:
    """Without `user.team_id` the clicker's organization is unknown: fail closed."""
    h, emu, keys = world
    approval_id, card = await posted(h, emu, keys["acme"], {**GRID_SURFACE, "userId": "W0OUT"})

    def without_team(payload: dict[str, Any]) -> None:
        del payload["user"]["team_id"]

    r = await harness.press(
        h.client, card, secret=SECRET, app_id=APP_ID, edit=without_team, user="W0OUT", **WORKSPACE_INSTALL
    )
    assert r.status_code == 200
    assert await status(h, keys["acme"], approval_id) == "pending"
    assert await refusal_codes(h, keys["acme"], approval_id) == ["NOT_AN_APPROVER"]
