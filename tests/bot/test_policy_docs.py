"""docs/policy.md: every `$ cosigner …` example runs against the sandbox policy as shown."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from bot.cli import main

REPO = Path(__file__).resolve().parents[2]
BLOCK = re.compile(r"```console\n(.*?)```", re.S)


def examples() -> list[tuple[str, str]]:
    found = []
    for block in BLOCK.findall((REPO / "docs" / "policy.md").read_text()):
        command, _, output = block.partition("\n")
        assert command.startswith("$ cosigner "), command
        found.append((command[2:], output))
    return found


def test_the_page_has_runnable_examples() -> None:
    assert len(examples()) >= 3


@pytest.mark.parametrize(("command", "output"), examples(), ids=lambda v: v[:60])
def test_each_example_prints_what_the_page_shows(
    command: str, output: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(REPO)
    assert main(shlex.split(command)[1:]) == 0
    assert capsys.readouterr().out == output
