"""`cosigner.webhooks.verify` on real callbacks: accepted once; forged, stale and replayed refused."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from typing import Any, ClassVar

import pytest

from bot.grants import callback_secret
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


def test_a_real_callback_verifies_into_a_decision(callback: tuple[bytes, dict[str, str]]) -> None:
    body, headers = callback
    decision = webhooks.verify(body, headers, SECRET)
    assert decision.status is ApprovalStatus.APPROVED and decision.comment == "ok"
    lower = {k.lower(): v for k, v in headers.items()}
    assert webhooks.verify(body.decode(), lower, SECRET).approval_id == decision.approval_id


def test_a_forged_callback_is_refused(callback: tuple[bytes, dict[str, str]]) -> None:
    body, headers = callback
    altered = body.replace(b'"approved"', b'"denied"')
    with pytest.raises(InvalidSignature, match="does not match"):
        webhooks.verify(altered, headers, SECRET)
    with pytest.raises(InvalidSignature, match="does not match"):
        webhooks.verify(body, headers, callback_secret(TEST_SECRET, "globex"))
    without = {k: v for k, v in headers.items() if k.lower() != "cosigner-signature"}
    with pytest.raises(InvalidSignature, match="no Cosigner-Signature"):
        webhooks.verify(body, without, SECRET)
    with pytest.raises(InvalidSignature, match="t=<unix seconds>"):
        webhooks.verify(body, {**without, "Cosigner-Signature": "v1=00"}, SECRET)


def test_a_stale_callback_is_refused(callback: tuple[bytes, dict[str, str]]) -> None:
    body, headers = callback
    signed_at = int(headers["Cosigner-Signature"].split(",")[0].removeprefix("t="))
    assert webhooks.verify(body, headers, SECRET, now=signed_at + 299).approved
    with pytest.raises(InvalidSignature, match="stale"):
        webhooks.verify(body, headers, SECRET, now=signed_at + 301)


def test_a_replayed_delivery_is_refused(callback: tuple[bytes, dict[str, str]]) -> None:
    body, headers = callback
    seen = webhooks.DeliveryLog()
    first = webhooks.verify(body, headers, SECRET, seen=seen)
    with pytest.raises(ReplayedDelivery) as replayed:
        webhooks.verify(body, headers, SECRET, seen=seen)
    assert replayed.value.decision == first
