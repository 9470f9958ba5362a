"""The fast path of `canonical_json` (no floats) gives exactly the bytes of the RFC 8785 writer."""

from __future__ import annotations

from typing import Any

import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from contracts.digest import SAFE_INTEGER, CanonicalFormError, canonical_json

# Keys and strings from the whole of Unicode except lone surrogates, so ordering across
# the BMP and beyond (U+E000… vs U+10000…) and every escape are exercised.
text = st.text(st.characters(exclude_categories=["Cs"]), max_size=8)
scalars = st.none() | st.booleans() | st.integers(-SAFE_INTEGER, SAFE_INTEGER) | text
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(text, inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=400, deadline=None)
@given(values)
def test_fast_path_equals_the_rfc8785_writer(value: Any) -> None:
    assert canonical_json(value) == rfc8785.dumps(value)


def test_keys_beyond_the_bmp_sort_by_utf16_code_units() -> None:
    # U+FF61 sorts after U+1F600 in code points but before it in UTF-16 (D83D DE00).
    value = {"\U0001f600": 1, "\uff61": 2}
    assert canonical_json(value) == rfc8785.dumps(value)
    assert canonical_json(value).decode().index("\U0001f600") < canonical_json(value).decode().index("\uff61")


@pytest.mark.parametrize("bad", [{"id": SAFE_INTEGER + 1}, {"s": "\ud800"}, {"x": [1, float("nan")]}])
def test_what_has_no_canonical_form_is_still_refused(bad: Any) -> None:
    with pytest.raises(CanonicalFormError):
        canonical_json(bad)
