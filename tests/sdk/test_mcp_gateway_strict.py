"""The gateway refuses JSON-RPC messages two parsers could read differently, over stdio and
over Streamable HTTP, before the policy or the upstream sees them."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client

from cosigner.mcp_gateway.strict import guard_http, refusal
from tests.sdk.conftest import Target
from tests.sdk.mcp_shop import gateway, shop
from tests.sdk.test_mcp_gateway import Calls, text
from tests.sdk.test_mcp_gateway_transports import ROOT, serving

CALL = '"method":"tools/call","params":{"name":"lookup_order","arguments":{"order_id":"ord_1"}'
SWAPPED = (
    '{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"lookup_order",'
    '"arguments":{"order_id":"ord_1"},"name":"issue_refund"}}'
)


@pytest.mark.parametrize(
    ("text", "request_id", "said"),
    [
        (SWAPPED, 7, 'the key "name" appears twice'),
        ('{"jsonrpc":"2.0","id":7,"id":8,' + CALL + "}}", None, 'the key "id" appears twice'),
        ('{"jsonrpc":"2.0","id":"a",' + CALL[:-1] + ',"order_id":"ord_2"}}}', "a", '"order_id"'),
        ('{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"x":NaN}}', 1, "NaN is not a JSON number"),
        ('{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"x":1e400}}', 1, "too large"),
        ('{"jsonrpc":"2.0","id":1,"method":"x","params":{"\\u0000secret":1,"\\u0000secret":2}}', 1, "a key"),
    ],
)
def test_an_ambiguous_message_is_answered_with_an_error_naming_the_fix(
    text: str, request_id: Any, said: str
) -> None:
    answer = refusal(text)
    assert answer is not None and answer["id"] == request_id and answer["error"]["code"] == -32600
    assert said in answer["error"]["message"] and answer["error"]["message"].startswith("refused: ")
    assert "secret" not in answer["error"]["message"]


@pytest.mark.parametrize(
    "text", ['{"jsonrpc":"2.0","id":1,' + CALL + "}}", "not json", '{"a":{"b":1},"c":{"b":2}}', "[1.5, 2]"]
)
def test_a_plain_message_or_non_json_is_left_alone(text: str) -> None:
    assert refusal(text) is None


def exchange(proc: subprocess.Popen[bytes], line: str) -> dict[str, Any]:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(line.encode() + b"\n")
    proc.stdin.flush()
    ready, _, _ = select.select([proc.stdout], [], [], 30)
    assert ready, "no answer"
    return dict(json.loads(proc.stdout.readline()))


def test_over_stdio_a_call_with_a_repeated_key_never_reaches_the_policy_or_the_upstream(
    inprocess: Target,
) -> None:
    proc = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "cosigner-mcp-gateway"),
            *("--upstream-cmd", f"{sys.executable} {ROOT / 'examples' / 'mcp_server.py'}"),
            *("--surface", "dashboard:u_1", "--hold", "0"),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "COSIGNER_URL": inprocess.url, "COSIGNER_API_KEY": inprocess.acme},
    )
    try:
        hello = exchange(
            proc,
            '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25",'
            '"capabilities":{},"clientInfo":{"name":"t","version":"1"}}}',
        )
        assert hello["id"] == 1 and "result" in hello
        assert proc.stdin is not None
        proc.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        refused = exchange(proc, SWAPPED)
        served = exchange(proc, '{"jsonrpc":"2.0","id":8,' + CALL + "}}")
    finally:
        assert proc.stdin is not None and proc.stderr is not None
        proc.stdin.close()
        proc.wait(timeout=30)
        upstream_said = proc.stderr.read().decode()
    assert refused == {
        "jsonrpc": "2.0",
        "id": 7,
        "error": {
            "code": -32600,
            "message": 'refused: the key "name" appears twice in one JSON object; send each key once',
        },
    }
    assert served["id"] == 8 and not served["result"]["isError"]
    # The example server logs each call it runs: only the plain one reached it.
    assert upstream_said.count("example-shop: lookup_order") == 1 and "issue_refund" not in upstream_said


async def test_over_http_a_body_with_a_repeated_key_is_a_400_and_sessions_still_work(
    inprocess: Target,
) -> None:
    calls: Calls = []
    async with (
        serving(shop(calls).streamable_http_app()) as upstream_url,
        gateway(inprocess.url, inprocess.acme, upstream_url) as gw,
        serving(guard_http(gw.server.streamable_http_app())) as url,
    ):
        async with httpx.AsyncClient() as http:
            r = await http.post(
                url,
                content=SWAPPED,
                headers={"content-type": "application/json", "accept": "application/json, text/event-stream"},
            )
        async with Client(url, mode="legacy") as agent:
            read = await agent.call_tool("lookup_order", {"orderId": "ord_2"})
    assert r.status_code == 400 and r.json()["id"] == 7
    assert r.json()["error"]["message"].startswith('refused: the key "name" appears twice')
    assert text(read) == "order ord_2: delivered" and calls == [("lookup_order", {"orderId": "ord_2"})]


async def test_a_body_over_the_limit_is_a_413_unread_and_others_pass_whole() -> None:
    seen: list[bytes] = []

    async def inner(scope: Any, receive: Any, send: Any) -> None:
        body = b""
        while True:
            event = await receive()
            body += event.get("body", b"")
            if not event.get("more_body"):
                break
        seen.append(body)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    app = guard_http(inner, max_body=1000)
    plain = '{"jsonrpc":"2.0","id":1,' + CALL + "}}"
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gw") as http:
        big = await http.post("/mcp", content=b"[" + b"1," * 600 + b"1]")
        ok = await http.post("/mcp", content=plain)
        listed = await http.get("/mcp")
    assert big.status_code == 413 and big.json()["error"]["message"] == "refused: the body is over 1000 bytes"
    assert ok.status_code == 200 and listed.status_code == 200
    assert seen == [plain.encode(), b""]  # the plain body reached the app whole; the big one never
