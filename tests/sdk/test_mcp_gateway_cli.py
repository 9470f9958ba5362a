"""The gateway's command line: what the upstream process is started with, and refusals."""

from __future__ import annotations

import argparse

import pytest

from cosigner.mcp_gateway.cli import add_arguments, upstream_of


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
