"""Every error body Cosigner answers with is an `ErrorBody`, with a code of `ErrorCode`.

The app answers errors from three handlers (a route Starlette does not know or a method it
does not take, a `CosignerError`, anything else: the 500), and a few routes answer their own
refusals; each is read back here as the strict model the SDKs read, and no module builds an
error body by hand.
"""

from __future__ import annotations

import ast
from pathlib import Path

import httpx
import pytest
from sqlalchemy import text
from starlette.applications import Starlette

from bot.testing.stepped_clock import SteppedClock
from contracts.answers import ErrorBody
from contracts.enums import ErrorCode
from cosigner import errors
from storage import raw
from tests.api.test_approvals import call
from tests.harness import BASE_URL, cosigner_app

ROOT = Path(__file__).resolve().parents[2]
U1 = {"type": "dashboard", "userId": "u_1"}


def error_body(r: httpx.Response) -> ErrorCode:
    """The code of a response's error body, once it has read as an `ErrorBody`, whole."""
    body = ErrorBody.model_validate_json(r.content)
    assert body.dump() == r.json(), "a field the model does not know, or one it would not send"
    return body.error.code


@pytest.mark.parametrize("cls", [errors.BY_CODE[code] for code in sorted(errors.BY_CODE)])
def test_every_error_class_answers_an_error_body_of_its_code(cls: type[errors.CosignerError]) -> None:
    raised = cls("what to change", approvalId="apv_1")
    assert error_body(httpx.Response(cls.status, json=raised.body())) == cls.code


async def test_every_handler_of_the_app_answers_an_error_body(db_kind: str) -> None:
    async with cosigner_app(database_kind=db_kind, run_workers=False) as h:
        key = await h.create_tenant("acme")
        # Exceptions reach the client as the 500 a server sends, not raised into the test.
        transport = httpx.ASGITransport(app=h.app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url=BASE_URL) as client:
            answered = {
                "no such route": await client.get("/v1/nothing-here", headers=h.auth(key)),
                "a method the route does not take": await client.delete("/v1/approvals", headers=h.auth(key)),
                "no key": await client.post("/v1/approvals", json=call(call_id="c1", surface=U1)),
                "a malformed body": await client.post("/v1/approvals", content=b"{", headers=h.auth(key)),
                "no such approval": await client.get("/v1/approvals/apv_nothing", headers=h.auth(key)),
            }
            async with raw.write(h.parts.db) as conn:
                await conn.execute(text("DROP TABLE audit_events"))  # every write now fails
            failed = await client.post(
                "/v1/approvals", json=call(call_id="c2", surface=U1), headers=h.auth(key)
            )
    codes = {what: (r.status_code, error_body(r)) for what, r in answered.items()}
    assert codes == {
        "no such route": (404, ErrorCode.INVALID_REQUEST),
        "a method the route does not take": (405, ErrorCode.INVALID_REQUEST),
        "no key": (401, ErrorCode.UNAUTHENTICATED),
        "a malformed body": (400, ErrorCode.INVALID_REQUEST),
        "no such approval": (404, ErrorCode.APPROVAL_NOT_FOUND),
    }
    assert failed.status_code == 500 and error_body(failed) is ErrorCode.INTERNAL, failed.text
    assert "nothing was decided" in failed.json()["error"]["message"]


async def test_the_test_clock_refuses_with_error_bodies() -> None:
    app = Starlette(routes=SteppedClock(1_800_000_000).routes())
    for peer, status in ((("127.0.0.1", 40000), 400), (("203.0.113.9", 40000), 403)):
        transport = httpx.ASGITransport(app=app, client=peer)
        async with httpx.AsyncClient(transport=transport, base_url=BASE_URL) as client:
            r = await client.post("/test/clock", json={"advanceSeconds": -1})
        assert r.status_code == status and error_body(r) is ErrorCode.INVALID_REQUEST, r.text


def hand_built_error_bodies(folder: Path) -> list[str]:
    """Dict literals shaped like an error body (`{"error": {"code": …}}`) under `folder`, but
    in the emulators, which answer in Slack's, Twilio's and Microsoft's own shapes (the Bot
    Connector's errors look like ours)."""

    def shaped(node: ast.Dict) -> bool:
        for key, value in zip(node.keys, node.values, strict=True):
            if isinstance(key, ast.Constant) and key.value == "error" and isinstance(value, ast.Dict):
                return any(isinstance(k, ast.Constant) and k.value == "code" for k in value.keys)
        return False

    return [
        f"{path.relative_to(ROOT)}:{node.lineno}"
        for path in sorted(folder.rglob("*.py"))
        if "emulat" not in path.name
        for node in ast.walk(ast.parse(path.read_text(), str(path)))
        if isinstance(node, ast.Dict) and shaped(node)
    ]


def test_no_error_body_is_built_by_hand() -> None:
    found = [
        where
        for folder in ("bot", "surfaces", "contracts", "storage")
        for where in hand_built_error_bodies(ROOT / folder)
    ]
    assert found == [], "build error bodies from ErrorBody (or a CosignerError's body()): " + ", ".join(found)
