"""Callbacks never reach into the operator's network: refused at the API, refused at delivery,
and the connection goes to the address that was checked (real sockets, no mocks)."""

from __future__ import annotations

import ssl
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import pytest
import sqlalchemy as sa
import trustme

from bot.egress.transport import Unreached, callback_client
from bot.egress.urls import EgressRefused, parse_allow_list
from storage import raw
from storage.tables import jobs
from tests.harness import CallbackReceiver, Harness, cosigner_app, until_async


class Resolver:
    """Answers from a script, one answer per call (the last one repeats), and counts calls."""

    def __init__(self, *answers: Sequence[str]) -> None:
        self.answers = list(answers)
        self.calls: list[str] = []

    async def __call__(self, host: str, port: int) -> list[str]:
        self.calls.append(host)
        return list(self.answers[min(len(self.calls), len(self.answers)) - 1])


def call(call_id: str = "c1", **extra: Any) -> dict[str, Any]:
    body = {
        "executionId": "run_1",
        "toolCallId": call_id,
        "toolName": "lookup_order",  # approved by policy at once, so the callback goes out at once
        "parameters": {"orderId": "o1"},
        "surface": {"type": "dashboard", "userId": "u_1"},
    }
    return body | extra


async def events(h: Harness, key: str, aid: str, wanted: str, count: int = 1) -> list[dict[str, Any]]:
    """The audit events named `wanted`, once there are `count` of them; the app's clock moves
    a second per poll so that retries come due."""

    async def found() -> list[dict[str, Any]]:
        r = await h.client.get(f"/v1/approvals/{aid}/audit", headers=h.auth(key))
        named = [e for e in r.json()["events"] if e["event"] == wanted]
        if len(named) >= count:
            return named
        h.advance(1.0)
        return []

    result: list[dict[str, Any]] = await until_async(found, seconds=30, interval=0.05)
    return result


async def finished_callback_job(h: Harness) -> Any:
    """The callback job's row, once the worker has finished it for good (within 30 s)."""

    async def finished() -> Any:
        async with raw.read(h.parts.db) as conn:
            job = (await conn.execute(sa.select(jobs).where(jobs.c.kind == "callback"))).one()
        return job if job.done_at is not None else None

    return await until_async(finished, seconds=30, interval=0.05)


@contextmanager
def tls_receiver(name: str, **kw: Any) -> Iterator[tuple[CallbackReceiver, ssl.SSLContext]]:
    """An HTTPS receiver on 127.0.0.1 whose certificate is for `name`, and a client context trusting it."""
    ca = trustme.CA()
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert(name).configure_cert(server)
    client = ssl.create_default_context()
    ca.configure_trust(client)
    with CallbackReceiver(tls=server, host="hooks.test", **kw) as receiver:
        yield receiver, client


# --- at the API --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "https://127.0.0.1/hook",
        "https://0x7f.1/hook",
        "https://2130706433/hook",
        "https://[::ffff:127.0.0.1]/hook",
        "https://[::1]/hook",
        "https://10.1.2.3/hook",
        "https://192.168.0.10/hook",
        "https://169.254.169.254/latest/meta-data/",
        "https://[fe80::1]/hook",
        "https://100.64.0.1/hook",
        "https://0.0.0.0/hook",
        "https://localhost:8080/hook",
        "http://agent.example/hook",
        "ftp://agent.example/hook",
    ],
)
async def test_a_refused_callback_url_is_400_naming_it_and_creates_nothing(url: str) -> None:
    async with cosigner_app() as h:
        key = await h.create_tenant("acme")
        r = await h.client.post("/v1/approvals", headers=h.auth(key), json=call(callbackUrl=url))
        assert r.status_code == 400, r.text
        error = r.json()["error"]
        assert error["code"] == "INVALID_REQUEST" and error["field"] == "callbackUrl", error
        async with raw.read(h.parts.db) as conn:
            assert (await conn.execute(sa.select(sa.func.count()).select_from(jobs))).scalar_one() == 0
        ok = await h.client.post(
            "/v1/approvals", headers=h.auth(key), json=call(callbackUrl="https://agent.example/hook")
        )
        assert ok.status_code == 200, "the same call with a public URL goes through: nothing was stored"


async def test_the_allow_list_opens_private_targets_and_http_to_them() -> None:
    async with cosigner_app(callback_allow="10.20.0.0/16,hooks.internal") as h:
        key = await h.create_tenant("acme")
        for i, url in enumerate(["http://10.20.1.1:8080/hook", "http://hooks.internal/hook"]):
            r = await h.client.post("/v1/approvals", headers=h.auth(key), json=call(f"a{i}", callbackUrl=url))
            assert r.status_code == 200, r.text
        r = await h.client.post(
            "/v1/approvals", headers=h.auth(key), json=call("a9", callbackUrl="https://10.21.0.1/hook")
        )
        assert r.status_code == 400 and r.json()["error"]["field"] == "callbackUrl"


