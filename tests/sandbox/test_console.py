"""What `cosigner dev` prints after its banner: one readable line per approval created,
answer and decision, never a parameter, and a goodbye on Ctrl-C."""

from __future__ import annotations

import asyncio
import re
import signal
import sys
from pathlib import Path

import httpx
import pytest

from tests.harness import until_async
from tests.processes import clean_env, free_port
from tests.sandbox.test_page_api import SLACK, card_of, click

SECRET_VALUE = "tok_never_printed_42"


@pytest.mark.slow
async def test_dev_prints_each_request_answer_and_decision_and_says_goodbye(tmp_path: Path) -> None:
    port, data = free_port(), tmp_path / "cosigner-data"
    out, err = tmp_path / "stdout", tmp_path / "stderr"
    with out.open("wb") as stdout, err.open("wb") as stderr:
        proc = await asyncio.create_subprocess_exec(
            *(sys.executable, "-m", "bot.cli", "dev", "--port", str(port), "--data", str(data)),
            env=clean_env(tmp_path),
            cwd=tmp_path,
            stdout=stdout,
            stderr=stderr,
        )
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as http:

            async def ready() -> bool:
                assert proc.returncode is None, err.read_text()
                try:
                    return (await http.get("/readyz")).status_code == 200
                except httpx.TransportError:
                    return False

            await until_async(ready, seconds=60, interval=0.1)
            http.headers["Authorization"] = f"Bearer {(data / 'demo.key').read_text().strip()}"
            body = {"executionId": "run_1", "surface": SLACK}
            read = {"toolCallId": "c1", "toolName": "lookup_order", "parameters": {"orderId": SECRET_VALUE}}
            credit = {"toolCallId": "c2", "toolName": "issue_credit", "parameters": {"token": SECRET_VALUE}}
            read_id = (await http.post("/v1/approvals", json=body | read)).json()["approvalId"]
            credit_id = (await http.post("/v1/approvals", json=body | credit)).json()["approvalId"]
            card = await card_of(http, "issue_credit")
            assert (await click(http, card, "cosigner.approve", "outsider")).json() == {"status": 200}
            assert (await click(http, card, "cosigner.approve", "requester")).json() == {"status": 200}

            async def decided() -> bool:
                return f"decided  {credit_id}" in err.read_text()

            await until_async(decided, seconds=30)
            # A long-poll still open at Ctrl-C is cut by the server's shutdown: one line too.
            open_id = (await http.post("/v1/approvals", json=body | credit | {"toolCallId": "c3"})).json()
            polling = asyncio.create_task(
                http.get(f"/v1/approvals/{open_id['approvalId']}?wait=50", timeout=60)
            )
            await asyncio.sleep(0.5)
            proc.send_signal(signal.SIGINT)
            assert await asyncio.wait_for(proc.wait(), 60) == 0
            polling.cancel()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    printed = err.read_text().splitlines()
    assert all(re.match(r"\d\d:\d\d:\d\d  \S", line) for line in printed), err.read_text()
    assert "Traceback" not in err.read_text()
    lines = [line.split("  ", 1)[1] for line in printed]  # without the time
    assert [line for line in lines if line.startswith(("created", "answered", "decided"))][:5] == [
        f"created  {read_id}  demo  lookup_order: asked by slack:U0ALICE, approved at once by "
        "the policy (tools.lookup_order.kind: read → none)",
        f"created  {credit_id}  demo  issue_credit: asked by slack:U0ALICE, waiting for a person on slack",
        f"answered {credit_id}  demo  issue_credit: slack:U0MALLORY answered approved, "
        "refused (NOT_AN_APPROVER)",
        f"answered {credit_id}  demo  issue_credit: slack:U0ALICE answered approved, accepted",
        f"decided  {credit_id}  demo  issue_credit: approved by slack:U0ALICE",
    ], err.read_text()
    assert SECRET_VALUE not in err.read_text() + out.read_text()
    assert out.read_text().endswith(f"Cosigner sandbox stopped; its data stays in {data}. Goodbye.\n")
