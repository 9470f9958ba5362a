"""The batch card's Block Kit and its button value, without Slack: what is offered, what is
refused as malformed."""

from __future__ import annotations

from dataclasses import replace

import pytest

from contracts.batches import MAX_BATCH, Batch
from contracts.enums import SurfaceType
from contracts.errors import InvalidRequest
from contracts.ports import SlackRoute
from surfaces.slack.batch import batch_blocks, listed_value, parse_batch_action, parse_listed
from surfaces.slack.blocks import as_dicts
from tests.surfaces.slack.conftest import _card

DIGEST = "sha256:" + "ab" * 32
ROUTE = SlackRoute(
    surface=SurfaceType.SLACK,
    team_id="T1",
    enterprise_id=None,
    channel_id="C1",
    thread_ts=None,
    approvers=("U0ANN",),
    approver_teams=("T1",),
)


def cards(n: int, **params: object) -> Batch:
    made = tuple(
        replace(_card(), approval_id=f"apv_{i:020d}", digest=DIGEST, parameters={"n": i, **params})
        for i in range(n)
    )
    return Batch("k" * 64, "issue_refund", "C1", made)


def test_every_call_is_listed_whole_with_its_digest_within_slacks_limits() -> None:
    made = batch_blocks(cards(MAX_BATCH, note="y" * 2500), ROUTE)
    assert made is not None
    blocks, text = made
    dicts = as_dicts(blocks)  # slack_sdk validates the Block Kit limits on the way
    assert len(dicts) <= 50 and "20 requests" in text
    flat = str(dicts)
    assert flat.count("y" * 2500) == MAX_BATCH and flat.count(DIGEST) >= MAX_BATCH * 2
    value = next(e["value"] for b in dicts if b["type"] == "actions" for e in b["elements"])
    assert parse_listed(value) == cards(MAX_BATCH).listed


def test_what_cannot_be_listed_whole_is_not_offered() -> None:
    assert batch_blocks(cards(1), ROUTE) is None, "one request is answered on its own card"
    assert batch_blocks(cards(MAX_BATCH + 1), ROUTE) is None
    assert batch_blocks(cards(2, note="z" * 3100), ROUTE) is None, "a value would be cut"


def test_a_masked_value_is_said_to_be_masked() -> None:
    made = batch_blocks(cards(2, token="[hidden: JWT, 96 chars]"), ROUTE)
    assert made is not None and "partly hidden" in str(as_dicts(made[0]))


@pytest.mark.parametrize(
    "value",
    [
        "",
        f"apv_1|{DIGEST}",  # one request is no batch
        f"apv_1|{DIGEST},apv_1|{DIGEST}",  # the same twice
        f"apv_1|{DIGEST},apv_2|sha256:short",
        f"apv_1,apv_2|{DIGEST}",
        ",".join(f"apv_{i}|{DIGEST}" for i in range(MAX_BATCH + 1)),
        None,
    ],
)
def test_a_malformed_button_value_is_refused(value: str | None) -> None:
    with pytest.raises(InvalidRequest):
        parse_listed(value)


def test_a_press_off_a_posted_card_is_refused() -> None:
    value = listed_value(cards(2).listed)
    payload = {
        "type": "block_actions",
        "user": {"id": "U0ANN", "team_id": "T1"},
        "team": {"id": "T1"},
        "api_app_id": "A1",
        "container": {"type": "message", "channel_id": "C1", "message_ts": "1.2", "is_ephemeral": True},
        "actions": [{"action_id": "cosigner.batch_approve", "block_id": "cosigner:batch", "value": value}],
    }
    with pytest.raises(InvalidRequest):
        parse_batch_action(payload)
    payload["container"] = {"type": "message", "channel_id": "C1", "message_ts": "1.2"}
    assert parse_batch_action(payload).listed == cards(2).listed
