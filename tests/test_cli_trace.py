"""`cosigner audit show` prints the trace an approval belongs to."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bot.cli import main
from storage.database import Database
from tests.bot.test_tracing import AGENT_TRACE, TRACEPARENT, request
from tests.harness import TEST_SECRET, cosigner_app


async def requested(path: Path) -> str:
    db = Database(f"sqlite+aiosqlite:///{path}")
    await db.migrate()
    async with cosigner_app(db=db) as h:
        key = await h.create_tenant("acme")
        r = await h.client.post(
            "/v1/approvals", json=request(), headers={**h.auth(key), "traceparent": TRACEPARENT}
        )
        return str(r.json()["approvalId"])


def test_audit_show_prints_the_trace_id(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "c.db"
    monkeypatch.setenv("COSIGNER_DATABASE_URL", f"sqlite+aiosqlite:///{path}")
    monkeypatch.setenv("COSIGNER_SECRET", TEST_SECRET)
    monkeypatch.delenv("COSIGNER_POLICY", raising=False)
    approval_id = asyncio.run(requested(path))
    assert main(["audit", "show", approval_id]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"trace {AGENT_TRACE}"
    assert "requested" in lines[1] and f'"traceId":"{AGENT_TRACE}"' in lines[1]
