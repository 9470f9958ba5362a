"""The Temporal recipe on the time-skipping test server: approve, deny with a comment, expiry."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bot.approvals.grants import callback_secret
from tests.adapters.conftest import run_script
from tests.harness import TEST_SECRET
from tests.sdk.conftest import Target

ORDER = {"order_id": "ord_1", "amount_cents": 12900}


@pytest.fixture(scope="module")
def recipe(inprocess: Target) -> dict[str, Any]:
    """Run the three workflows once, in their own process."""
    env = {
        "COSIGNER_URL": inprocess.url,
        "COSIGNER_API_KEY": inprocess.acme,
        "COSIGNER_APPROVER_KEY": inprocess.acme_approver,
        "CALLBACK_SECRET": callback_secret(TEST_SECRET, "acme"),
    }
    printed = run_script(Path(__file__).with_name("temporal_run.py"), env)
    # Temporal's native core logs to stdout too; the recipe's JSON is the last line.
    out: dict[str, Any] = json.loads(printed.strip().splitlines()[-1])
    return out


def test_an_approved_step_runs_once_with_the_arguments_shown(recipe: dict[str, Any]) -> None:
    approved = recipe["approve"]
    assert approved["result"] == "refunded 12900 on ord_1" and approved["ran"] == [ORDER]
    assert approved["shown"] == ORDER and approved["executionId"] == approved["workflowId"]
    assert approved["reported"] == [
        {"outcome": "succeeded", "result": "refunded 12900 on ord_1", "error": None}
    ]


def test_a_denied_step_never_runs_and_carries_the_comment(recipe: dict[str, Any]) -> None:
    denied = recipe["deny"]
    assert denied["ran"] == [] and "refund already issued" in denied["result"] and denied["reported"] == []


def test_a_step_nobody_answers_expires_at_the_workflow_deadline(recipe: dict[str, Any]) -> None:
    expired = recipe["expire"]
    assert expired["ran"] == [] and "expiry means deny" in expired["result"]
