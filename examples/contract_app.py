"""An application that owns an operation: Cosigner asks it to prepare, execute and report.

One operation, `order.refund_missing_discount`: the agent proposes a refund for an order
whose discount was not applied; this application looks the order up and freezes the
amount itself (the agent never names it), shows a preview, and after approval refunds,
but only if the order still needs it (revalidation). Every call must carry a valid
Standard Webhooks signature (`webhook-id`, `webhook-timestamp`, `webhook-signature`) made
with the shared secret; anything else is refused with 401. An `execute` runs only if its
grant (checked offline against Cosigner's `GET /v1/keys`) binds exactly the arguments and
preview it carries (`cosigner.grants.verify_execute`); anything else is refused with 403.

    export ORDERS_CONTRACT_SECRET=…           # the same value Cosigner's policy names
    python examples/contract_app.py           # listens on 127.0.0.1:8100 (CONTRACT_APP_PORT)

and in the policy:

    [operations."order.refund_missing_discount"]
    url = "http://127.0.0.1:8100/cosigner"
    secret_env = "ORDERS_CONTRACT_SECRET"

The knobs on `Orders` (`lose_next_execute`, `hold_execute`, `reconcile`) let tests make
the failures the protocol is built for happen on purpose.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx
from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from cosigner.errors import InvalidSignature
from cosigner.grants import GrantRefused, verify_execute
from cosigner.operations import ExecuteCall
from cosigner.webhooks import verify_request

OPERATION = "order.refund_missing_discount"


@dataclass
class Order:
    """One order of the shop: what was charged and the discount that should have been applied."""

    customer: str
    charged_cents: int
    discount_cents: int
    refunded_cents: int = 0


@dataclass
class Orders:
    """The shop's state, the executions it carried out, and the test knobs."""

    orders: dict[str, Order] = field(
        default_factory=lambda: {
            "ord_4421": Order("Dana Reyes", 64500, 12900),
            "ord_5150": Order("Sam Okafor", 9900, 0),
        }
    )
    done: dict[str, dict[str, Any]] = field(default_factory=dict)  # idempotencyKey → outcome
    running: set[str] = field(default_factory=set)
    calls: dict[str, int] = field(default_factory=lambda: {"prepare": 0, "execute": 0, "status": 0})
    refunds: int = 0
    forged: int = 0
    refused_grants: int = 0  # execute calls whose grant did not bind their arguments
    last_execute: dict[str, Any] | None = None  # the last execute call whose grant checked out
    lose_next_execute: bool = False  # answer 503 without doing anything (never started)
    hold_execute: threading.Event | None = None  # refund, then hold the answer until set
    reconcile: int = 0  # answer needs_reconciliation; status says in_progress this many times
    lock: threading.Lock = field(default_factory=threading.Lock)

    def count(self, kind: str) -> None:
        """Count one call of `kind`."""
        with self.lock:
            self.calls[kind] = self.calls.get(kind, 0) + 1


def dollars(cents: int) -> str:
    """$129.00."""
    return f"${cents // 100:,}.{cents % 100:02d}"


def prepare(shop: Orders, call: dict[str, Any]) -> Response:
    """Resolve the request into arguments and a preview, or refuse it with a safe message."""
    order_id = str(call["request"].get("orderId", ""))
    order = shop.orders.get(order_id)
    if order is None:
        return _refuse(
            f"there is no order {order_id or '(none given)'}; send the orderId of an existing order"
        )
    owed = order.discount_cents - order.refunded_cents
    if owed <= 0:
        return _refuse(f"order {order_id} has no missing discount to refund")
    arguments = {"orderId": order_id, "amountCents": owed, "currency": "usd"}
    preview = {
        "title": f"Refund the missing discount on {order_id}",
        "fields": [
            {"label": "Customer", "value": order.customer},
            {"label": "Amount", "value": dollars(owed)},
            {"label": "Charged", "value": dollars(order.charged_cents)},
        ],
        "effects": [f"Refunds {dollars(owed)} to the card {order.customer} paid with"],
    }
    return JSONResponse({"arguments": arguments, "preview": preview, "expiresInSeconds": 3600})


