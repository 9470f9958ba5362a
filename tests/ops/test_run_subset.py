"""`./run test` on a subset (`./run test tests/x -q`) ends with pytest's "N passed" line: a
`-q` given on the command line must not add to one in the configuration (that made it
-qq, which hides the line)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _checkout(tmp_path: Path) -> Path:
    """`run` and the pytest configuration, a venv that is the running interpreter, two tests."""
    copy = tmp_path / "checkout"
    (copy / "sdk" / "python").mkdir(parents=True)
    shutil.copy(ROOT / "run", copy / "run")
    shutil.copy(ROOT / "pyproject.toml", copy / "pyproject.toml")
    shutil.copy(ROOT / "sdk" / "python" / "pyproject.toml", copy / "sdk" / "python" / "pyproject.toml")
    tests = copy / "tests" / "sample"
    tests.mkdir(parents=True)
    (tests / "test_sample.py").write_text("def test_one():\n    pass\n\n\ndef test_two():\n    pass\n")
    venv = copy / ".venv" / "bin"
    venv.mkdir(parents=True)
    python = venv / "python"
    python.write_text(f'#!/bin/sh\nexec {sys.executable} "$@"\n')
    python.chmod(0o755)
    (copy / ".venv" / ".installed").touch()  # newer than both pyproject.toml files: no pip
    return copy


def _run(copy: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "COSIGNER_TEST_WORKERS"))}
    return subprocess.run(
        ["./run", "test", *args], cwd=copy, capture_output=True, text=True, env=env, timeout=300
    )


def test_a_named_subset_with_q_ends_with_the_passed_line(tmp_path: Path) -> None:
    copy = _checkout(tmp_path)
    done = _run(copy, "tests/sample", "-q", "-p", "no:cacheprovider")
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"^2 passed in [0-9.]+s", done.stdout, re.MULTILINE), done.stdout
