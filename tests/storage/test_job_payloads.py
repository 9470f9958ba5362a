"""A job's payload is a typed record by kind; the table keeps the JSON object it always held."""

from __future__ import annotations

import json

import pytest

from contracts.enums import ApproverKind, SurfaceType
from contracts.ports import SlackRoute
from storage.jobs import Delivery, EscalationStep, Payload, payload_from_json, payload_json

ROUTE = SlackRoute(SurfaceType.SLACK, "T1", None, "C_ADMINS", None, ("U1", "U2"), ("T1",), "U9")
# As releases before the typed payloads wrote them: json.dumps of the payload's dict.
STEP = json.dumps(
    {
        "step": 2,
        "to": "tenant_admins",
        "route": {
            "surface": "slack",
            "team_id": "T1",
            "enterprise_id": None,
            "channel_id": "C_ADMINS",
            "thread_ts": None,
            "approvers": ["U1", "U2"],
            "approver_teams": ["T1"],
            "requester": "U9",
        },
    }
)


@pytest.mark.parametrize(
    ("payload", "text"),
    [
        (Delivery("dlv_1"), '{"delivery": "dlv_1"}'),
        (EscalationStep(2, ApproverKind.TENANT_ADMINS, ROUTE), STEP),
        (None, "{}"),
    ],
)
def test_each_payload_reads_back_from_the_text_stored_before(payload: Payload, text: str) -> None:
    assert payload_from_json(text) == payload
    assert payload_json(payload) == text
