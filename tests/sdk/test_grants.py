"""Offline grant checks with keys cached from /v1/keys, across a rotated signing key."""

from __future__ import annotations

import pytest

from cosigner import Cosigner, Decision
from cosigner.errors import GrantRefused
from tests.harness import DEFAULT_POLICY
from tests.loopback import loopback_server
from tests.sdk.conftest import SURFACE

PARAMS = {"orderId": "ord_1"}


def lookup(client: Cosigner, call: str) -> Decision:
    """A read the policy allows: approved at once, with a grant."""
    return client.request_approval(
        execution_id="run_keys",
        tool_call_id=call,
        tool_name="lookup_order",
        parameters=PARAMS,
        surface=SURFACE,
    )


def test_grants_verify_across_a_rotated_key_and_old_ones_are_refused() -> None:
    with loopback_server(DEFAULT_POLICY, secret="first-secret-" + "a" * 32) as live:
        key = live.call(live.harness.create_tenant("acme"))
        with Cosigner(url=live.url, api_key=key) as client:
            old = lookup(client, "c1")
            first = client.verify_grant(old.grant, PARAMS, tool_name="lookup_order")
            live.restart(secret="second-secret-" + "b" * 32)  # the operator rotated the key
            new = lookup(client, "c2")
            second = client.verify_grant(new.grant, PARAMS, tool_name="lookup_order")
            with pytest.raises(GrantRefused, match="unknown key"):
                client.verify_grant(old.grant, PARAMS, tool_name="lookup_order")
    assert first.approval_id == old.approval_id and second.approval_id == new.approval_id
    assert old.grant != new.grant


def test_a_grant_is_refused_for_other_parameters_tool_call_or_tampering(inprocess_client: Cosigner) -> None:
    d = lookup(inprocess_client, "c_tamper")
    assert d.grant is not None
    inprocess_client.verify_grant(d.grant, PARAMS)
    with pytest.raises(GrantRefused, match="parameters differ"):
        inprocess_client.verify_grant(d.grant, {"orderId": "ord_2"})
    with pytest.raises(GrantRefused, match="tool"):
        inprocess_client.verify_grant(d.grant, PARAMS, tool_name="issue_refund")
    with pytest.raises(GrantRefused, match="another tool call"):
        inprocess_client.verify_grant(d.grant, PARAMS, tool_call_id="c_other")
    head, body, signature = d.grant.split(".")
    forged = f"{head}.{body}.{signature[:-4]}AAAA"
    with pytest.raises(GrantRefused):
        inprocess_client.verify_grant(forged, PARAMS)
    with pytest.raises(GrantRefused, match="no grant"):
        inprocess_client.verify_grant(None, PARAMS)
