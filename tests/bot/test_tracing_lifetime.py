"""Traces across an approval's whole life: a Slack card and its really signed clicks, and an
approval closed by another process than the one that took its request."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from bot.observability.telemetry import tracer_provider
from storage.database import Database
from tests.bot.test_tracing import AGENT_SPAN, AGENT_TRACE, CLIENT, TRACEPARENT, USER, request
from tests.databases import DESK, NOT_STORED, postgres_elsewhere
from tests.harness import DEFAULT_POLICY, cosigner_app, database, slack_app, until
from tests.otlp import OtlpReceiver

# On PostgreSQL, this module's storage path runs in the tests these name.
pytestmark = postgres_elsewhere(DESK, NOT_STORED)

SECRET = "tracing-signing-secret"
APP_ID = "A0COSIGNER"


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    with OtlpReceiver() as rx:
        yield rx


def provider_for(receiver: OtlpReceiver) -> TracerProvider:
    return tracer_provider(BatchSpanProcessor(OTLPSpanExporter(endpoint=receiver.traces_url)))


def flushed(provider: TracerProvider, receiver: OtlpReceiver, name: str, count: int = 1) -> Any:
    """Wait (flushing) until `count` spans named `name` arrived; return them."""

    def arrived() -> Any:
        provider.force_flush()
        found = receiver.named(name)
        return len(found) >= count and found

    return until(arrived)


# Long enough that no random id or span id exported beside them can hold them by chance
# ("U1" once turned up inside an approval id).
REQUESTER = "U0REQUESTER1"
STRANGER = "U0STRANGER9"


async def test_a_slack_card_a_refused_click_and_the_approving_click(
    db_kind: str, receiver: OtlpReceiver
) -> None:
    provider = provider_for(receiver)
    async with slack_app(
        DEFAULT_POLICY, secret=SECRET, app_id=APP_ID, database_kind=db_kind, tracer_provider=provider
    ) as (h, emu):
        key = await h.create_tenant("acme")
        slack = {"type": "slack", "teamId": "T0ACME", "channelId": "C1", "userId": REQUESTER}
        r = await h.client.post(
            "/v1/approvals", json=request(surface=slack), headers={**h.auth(key), "traceparent": TRACEPARENT}
        )
        assert r.status_code == 201, r.text
        approval_id = r.json()["approvalId"]
        posted = (await until(lambda: emu.messages))[0]
        (deliver,) = await flushed(provider, receiver, "cosigner.deliver")
        assert receiver.named("cosigner.approval") == [], "the approval span waits for the close"

        for user in (STRANGER, REQUESTER):  # a stranger first: refused, then the requester
            response = await emu.click(
                h.client,
                channel=posted.channel,
                ts=posted.ts,
                action_id="cosigner.approve",
                secret=SECRET,
                user=user,
            )
            assert response.status_code == 200
        refused, accepted = await flushed(provider, receiver, "cosigner.answer", 2)
        (approval,) = await flushed(provider, receiver, "cosigner.approval")
        (show,) = await flushed(provider, receiver, "cosigner.show")
    provider.shutdown()

    assert (approval.trace_id, approval.parent_span_id) == (AGENT_TRACE, AGENT_SPAN)
    assert approval.attributes["cosigner.approval.id"] == approval_id
    assert approval.attributes["cosigner.route.surface"] == "slack"
    assert approval.attributes["cosigner.status"] == "approved"
    for child in (deliver, refused, accepted, show):
        assert (child.trace_id, child.parent_span_id) == (AGENT_TRACE, approval.span_id), child.name
    assert deliver.kind == CLIENT and deliver.attributes["cosigner.surface"] == "slack"
    assert deliver.attributes["cosigner.delivery.messages"] == 1
    assert refused.attributes["cosigner.answer.accepted"] is False
    assert refused.attributes["error.type"] == "NOT_AN_APPROVER"
    assert refused.attributes["cosigner.surface"] == "slack"
    assert accepted.attributes["cosigner.answer.accepted"] is True and "error.type" not in accepted.attributes
    exported = receiver.everything()
    assert STRANGER.encode() not in exported and REQUESTER.encode() not in exported, "no user ids"


async def test_the_approval_span_is_exported_by_whichever_process_closes_it(
    db_kind: str, receiver: OtlpReceiver
) -> None:
    async with database(db_kind) as db:
        first, second = provider_for(receiver), provider_for(receiver)
        async with cosigner_app(db=Database(db.url, schema=db.schema), tracer_provider=first) as h:
            key = await h.create_tenant("acme")
            r = await h.client.post(
                "/v1/approvals", json=request(), headers={**h.auth(key), "traceparent": TRACEPARENT}
            )
            approval_id = r.json()["approvalId"]
        first.shutdown()  # a restart: what the first process held in memory is gone
        assert receiver.named("cosigner.approval") == []
        async with cosigner_app(db=Database(db.url, schema=db.schema), tracer_provider=second) as h:
            decided = await h.client.post(
                f"/v1/approvals/{approval_id}/decision",
                json={"decision": "approve", "userId": USER},
                headers=h.auth(h.approver_of(key)),
            )
            assert decided.json()["traceId"] == AGENT_TRACE
        second.shutdown()
    approval = receiver.one("cosigner.approval")
    answer = receiver.one("cosigner.answer")
    assert (approval.trace_id, approval.parent_span_id) == (AGENT_TRACE, AGENT_SPAN)
    assert answer.parent_span_id == approval.span_id, "the id chosen at the request, kept across the restart"


async def test_an_sms_approval_carries_no_phone_number(db_kind: str, receiver: OtlpReceiver) -> None:
    from surfaces.sms import SmsAdapter, SmsConfig
    from surfaces.sms.caller import TwilioCaller
    from surfaces.sms.emulator import TwilioEmulator
    from tests.surfaces.sms.test_end_to_end import ACCOUNT, ALICE, BOT, POLICY, PUBLIC, TOKEN

    provider = provider_for(receiver)
    async with TwilioEmulator.running(ACCOUNT, TOKEN) as emu:
        config = SmsConfig(ACCOUNT, TOKEN, None, None, emu.api_url, PUBLIC)
        surfaces = [lambda desk: SmsAdapter(config, desk, desk.sms_store)]
        async with cosigner_app(
            POLICY, surfaces=surfaces, database_kind=db_kind, tracer_provider=provider
        ) as h:
            key = await h.create_tenant("acme")
            sms = {"type": "sms", "phone": ALICE}
            r = await h.client.post(
                "/v1/approvals",
                json=request(surface=sms),
                headers={**h.auth(key), "traceparent": TRACEPARENT},
            )
            approval_id = r.json()["approvalId"]
            await h.delivered(approval_id, every_message=True)
            phone = TwilioCaller(h.client, public_url=PUBLIC, account_sid=ACCOUNT, auth_token=TOKEN)
            assert (await phone.text(ALICE, BOT, "YES")).status_code == 200
            (approval,) = await flushed(provider, receiver, "cosigner.approval")
            (deliver,) = await flushed(provider, receiver, "cosigner.deliver")
            (answer,) = await flushed(provider, receiver, "cosigner.answer")
    provider.shutdown()
    assert approval.attributes["cosigner.status"] == "approved"
    assert approval.attributes["cosigner.route.surface"] == "sms"
    assert deliver.attributes["cosigner.surface"] == "sms" and deliver.parent_span_id == approval.span_id
    assert answer.attributes["cosigner.surface"] == "sms" and answer.attributes["cosigner.answer.accepted"]
    sent = receiver.everything()
    for number in (ALICE, BOT, ALICE.lstrip("+"), BOT.lstrip("+")):
        assert number.encode() not in sent, number
