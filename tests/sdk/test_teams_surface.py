"""The SDK's `TeamsSurface`: the wire shape, and a malformed id refused where it is written."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from cosigner import SurfaceType, TeamsSurface

AAD = "72f988bf-86f1-41af-91ab-2d7cd011db47"
USER = "aaaaaaaa-0000-4000-8000-000000000001"


def test_a_teams_surface_is_sent_in_the_wire_shape() -> None:
    surface = TeamsSurface(tenant_id=AAD, conversation_id="19:c@thread.tacv2", user_id=USER)
    assert surface.to_json() == {
        "type": SurfaceType.TEAMS.value,
        "tenantId": AAD,
        "conversationId": "19:c@thread.tacv2",
        "userId": USER,
    }


@pytest.mark.parametrize("field", ["tenant_id", "user_id"])
def test_an_id_that_is_not_a_guid_is_refused(field: str) -> None:
    values = {"tenant_id": AAD, "conversation_id": "19:c", "user_id": USER, field: "29:1abc"}
    with pytest.raises(ValidationError):
        TeamsSurface(**values)
