"""parse_block_action / parse_view_submission from JSON fixtures shaped like Slack's payloads."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from contracts.enums import Verdict
from contracts.errors import InvalidRequest
from surfaces.slack.parse import parse_block_action, parse_view_submission

FIXTURES = Path(__file__).parent / "fixtures"


def load(name: str) -> dict[str, Any]:
    payload: dict[str, Any] = json.loads((FIXTURES / name).read_text())
    return payload


def test_block_action_in_one_workspace() -> None:
    answer = parse_block_action(load("block_actions.json"))
    assert answer.approval_id == "apr_01"
    assert answer.verdict is Verdict.APPROVE
    assert answer.surface == "slack"
    assert (answer.actor, answer.org, answer.actor_org) == ("U1", "T1", "T1")
    assert (answer.conversation, answer.message_ref) == ("C1", "1700000000.000100")
    assert answer.app_id == "A1"
    assert answer.enterprise_id is None
    assert answer.comment is None


def test_org_wide_install_has_no_team_so_the_org_is_the_enterprise() -> None:
    answer = parse_block_action(load("block_actions_org_install.json"))
    assert answer.verdict is Verdict.APPROVE_FOR_RUN
    assert (answer.org, answer.enterprise_id, answer.actor_org) == ("E1", "E1", "T9")
    assert answer.actor == "W2"


def test_slack_connect_keeps_the_clickers_own_workspace() -> None:
    answer = parse_block_action(load("block_actions_slack_connect.json"))
    assert answer.verdict is Verdict.DENY
    assert answer.org == "T1"
    assert answer.actor_org == "T0OTHER"
    assert answer.enterprise_id == "E1"


def test_the_deprecated_token_field_is_ignored() -> None:
    payload = load("block_actions.json")
    payload["token"] = "anything"
    assert parse_block_action(payload) == parse_block_action(load("block_actions.json"))


def _break(path: str, value: Any) -> dict[str, Any]:
    payload = copy.deepcopy(load("block_actions.json"))
    *parents, last = path.split(".")
    node = payload
    for key in parents:
        node = node[int(key)] if isinstance(node, list) else node[key]
    if value is KeyError:
        del node[last]
    else:
        node[last] = value
    return payload


@pytest.mark.parametrize(
    ("path", "value", "field"),
    [
        ("type", "view_submission", "type"),
        ("actions", [], "actions"),
        ("actions", "nope", "actions"),
        ("actions.0.action_id", "other_app.approve", "actions.action_id"),
        ("actions.0.value", "", "actions.value"),
        ("actions.0.value", "apr 01; drop", "actions.value"),
        ("actions.0.value", {"id": 1}, "actions.value"),
        ("actions.0.block_id", "cosigner:apr_99", "actions.block_id"),
        ("container", KeyError, "container"),
        ("container.is_ephemeral", True, "container.type"),
        ("container.type", "view", "container.type"),
        ("container.channel_id", None, "container.channel_id"),
        ("container.message_ts", "yesterday", "container.message_ts"),
        ("user", KeyError, "user"),
        ("user.id", "", "user.id"),
        ("user.team_id", 7, "user.team_id"),
        ("team", None, "team"),
        ("team", "T1", "team"),
        ("api_app_id", "<A1>", "api_app_id"),
    ],
)
def test_malformed_block_actions_are_invalid_requests(path: str, value: Any, field: str) -> None:
    with pytest.raises(InvalidRequest) as caught:
        parse_block_action(_break(path, value))
    assert caught.value.details["field"] == field


def test_view_submission_is_a_deny_with_the_trimmed_comment() -> None:
    answer = parse_view_submission(load("view_submission.json"))
    assert answer.verdict is Verdict.DENY
    assert answer.approval_id == "apr_01"
    assert (answer.conversation, answer.message_ref) == ("C1", "1700000000.000100")
    assert (answer.actor, answer.org, answer.actor_org, answer.app_id) == ("U1", "T1", "T1", "A1")
    # Kept verbatim: escaping is the job of whoever shows it.
    assert answer.comment == "Refund is over the limit <!channel>"


def test_view_submission_without_a_comment() -> None:
    payload = load("view_submission.json")
    payload["view"]["state"]["values"]["comment"]["comment"]["value"] = None
    assert parse_view_submission(payload).comment is None


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"callback_id": "someone_else"}, "view.callback_id"),
        ({"private_metadata": "not json"}, "view.private_metadata"),
        ({"private_metadata": "[1]"}, "view.private_metadata"),
        ({"private_metadata": '{"a":"apr_01","c":"C1"}'}, "view.private_metadata.t"),
    ],
)
def test_malformed_view_submissions_are_invalid(change: dict[str, Any], field: str) -> None:
    payload = load("view_submission.json")
    payload["view"].update(change)
    with pytest.raises(InvalidRequest) as caught:
        parse_view_submission(payload)
    assert caught.value.details["field"] == field


def _full_call_press(**changes: Any) -> dict[str, Any]:
    payload = load("block_actions.json")
    payload["actions"][0].update({"action_id": "cosigner.full_call", **changes})
    return payload


def test_full_call_press_is_a_look_bound_to_the_card() -> None:
    from surfaces.slack.parse import parse_look

    look = parse_look(_full_call_press())
    assert (look.approval_id, look.actor, look.org, look.actor_org) == ("apr_01", "U1", "T1", "T1")
    assert (look.conversation, look.message_ref, look.app_id) == ("C1", "1700000000.000100", "A1")


@pytest.mark.parametrize(
    "changes",
    [{"action_id": "cosigner.approve"}, {"block_id": "cosigner:apr_02"}, {"value": "../x"}],
)
def test_a_malformed_full_call_press_is_refused(changes: dict[str, Any]) -> None:
    from surfaces.slack.parse import parse_look

    with pytest.raises(InvalidRequest):
        parse_look(_full_call_press(**changes))


def test_a_page_press_reads_the_modal_metadata_and_nothing_else() -> None:
    from surfaces.slack.parse import parse_page

    payload = _full_call_press(action_id="cosigner.full_call_next", value="2")
    payload["container"] = {"type": "view", "view_id": "V1"}
    payload["view"] = {
        "id": "V1",
        "callback_id": "cosigner.full_call",
        "private_metadata": json.dumps({"a": "apr_01", "c": "C1", "t": "1700000000.000100"}),
    }
    look, page, view_id = parse_page(payload)
    assert (look.approval_id, look.conversation, look.message_ref, page, view_id) == (
        "apr_01",
        "C1",
        "1700000000.000100",
        2,
        "V1",
    )
    for bad in ("-1", "x", "99999", "２"):
        broken = copy.deepcopy(payload)
        broken["actions"][0]["value"] = bad
        with pytest.raises(InvalidRequest):
            parse_page(broken)
    broken = copy.deepcopy(payload)
    broken["view"]["callback_id"] = "cosigner.deny_comment"
    with pytest.raises(InvalidRequest):
        parse_page(broken)
