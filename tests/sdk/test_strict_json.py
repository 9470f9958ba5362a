"""One strict JSON reader for the server and the MCP gateway: they refuse the same texts."""

from __future__ import annotations

import pytest

from bot.http.decoding import decode_json
from contracts.errors import InvalidRequest
from cosigner import strict_json
from cosigner.mcp_gateway.strict import refusal

AMBIGUOUS = [
    '{"name": "lookup_order", "name": "issue_refund"}',
    '{"a": {"b": 1, "b": 2}}',
    '{"amount": NaN}',
    '{"amount": -Infinity}',
    '{"amount": 1e400}',
]
PLAIN = ['{"name": "lookup_order"}', "[1, 2.5, null]", '{"a": {"b": 1}, "b": 2}']


@pytest.mark.parametrize("text", AMBIGUOUS)
def test_the_server_and_the_gateway_refuse_the_same_ambiguous_text_with_the_same_reason(text: str) -> None:
    with pytest.raises(InvalidRequest) as refused:
        decode_json(text.encode())
    answered = refusal(text)
    assert answered is not None
    assert answered["error"]["message"] == f"refused: {refused.value.message}"


@pytest.mark.parametrize("text", PLAIN)
def test_plain_json_passes_both(text: str) -> None:
    assert decode_json(text.encode()) == strict_json.read(text).value
    assert refusal(text) is None


def test_an_ambiguity_before_a_syntax_error_is_named_by_the_server() -> None:
    # The server names the first ambiguity it met; the gateway leaves text that is not JSON
    # to the MCP SDK's own parser.
    reading = strict_json.read('[{"a": 1, "a": 2}, ')
    assert reading.error is not None and reading.problems
    with pytest.raises(InvalidRequest, match="appears twice"):
        decode_json(b'[{"a": 1, "a": 2}, ')
    assert refusal('[{"a": 1, "a": 2}, ') is None


def test_a_key_that_is_not_a_plain_name_is_not_quoted_by_the_gateway() -> None:
    reading = strict_json.read('{"sk-live 123": 1, "sk-live 123": 2}')
    assert reading.problems == ["a key appears twice in one JSON object; send each key once"]
    assert reading.top_repeated == {"sk-live 123"}
