"""Schemathesis fuzzes every operation of `/openapi.json` against the app in-process.

Requests are generated from the published schema, valid and invalid; every answer must be
documented, match its schema, and none may be a server error. The run is kept small so it
belongs in the ordinary suite.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.python.asgi import shutdown_lifespans
from schemathesis.specs.openapi.checks import positive_data_acceptance

from bot.http.app import build_app
from bot.http.openapi import openapi
from bot.policy.rules import load_policy
from storage.database import Database
from tests.harness import DEFAULT_POLICY, make_settings

EXAMPLES = 12


async def prepared(url: str) -> str:
    """Migrate the database and create the tenant whose key the fuzzer sends."""
    from bot.http.tenants import TenantKeys

    db = Database(url)
    try:
        await db.migrate()
        return (await TenantKeys(db).create("acme")).agent.key
    finally:
        await db.close()


# Built at import so the schema's every check reaches it; started on the first request,
# after the fixture below has migrated its database and created the tenant.
WORKDIR = Path(tempfile.mkdtemp(prefix="cosigner-fuzz-"))
URL = f"sqlite+aiosqlite:///{WORKDIR / 'fuzz.db'}"
# No workers: generated callback URLs must not be called, and nothing needs delivering.
APP = build_app(
    make_settings(), policy=load_policy(DEFAULT_POLICY), db=Database(URL), surfaces=[], run_workers=False
)


@pytest.fixture(scope="module")
def key() -> Iterator[str]:
    """The tenant key the fuzzer sends."""
    try:
        yield asyncio.run(prepared(URL))
        # Schemathesis keeps the app started for the process; stop it while its database exists.
        shutdown_lifespans()
    finally:
        shutil.rmtree(WORKDIR, ignore_errors=True)


schema = schemathesis.openapi.from_dict(openapi())
schema.app = APP


@schema.parametrize()
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)
def test_api_conforms_to_its_schema(case: Any, key: str) -> None:
    response = case.call_and_validate(
        headers={"Authorization": f"Bearer {key}"}, excluded_checks=[positive_data_acceptance]
    )
    assert response.status_code < 500
    if case.meta is not None and case.meta.generation.mode.is_positive:
        assert response.status_code in ACCEPTED, response.text
        if response.status_code == 400:
            assert schema_cannot_say(response.json()["error"]), response.text


# Schema-valid calls the API may still refuse: the policy (422: nobody can approve on that
# surface; 403, 409, 429), and, as 400, what JSON Schema cannot state (below).
ACCEPTED = {200, 201, 400, 401, 403, 404, 409, 422, 429}


def schema_cannot_say(error: dict[str, Any]) -> bool:
    """A 400 for a schema-valid call: JSON Schema counts `10.0` as an integer and cannot
    state the depth and size limits of `parameters` and `result`, nor their canonical form
    (integers beyond 2^53); nothing else may be refused."""
    problems = error.get("problems") or [error]
    return all(
        p.get("message") == "Input should be a valid integer"
        or str(p.get("field")).startswith(("parameters", "result"))
        for p in problems
    )
