"""A handoff is never routed to Teams or WhatsApp, where only Approve / Deny can be shown:
the next approver kind that can host it is asked, or the run is refused before it starts
(`APPROVAL_MODE_UNSUPPORTED` naming the policy and the surface), never failed after."""

from __future__ import annotations

import pytest

from bot.policy import load_policy
from bot.policy.routing import SmsSender, route_for
from contracts.enums import SurfaceType
from contracts.errors import ApprovalModeUnsupported
from contracts.ports import DashboardRoute
from contracts.wire import TeamsSurface, WhatsAppSurface
from tests.databases import DESK, HANDOFFS, postgres_elsewhere
from tests.handoff_world import EXPECT_SECRET, SECRET_ENV, handoff_policy
from tests.surfaces.whatsapp.test_end_to_end import ALICE, whatsapp_app

# On PostgreSQL, this module's storage path runs in the tests these name.
pytestmark = postgres_elsewhere(DESK, HANDOFFS)

ALL = {SurfaceType.SLACK, SurfaceType.SMS, SurfaceType.WHATSAPP, SurfaceType.TEAMS, SurfaceType.DASHBOARD}
SENDER = SmsSender(whatsapp_from="+15550000001")
AAD = "72f988bf-86f1-41af-91ab-2d7cd011db47"
TEAMS = TeamsSurface(
    type="teams",
    tenantId=AAD,
    conversationId="19:ops@thread.tacv2",
    userId="00000000-0000-0000-0000-0000000000a1",
)
WHATSAPP = WhatsAppSurface(type="whatsapp", phone=ALICE)
URL = "https://app.example/cosigner/expect/publish"


@pytest.mark.parametrize("surface", [TEAMS, WHATSAPP], ids=["teams", "whatsapp"])
def test_a_handoff_asked_of_the_requester_there_is_refused_naming_why(surface: object) -> None:
    policy = load_policy(handoff_policy(URL, f'[tenants.acme]\nteams_tenant = "{AAD}"'))
    rule = policy.rule_for("acme", "publish_changes")
    with pytest.raises(ApprovalModeUnsupported) as info:
        route_for(policy, "acme", rule, surface, ALL, SENDER)
    assert "handoff's Done and Cancel cannot be pressed yet" in info.value.message
    assert info.value.details["policy"] == "tools.publish_changes"
    # An ordinary tool asked there still goes there.
    refund = policy.rule_for("acme", "issue_refund")
    assert route_for(policy, "acme", refund, surface, ALL, SENDER).surface == surface.type  # type: ignore[attr-defined]


def test_a_handoff_goes_to_the_next_approvers_who_can_press_done() -> None:
    tenant = '[tenants.acme]\nadmins = { dashboard = ["u_admin"] }'
    text = handoff_policy(URL, tenant).replace(
        "[tools.publish_changes.handoff]",
        'approvers = ["requester", "tenant_admins"]\n[tools.publish_changes.handoff]',
    )
    policy = load_policy(text)
    route = route_for(policy, "acme", policy.rule_for("acme", "publish_changes"), WHATSAPP, ALL, SENDER)
    assert isinstance(route, DashboardRoute) and route.approvers == ("u_admin",)


async def test_the_api_refuses_the_run_and_the_call_before_anything_is_sent(
    db_kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SECRET_ENV, EXPECT_SECRET)
    async with whatsapp_app(db_kind, handoff_policy(URL, "[tenants.acme]")) as (h, emu, _, key):
        surface = {"type": "whatsapp", "phone": ALICE}
        admit = await h.client.post(
            "/v1/runs/admit",
            headers=h.auth(key),
            json={"executionId": "run_1", "surface": surface, "tools": ["publish_changes"]},
        )
        assert admit.status_code == 422, admit.text
        error = admit.json()["error"]
        assert error["code"] == "APPROVAL_MODE_UNSUPPORTED" and error["tools"] == ["publish_changes"]
        created = await h.client.post(
            "/v1/approvals",
            headers=h.auth(key),
            json={
                "executionId": "run_1",
                "toolCallId": "c1",
                "toolName": "publish_changes",
                "parameters": {"changeId": "chg_1"},
                "surface": surface,
            },
        )
        assert created.status_code == 422, created.text
        error = created.json()["error"]
        assert error["code"] == "APPROVAL_MODE_UNSUPPORTED" and error["surface"] == "whatsapp"
        assert "Done and Cancel" in error["message"] and error["policy"] == "tools.publish_changes"
        assert emu.sent == []
