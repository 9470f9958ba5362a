"""An approval's trace context is a typed record; the table keeps the JSON text it always had."""

from __future__ import annotations

import pytest

from storage.record_columns import TraceContext

ROOT = '{"span":"00f067aa0ba902b7","sampled":true}'
CHILD = (
    '{"span":"00f067aa0ba902b7","sampled":false,"parent":"b7ad6b7169203331","parentFlags":1,"state":"k=v"}'
)


@pytest.mark.parametrize("text", [ROOT, CHILD])
def test_the_stored_text_reads_back_and_is_written_as_before(text: str) -> None:
    context = TraceContext.from_json(text)
    assert context is not None and context.to_json() == text


def test_fields_of_a_child() -> None:
    assert TraceContext.from_json(CHILD) == TraceContext(
        "00f067aa0ba902b7", False, "b7ad6b7169203331", 1, "k=v"
    )
    assert TraceContext.from_json(ROOT) == TraceContext("00f067aa0ba902b7", True)


@pytest.mark.parametrize(
    "text", [None, "", "not json", '{"sampled":true}', '{"span":"a","sampled":1,"parent":"b"}']
)
def test_none_or_an_unreadable_one_is_none(text: str | None) -> None:
    assert TraceContext.from_json(text) is None
