"""The gateway's command line: what the upstream process is started with, and refusals."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from cosigner.mcp_gateway.cli import add_arguments, inbox_url, pinning, upstream_of
from cosigner.mcp_gateway.pins import NewTools


def parse(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    add_arguments(p)
    return p.parse_args([*argv, "--surface", "dashboard:u_1"])


def test_the_upstream_gets_only_the_variables_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SHOP_TOKEN", "s3cret")
    monkeypatch.setenv("COSIGNER_API_KEY", "csk_x")
    bare = upstream_of(parse("--upstream-cmd", "python 'my server.py' --fast"))
    named = upstream_of(parse("--upstream-cmd", "python server.py", "--upstream-env", "SHOP_TOKEN"))
    assert not isinstance(bare, str) and not isinstance(named, str)
    assert (bare.command, bare.args, bare.env) == ("python", ["my server.py", "--fast"], None)
    assert named.env == {"SHOP_TOKEN": "s3cret"}


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--upstream-cmd", "  "], "--upstream-cmd is empty"),
        (["--upstream-cmd", "x", "--upstream-env", "COSIGNER_API_KEY"], "stay with the gateway"),
        (["--upstream-cmd", "x", "--upstream-env", "NOT_SET_ANYWHERE_42"], "NOT_SET_ANYWHERE_42: not set"),
    ],
)
def test_an_unusable_upstream_is_refused_naming_the_fix(argv: list[str], says: str) -> None:
    with pytest.raises(ValueError, match=says):
        upstream_of(parse(*argv))


def test_a_url_upstream_is_passed_as_is() -> None:
    assert upstream_of(parse("--upstream-url", "http://127.0.0.1:9000/mcp")) == "http://127.0.0.1:9000/mcp"


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("ftp://cosigner.example/inbox/", "is not an http(s) URL"),
        ("https://ada:pw@cosigner.example/inbox/", "no user name, password, query or fragment"),
        ("https://cosigner.example/inbox/?token=x", "never pre-authenticated"),
    ],
)
def test_an_inbox_url_that_could_authenticate_is_refused(url: str, says: str) -> None:
    with pytest.raises(ValueError, match=re.escape(says)):
        inbox_url(url)


def test_new_tools_defaults_to_ask_with_a_lock_file_and_needs_one(tmp_path: Path) -> None:
    lock = tmp_path / "tools.lock.json"
    assert pinning(parse("--upstream-cmd", "x", "--pin", str(lock))) == (lock, NewTools.ASK)
    assert pinning(parse("--upstream-cmd", "x", "--pin", str(lock), "--new-tools", "deny")) == (
        lock,
        NewTools.DENY,
    )
    assert pinning(parse("--upstream-cmd", "x")) == (None, NewTools.ASK)
    with pytest.raises(ValueError, match="--new-tools needs --pin FILE"):
        pinning(parse("--upstream-cmd", "x", "--new-tools", "allow"))