# --- at delivery -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("answer", "cls"),
    [
        (["127.0.0.1"], "loopback"),
        (["10.1.2.3"], "private"),
        (["93.184.216.34", "10.0.0.1"], "private"),
        (["2606:2800:220:1::1", "::ffff:169.254.169.254"], "link-local"),
        (["fe80::1"], "link-local"),
    ],
)
async def test_a_name_resolving_to_a_refused_address_is_refused_once_and_audited(
    db_kind: str, answer: list[str], cls: str
) -> None:
    resolver = Resolver(answer)
    async with (
        callback_client(parse_allow_list(""), resolver) as http,
        cosigner_app(database_kind=db_kind, http=http) as h,
    ):
        key = await h.create_tenant("acme")
        r = await h.client.post(
            "/v1/approvals", headers=h.auth(key), json=call(callbackUrl="https://agent.example/hook")
        )
        assert r.status_code == 200 and r.json()["status"] == "approved"
        aid = r.json()["approvalId"]
        refused = await events(h, key, aid, "callback_refused")
        after = await h.client.get(f"/v1/approvals/{aid}", headers=h.auth(key))
        job = await finished_callback_job(h)
        trail = [
            e["event"]
            for e in (await h.client.get(f"/v1/approvals/{aid}/audit", headers=h.auth(key))).json()["events"]
        ]
    data = refused[0]["data"]
    assert data["reason"].startswith(f"agent.example resolves to a {cls} address; ")
    assert "COSIGNER_CALLBACK_ALLOW" in data["reason"], "the reason names the fix"
    assert data["attempt"] == 1 and data["delivery"].startswith("dlv_")
    assert not any(a in data["reason"] for a in answer), "the resolved addresses stay with the operator"
    assert after.json()["status"] == "approved" and after.json()["grant"], "the approval is unaffected"
    assert job.attempts == 1, "a refusal is final: no retry was scheduled"
    assert resolver.calls == ["agent.example"]
    assert "callback_attempt" not in trail and "callback_abandoned" not in trail


async def test_a_stored_private_url_is_refused_at_delivery_without_a_lookup() -> None:
    resolver = Resolver(["93.184.216.34"])
    async with callback_client(parse_allow_list(""), resolver) as http:
        for url in ("https://10.0.0.1/hook", "https://0x7f.1/hook", "http://agent.example/hook"):
            with pytest.raises(EgressRefused):
                await http.post(url, content=b"{}")
    assert resolver.calls == []


# --- the pinned connection ---------------------------------------------------------------


async def test_the_connection_goes_to_the_checked_address_with_tls_for_the_name() -> None:
    # hooks.test exists in no DNS: the request arrives only if the socket was opened to the
    # address the resolver gave. A second lookup would find nothing, or what a rebinding
    # server answers second (here a refused address), so exactly one is allowed.
    with tls_receiver("hooks.test") as (receiver, trust):
        resolver = Resolver(["127.0.0.1"], ["10.6.6.6"])
        async with callback_client(parse_allow_list("127.0.0.1"), resolver, verify=trust) as http:
            r = await http.post(receiver.url, content=b"{}")
        assert r.status_code == 200
        assert resolver.calls == ["hooks.test"]
        got = receiver.snapshot()
        assert [g["host"] for g in got] == [f"hooks.test:{receiver.port}"], (
            "Host names the host, not the address"
        )


async def test_a_certificate_for_another_name_is_refused() -> None:
    with tls_receiver("other.test") as (receiver, trust):
        async with callback_client(
            parse_allow_list("127.0.0.1"), Resolver(["127.0.0.1"]), verify=trust
        ) as http:
            with pytest.raises(Unreached, match="Certificate"):
                await http.post(receiver.url, content=b"{}")
        assert receiver.snapshot() == []


async def test_a_rebinding_answer_cannot_redirect_the_connection() -> None:
    with (
        CallbackReceiver(host="hooks.internal") as first,
        CallbackReceiver(bind=("127.0.0.2", first.port)) as victim,
    ):
        # The allow list names the host, so any answer passes the check: only pinning keeps
        # the request on the first answer's address, not on the victim's behind the second.
        resolver = Resolver(["127.0.0.1"], ["127.0.0.2"])
        async with callback_client(parse_allow_list("hooks.internal"), resolver) as http:
            r = await http.post(first.url, content=b"{}")
        assert r.status_code == 200 and len(first.snapshot()) == 1
        assert victim.snapshot() == []
        assert resolver.calls == ["hooks.internal"]


async def test_a_delivered_callback_is_pinned_end_to_end_and_redirects_are_not_followed(db_kind: str) -> None:
    with tls_receiver("hooks.test", answers=[(307, {"Location": "/elsewhere"})]) as (
        receiver,
        trust,
    ):
        resolver = Resolver(["127.0.0.1"])
        async with (
            callback_client(parse_allow_list("127.0.0.0/8"), resolver, verify=trust) as http,
            cosigner_app(database_kind=db_kind, http=http, callback_allow="127.0.0.0/8") as h,
        ):
            key = await h.create_tenant("acme")
            r = await h.client.post("/v1/approvals", headers=h.auth(key), json=call(callbackUrl=receiver.url))
            assert r.status_code == 200, r.text
            attempts = await events(h, key, r.json()["approvalId"], "callback_attempt", count=2)
    assert [a["data"]["status"] for a in attempts] == [307, 200]
    assert [g["path"] for g in receiver.snapshot()] == ["/cosigner", "/cosigner"], (
        "the Location was never asked"
    )
