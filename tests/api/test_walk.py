"""One request's walk through the code: the intake and the answer transactions each cross
into storage twice.

Create is load → decide → write: one storage call reads everything the call is decided on,
a pure function decides, one storage call writes. Measured with `sys.setprofile` inside the
intake transaction (it runs on the database thread): a crossing is a call from `bot` into a
`storage` function that takes the transaction.
"""

from __future__ import annotations

import sys
from types import FrameType
from typing import Any

import pytest

import bot.approvals.creating
import bot.approvals.engine
import bot.approvals.intake
import bot.approvals.lifecycle
from storage.work import Work
from tests.api.test_approvals import call
from tests.harness import cosigner_app


def crossings_of(fn: Any, found: list[str]) -> Any:
    """`fn` with every bot → storage call that takes the transaction recorded in `found`."""

    def profile(frame: FrameType, event: str, arg: object) -> None:
        if event != "call" or frame.f_back is None:
            return
        callee = str(frame.f_globals.get("__name__", ""))
        caller = str(frame.f_back.f_globals.get("__name__", ""))
        code = frame.f_code
        if (
            caller.startswith("bot.")
            and callee.startswith("storage.")
            and "tx" in code.co_varnames[: code.co_argcount]
        ):
            found.append(f"{callee}.{code.co_name}")

    def measured(tx: Work, *args: Any, **kwargs: Any) -> Any:
        sys.setprofile(profile)
        try:
            return fn(tx, *args, **kwargs)
        finally:
            sys.setprofile(None)

    return measured


@pytest.mark.parametrize(
    ("body", "status"),
    [
        (call(), 201),  # routed to a person
        (call("lookup_order", params={"orderId": "o1"}), 200),  # approved by policy
        (call("delete_account", params={"accountId": "a1"}), 403),  # denied by policy
    ],
)
async def test_create_crosses_into_storage_twice_load_then_write(
    monkeypatch: pytest.MonkeyPatch, body: dict[str, Any], status: int
) -> None:
    async with cosigner_app() as h:
        key = await h.create_tenant("acme")
        found: list[str] = []
        monkeypatch.setattr(
            bot.approvals.creating, "create_tx", crossings_of(bot.approvals.intake.create_tx, found)
        )
        r = await h.client.post("/v1/approvals", json=body, headers=h.auth(key))
        assert r.status_code == status, r.text
        assert found == ["storage.intake.load", "storage.intake.write"]
        # The same call again is replayed from the one load: nothing is written.
        found.clear()
        again = await h.client.post("/v1/approvals", json=body, headers=h.auth(key))
        assert again.status_code == status and found == ["storage.intake.load"]


async def test_an_answer_crosses_into_storage_twice_load_then_write(monkeypatch: pytest.MonkeyPatch) -> None:
    async with cosigner_app() as h:
        key = await h.create_tenant("acme")
        r = await h.client.post("/v1/approvals", json=call(), headers=h.auth(key))
        assert r.status_code == 201, r.text
        found: list[str] = []
        monkeypatch.setattr(
            bot.approvals.lifecycle, "close", crossings_of(bot.approvals.lifecycle.close, found)
        )
        decided = await h.client.post(
            f"/v1/approvals/{r.json()['approvalId']}/decision",
            json={"decision": "approve", "userId": "u_1"},
            headers=h.auth(h.approver_key("acme")),
        )
        assert decided.status_code == 200, decided.text
        assert found == ["storage.answers.load", "storage.answers.write"]