async def execute(shop: Orders, call: dict[str, Any]) -> Response:
    """Revalidate against the current order, refund once per idempotency key, answer the outcome."""
    key = call["idempotencyKey"]
    with shop.lock:
        if key in shop.done:
            return JSONResponse(shop.done[key])
        if shop.lose_next_execute:
            shop.lose_next_execute = False
            return JSONResponse({"error": "temporarily unavailable"}, status_code=503)
        args = call["arguments"]
        order = shop.orders.get(args["orderId"])
        if order is None or order.discount_cents - order.refunded_cents != args["amountCents"]:
            outcome: dict[str, Any] = {
                "outcome": "revision_required",
                "reason": f"order {args['orderId']} changed since it was approved; nothing was refunded",
            }
        else:
            order.refunded_cents += args["amountCents"]
            shop.refunds += 1
            outcome = {
                "outcome": "succeeded",
                "result": {"refundId": f"re_{key[-8:]}", "amountCents": args["amountCents"]},
                "message": f"Refunded {dollars(args['amountCents'])}",
            }
        if shop.reconcile and outcome["outcome"] == "succeeded":
            shop.running.add(key)
            outcome_now = {
                "outcome": "needs_reconciliation",
                "statusPath": f"/refunds/{key}",
                "message": "pending at the bank",
            }
            shop.done[key] = outcome
            return JSONResponse(outcome_now)
        shop.done[key] = outcome
        hold = shop.hold_execute
    if hold is not None:
        await asyncio.to_thread(hold.wait)  # the refund is done; the answer is late
    return JSONResponse(outcome)


def status(shop: Orders, call: dict[str, Any]) -> Response:
    """What became of an execution: its outcome, in progress, or not started."""
    key = call["idempotencyKey"]
    with shop.lock:
        if key in shop.running:
            if shop.reconcile > 0:
                shop.reconcile -= 1
                return JSONResponse({"outcome": "in_progress"})
            shop.running.discard(key)
        if key in shop.done:
            return JSONResponse(shop.done[key])
    return JSONResponse({"outcome": "not_started"})


def _refuse(message: str) -> Response:
    return JSONResponse({"error": {"message": message}}, status_code=422)


def build(
    secret: str,
    jwks: Callable[[], Mapping[str, Any]],
    shop: Orders | None = None,
    now: Callable[[], float] = time.time,
) -> Starlette:
    """The application as an ASGI app; `app.state.shop` holds its state. `jwks` gives
    Cosigner's `GET /v1/keys`, against which every `execute`'s grant is checked."""
    shop = shop or Orders()

    def granted(call: dict[str, Any]) -> str | None:
        """Why the grant does not allow this execute (None: it does)."""
        try:
            verify_execute(ExecuteCall.model_validate(call), jwks(), now=now())
        except (GrantRefused, ValidationError) as exc:
            with shop.lock:
                shop.refused_grants += 1
            return str(exc)
        with shop.lock:
            shop.last_execute = call
        return None

    async def endpoint(request: Request) -> Response:
        body = await request.body()
        try:
            verify_request(body, request.headers, secret)
        except InvalidSignature:
            with shop.lock:
                shop.forged += 1
            return JSONResponse({"error": {"message": "bad signature"}}, status_code=401)
        call = json.loads(body)
        kind = call.get("type")
        if call.get("operation") != OPERATION or kind not in ("prepare", "execute", "status"):
            return JSONResponse({"error": {"message": f"unknown operation or type {kind}"}}, status_code=400)
        shop.count(kind)
        if kind == "prepare":
            return prepare(shop, call)
        if kind == "execute":
            # Before anything runs: the grant must bind exactly these arguments and preview.
            refused = granted(call)
            if refused is not None:
                return JSONResponse({"error": {"message": f"grant refused: {refused}"}}, status_code=403)
            return await execute(shop, call)
        return status(shop, call)

    app = Starlette(routes=[Route("/cosigner", endpoint, methods=["POST"])])
    app.state.shop = shop
    return app


def main() -> None:
    """Serve the application on 127.0.0.1 (CONTRACT_APP_PORT, default 8100)."""
    import uvicorn

    secret = os.environ.get("ORDERS_CONTRACT_SECRET")
    if not secret:
        raise SystemExit("set ORDERS_CONTRACT_SECRET to the secret Cosigner signs with")
    port = int(os.environ.get("CONTRACT_APP_PORT", "8100"))
    keys_url = os.environ.get("COSIGNER_URL", "http://127.0.0.1:8000").rstrip("/") + "/v1/keys"
    cached: dict[str, Any] = {}

    def jwks() -> Mapping[str, Any]:
        # Fetched once: the keys change only with COSIGNER_SECRET (restart this app then).
        if not cached:
            cached.update(httpx.get(keys_url, timeout=10).raise_for_status().json())
        return cached

    uvicorn.run(build(secret, jwks), host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main()
