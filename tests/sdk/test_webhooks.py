"""`cosigner.webhooks.verify` on real callbacks (Standard Webhooks): accepted once; forged,
stale, re-labelled and replayed refused; and the `standardwebhooks` library agrees."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from typing import Any, ClassVar

import pytest
import standardwebhooks

from bot.approvals.grants import callback_secret
from cosigner import ApprovalStatus, webhooks
from cosigner.errors import InvalidSignature, ReplayedDelivery
from tests.harness import TEST_SECRET
from tests.sdk.conftest import SURFACE, USER, Target


class _Receiver(http.server.BaseHTTPRequestHandler):
    got: ClassVar[list[tuple[bytes, dict[str, str]]]] = []
    arrived: ClassVar[threading.Event] = threading.Event()

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.got.append((body, dict(self.headers.items())))
        self.send_response(200)
        self.end_headers()
        self.arrived.set()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def callback(inprocess: Target) -> Iterator[tuple[bytes, dict[str, str]]]:
    """One real callback of an approved decision, as received: (raw body, headers)."""
    receiver = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    try:
        with inprocess.client() as client:
            handle = client.request_approval(
                execution_id="run_hook",
                tool_call_id="c1",
                tool_name="issue_refund",
                parameters={"orderId": "ord_1", "amountCents": 12900},
                surface=SURFACE,
                callback_url=f"http://127.0.0.1:{receiver.server_address[1]}/hook",
                wait=False,
            )
        with inprocess.approver() as dashboard:
            dashboard.decide(handle, decision="approve", user_id=USER, comment="ok")
        assert _Receiver.arrived.wait(30)
        yield _Receiver.got[0]
    finally:
        receiver.shutdown()


SECRET = callback_secret(TEST_SECRET, "acme")


def _without(headers: dict[str, str], name: str) -> dict[str, str]:
    return {k: v for k, v in headers.items() if k.lower() != name}


def _with(headers: dict[str, str], name: str, value: str) -> dict[str, str]:
    return {**_without(headers, name), name: value}


def test_a_real_callback_verifies_into_a_decision(callback: tuple[bytes, dict[str, str]]) -> None:
    body, headers = callback
    decision = webhooks.verify(body, headers, SECRET)
    assert decision.status is ApprovalStatus.APPROVED and decision.comment == "ok"
    lower = {k.lower(): v for k, v in headers.items()}
    assert lower["webhook-id"].startswith("dlv_") and lower["webhook-signature"].startswith("v1,")
    assert not any(k.startswith("cosigner-") for k in lower), "the old header scheme is gone"
    assert webhooks.verify(body.decode(), lower, SECRET).approval_id == decision.approval_id


def test_the_standardwebhooks_library_verifies_a_real_callback_with_the_printed_secret(
    callback: tuple[bytes, dict[str, str]],
) -> None:
    body, headers = callback
    # The secret exactly as `cosigner tenants create` prints it (whsec_...), no conversion.
    assert standardwebhooks.Webhook(SECRET).verify(body, headers)["status"] == "approved"
    with pytest.raises(standardwebhooks.WebhookVerificationError):
        standardwebhooks.Webhook(callback_secret(TEST_SECRET, "globex")).verify(body, headers)


def test_the_same_body_and_signature_under_another_id_fail(callback: tuple[bytes, dict[str, str]]) -> None:
    body, headers = callback
    relabelled = _with(headers, "webhook-id", "dlv_another")
    with pytest.raises(InvalidSignature, match="does not match"):
        webhooks.verify(body, relabelled, SECRET)
    with pytest.raises(standardwebhooks.WebhookVerificationError):
        standardwebhooks.Webhook(SECRET).verify(body, relabelled)


def test_a_tampered_timestamp_fails(callback: tuple[bytes, dict[str, str]]) -> None:
    body, headers = callback
    signed_at = int({k.lower(): v for k, v in headers.items()}["webhook-timestamp"])
    moved = _with(headers, "webhook-timestamp", str(signed_at + 1))
    with pytest.raises(InvalidSignature, match="does not match"):
        webhooks.verify(body, moved, SECRET)
    with pytest.raises(standardwebhooks.WebhookVerificationError):
        standardwebhooks.Webhook(SECRET).verify(body, moved)


def test_a_forged_callback_is_refused(callback: tuple[bytes, dict[str, str]]) -> None:
    body, headers = callback
    altered = body.replace(b'"approved"', b'"denied"')
    with pytest.raises(InvalidSignature, match="does not match"):
        webhooks.verify(altered, headers, SECRET)
    with pytest.raises(InvalidSignature, match="does not match"):
        webhooks.verify(body, headers, callback_secret(TEST_SECRET, "globex"))
    for name in ("webhook-id", "webhook-timestamp", "webhook-signature"):
        with pytest.raises(InvalidSignature, match=f"no {name} header"):
            webhooks.verify(body, _without(headers, name), SECRET)
    with pytest.raises(InvalidSignature, match="UNIX seconds"):
        webhooks.verify(body, _with(headers, "webhook-timestamp", "1e9"), SECRET)
    with pytest.raises(InvalidSignature, match="does not match"):
        webhooks.verify(body, _with(headers, "webhook-signature", "v1,\u00e9 v2,x garbage"), SECRET)


def test_a_stale_callback_is_refused(callback: tuple[bytes, dict[str, str]]) -> None:
    body, headers = callback
    signed_at = int({k.lower(): v for k, v in headers.items()}["webhook-timestamp"])
    assert webhooks.verify(body, headers, SECRET, now=signed_at + 299).approved
    assert webhooks.verify(body, headers, SECRET, now=signed_at - 299).approved, "a little skew is fine"
    with pytest.raises(InvalidSignature, match="stale"):
        webhooks.verify(body, headers, SECRET, now=signed_at + 301)
    with pytest.raises(InvalidSignature, match="stale"):
        webhooks.verify(body, headers, SECRET, now=signed_at - 301)


def test_a_replayed_delivery_is_refused(callback: tuple[bytes, dict[str, str]]) -> None:
    body, headers = callback
    seen = webhooks.DeliveryLog()
    first = webhooks.verify(body, headers, SECRET, seen=seen)
    with pytest.raises(ReplayedDelivery) as replayed:
        webhooks.verify(body, headers, SECRET, seen=seen)
    assert replayed.value.decision == first
    with pytest.raises(ReplayedDelivery):
        webhooks.verify_request(body, headers, SECRET, seen=seen)
