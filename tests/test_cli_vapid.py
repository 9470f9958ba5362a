"""`cosigner vapid`: the Web Push public key, made once and kept sealed; `--new` replaces it."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bot.cli import main
from storage import push as push_store
from storage.database import Database

SECRET = "vapid-cli-test-secret-0123456789-abcdefghij"


def test_the_key_is_made_once_kept_sealed_and_replaced_on_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'c.db'}"
    monkeypatch.setenv("COSIGNER_DATABASE_URL", url)
    monkeypatch.setenv("COSIGNER_SECRET", SECRET)
    assert main(["migrate"]) == 0
    capsys.readouterr()
    assert main(["vapid"]) == 0
    first = capsys.readouterr().out.strip()
    assert main(["vapid"]) == 0
    assert capsys.readouterr().out.strip() == first and len(first) == 87

    async def stored() -> str | None:
        db = Database(url)
        try:
            await db.run_write(
                lambda tx: push_store.subscribe(
                    tx,
                    ["ada@acme.example"],
                    push_store.Subscription("https://p.example/x", "k", "a"),
                    "i",
                    "s",
                    0.0,
                )
            )
            return await db.run_read(push_store.vapid_key)
        finally:
            await db.close()

    sealed = asyncio.run(stored())
    assert sealed is not None and sealed.startswith("cosigner-seal:") and "PRIVATE KEY" not in sealed
    assert main(["vapid", "--new"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] != first and "every subscription was removed" in out

    async def devices() -> list[push_store.Subscription]:
        db = Database(url)
        try:
            return await db.run_read(lambda tx: push_store.devices_for(tx, ["ada@acme.example"]))
        finally:
            await db.close()

    assert asyncio.run(devices()) == []
