"""parse_reply and the keyword checks: only exact words decide anything."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contracts.enums import Verdict
from surfaces.sms.reply import Reply, is_help, is_opt_in, is_opt_out, needs_code, parse_reply

EXACT = re.compile(r"[ \t\r\n]*(yes|no|never|done)([ \t]+[0-9]{1,8})?[ \t\r\n]*", re.IGNORECASE | re.ASCII)
WORDS = {"YES": Verdict.APPROVE, "NO": Verdict.DENY, "NEVER": Verdict.ALWAYS_DENY, "DONE": Verdict.DONE}


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("YES", Reply(Verdict.APPROVE)),
        ("yes", Reply(Verdict.APPROVE)),
        ("  Yes \n", Reply(Verdict.APPROVE)),
        ("NO", Reply(Verdict.DENY)),
        ("no", Reply(Verdict.DENY)),
        ("YES 4821", Reply(Verdict.APPROVE, "4821")),
        ("no   4821 ", Reply(Verdict.DENY, "4821")),
        ("\tyes\t0042", Reply(Verdict.APPROVE, "0042")),
        ("NEVER", Reply(Verdict.ALWAYS_DENY)),
        ("never 4821", Reply(Verdict.ALWAYS_DENY, "4821")),
        ("DONE", Reply(Verdict.DONE)),
        (" done 0042\n", Reply(Verdict.DONE, "0042")),
    ],
)
def test_exact_answers(body: str, expected: Reply) -> None:
    assert parse_reply(body) == expected


@pytest.mark.parametrize(
    "body",
    [
        "",
        " ",
        "yes please",
        "Y",
        "N",
        "ok",
        "OK",
        "👍",
        "YES!",
        "yes.",
        "no!",
        "yess",
        "YES4821",
        "YES 48a1",
        "YES 4821 5",
        "nope",
        "yes no",
        "si",
        "YES\n4821",
        "ＹＥＳ",
        "yeſ",
        "YES\u00a0",
        "\u2003NO",
        "YES ٤٨٢١",
        "NO 123456789",
    ],
)
def test_everything_else_is_not_an_answer(body: str) -> None:
    assert parse_reply(body) is None


@given(st.text())
def test_only_exact_keywords_decide(body: str) -> None:
    reply = parse_reply(body)
    assert (reply is not None) == (EXACT.fullmatch(body) is not None)
    if reply is not None:
        word = body.strip(" \t\r\n").split()[0].upper()
        assert reply.verdict is WORDS[word]


@given(st.sampled_from(sorted(WORDS)), st.text(alphabet=" \t\r\n", max_size=3), st.booleans())
def test_every_keyword_decides_in_any_case(word: str, space: str, lower: bool) -> None:
    body = space + (word.lower() if lower else word) + space
    assert parse_reply(body) == Reply(WORDS[word])


@given(st.sampled_from(["yes", "no", "never", "done"]), st.text(min_size=1))
def test_any_suffix_but_a_code_is_refused(word: str, suffix: str) -> None:
    body = word + suffix
    if re.fullmatch(r"([ \t]+[0-9]{1,8})?[ \t\r\n]*", suffix, re.ASCII):
        assert parse_reply(body) is not None
    else:
        assert parse_reply(body) is None


@pytest.mark.parametrize(
    "word",
    ["STOP", "stop", " StopAll ", "UNSUBSCRIBE", "CANCEL", "END", "QUIT", "REVOKE", "OPTOUT"],
)
def test_opt_out_words(word: str) -> None:
    assert is_opt_out(word)
    assert not is_opt_in(word) and not is_help(word)
    assert parse_reply(word) is None


@pytest.mark.parametrize("word", ["START", "unstop", "YES", " yes "])
def test_opt_in_words(word: str) -> None:
    assert is_opt_in(word)
    assert not is_opt_out(word)


@pytest.mark.parametrize("word", ["HELP", "info"])
def test_help_words(word: str) -> None:
    assert is_help(word)
    assert parse_reply(word) is None


@pytest.mark.parametrize("word", ["stop please", "ſtop", "STOP!", "HELP me", "NO"])
def test_not_keywords(word: str) -> None:
    assert not is_opt_out(word) and not is_help(word)
    assert not is_opt_in(word)


def test_bare_yes_is_both_an_answer_and_an_opt_in() -> None:
    assert parse_reply("YES") == Reply(Verdict.APPROVE)
    assert is_opt_in("YES")
    assert not is_opt_in("YES 4821")


@pytest.mark.parametrize(
    ("body", "code"),
    [("MORE", None), (" more ", None), ("More 4821", "4821"), ("MORE\t12", "12")],
)
def test_more_asks_for_the_whole_call(body: str, code: str | None) -> None:
    from surfaces.sms.reply import More, parse_more

    assert parse_more(body) == More(code=code)
    assert parse_reply(body) is None, "MORE decides nothing"


@pytest.mark.parametrize(
    "body", ["more please", "MORE!", "MOREX", "mor", "MORE 4821 5", "ᴍORE", "MORE ４８２１"]
)
def test_anything_but_an_exact_more_is_not_more(body: str) -> None:
    from surfaces.sms.reply import parse_more

    assert parse_more(body) is None


@pytest.mark.parametrize(
    ("body", "needed"),
    [
        ("YES", True),
        ("never", True),
        ("DONE", False),
        ("NO", False),
        ("YES 4821", False),
        ("NEVER 4821", False),
    ],
)
def test_a_bare_yes_or_never_needs_its_code_after_another_text(body: str, needed: bool) -> None:
    reply = parse_reply(body)
    assert reply is not None and needs_code(reply) is needed
