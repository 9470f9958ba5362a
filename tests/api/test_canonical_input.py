"""Parameters without an RFC 8785 form are refused at the door, before anything is stored."""

from __future__ import annotations

import hashlib
import json

import pytest
import sqlalchemy as sa

from bot.policy import checks
from contracts.digest import parameters_digest
from contracts.errors import InvalidRequest
from storage import raw
from storage.tables import approvals
from tests.api.test_approvals import call
from tests.harness import cosigner_app


@pytest.mark.parametrize(
    ("raw_parameters", "field", "fix"),
    [
        # NaN and Infinity are not JSON at all: the body is refused as it is read.
        ('{"amount": NaN}', "body", "finite number"),
        ('{"amount": Infinity}', "body", "finite number"),
        ('{"nested": {"v": [1, -Infinity]}}', "body", "finite number"),
        ('{"id": 9007199254740992}', "parameters.id", "send it as a string"),
        ('{"ids": [1, -9007199254740992]}', "parameters.ids[1]", "send it as a string"),
    ],
)
async def test_parameters_without_a_canonical_form_are_refused(
    db_kind: str, raw_parameters: str, field: str, fix: str
) -> None:
    async with cosigner_app(database_kind=db_kind) as h:
        key = await h.create_tenant("acme")
        body = json.dumps(call(params={"placeholder": 1})).replace('{"placeholder": 1}', raw_parameters)
        r = await h.client.post("/v1/approvals", content=body.encode(), headers=h.auth(key))
        assert r.status_code == 400, r.text
        error = r.json()["error"]
        assert (error["code"], error["field"]) == ("INVALID_REQUEST", field)
        assert fix in error["message"], error["message"]
        async with raw.read(h.parts.db) as conn:
            count = await conn.execute(sa.select(sa.func.count()).select_from(approvals))
            assert count.scalar_one() == 0, "nothing is stored for a refused call"


async def test_float_parameters_are_digested_in_ecmascript_form(db_kind: str) -> None:
    async with cosigner_app(database_kind=db_kind) as h:
        key = await h.create_tenant("acme")
        body = json.dumps(call(params={"placeholder": 1})).replace(
            '{"placeholder": 1}', '{"big": 1e21, "tenth": 0.1, "negZero": -0.0, "one": 1.0}'
        )
        r = await h.client.post("/v1/approvals", content=body.encode(), headers=h.auth(key))
        assert r.status_code == 201, r.text
        # The same values as JCS writes them, so an executor in any language gets this digest.
        same = {"big": 1e21, "tenth": 0.1, "negZero": 0, "one": 1}
        assert r.json()["parametersDigest"] == parameters_digest(same)
        assert r.json()["parametersDigest"] == (
            "sha256:" + hashlib.sha256(b'{"big":1e+21,"negZero":0,"one":1,"tenth":0.1}').hexdigest()
        )


async def test_a_result_without_a_canonical_form_is_refused(db_kind: str) -> None:
    async with cosigner_app(database_kind=db_kind) as h:
        key = await h.create_tenant("acme")
        r = await h.client.post(
            "/v1/approvals", json=call("lookup_order", params={"orderId": "o1"}), headers=h.auth(key)
        )
        aid = r.json()["approvalId"]
        r = await h.client.post(
            f"/v1/approvals/{aid}/result",
            content=b'{"outcome": "succeeded", "result": {"refundId": 12345678901234567890}}',
            headers=h.auth(key),
        )
        assert (r.status_code, r.json()["error"]["field"]) == (400, "result.refundId")


def test_oversized_parameters_are_refused_before_the_canonical_writer_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def never(*_args: object) -> bytes:
        raise AssertionError("the JCS writer ran on an oversized value")

    monkeypatch.setattr(checks, "canonical_json", never)
    with pytest.raises(InvalidRequest, match="the limit is 65536") as info:
        checks.json_limits({"blob": "x" * (200 * 1024)})
    assert info.value.details["field"] == "parameters"


def test_lone_surrogates_are_refused_with_their_path() -> None:
    with pytest.raises(InvalidRequest, match="surrogate") as info:
        checks.json_limits({"note": ["ok", "a\ud800b"]})
    assert info.value.details["field"] == "parameters.note[1]"


@pytest.mark.parametrize(
    ("raw_parameters", "field"),
    [
        ('{"": 9007199254740993}', 'parameters[""]'),
        ('{"a.b": {"c": 9007199254740993}}', 'parameters["a.b"].c'),
    ],
)
async def test_a_refused_member_is_named_unambiguously_whatever_its_key(
    db_kind: str, raw_parameters: str, field: str
) -> None:
    async with cosigner_app(database_kind=db_kind) as h:
        key = await h.create_tenant("acme")
        body = json.dumps(call(params={"placeholder": 1})).replace('{"placeholder": 1}', raw_parameters)
        r = await h.client.post("/v1/approvals", content=body.encode(), headers=h.auth(key))
        assert r.status_code == 400, r.text
        assert r.json()["error"]["field"] == field
