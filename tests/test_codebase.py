"""The habits that keep the code as docs/architecture.md describes it, checked on every run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def run(*command: str) -> subprocess.CompletedProcess[str]:
    """Run a tool of this virtualenv in the repository root."""
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)


def test_imports_keep_to_the_floors() -> None:
    result = run(str(BIN / "lint-imports"), "--no-cache")
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_package_is_mypy_strict_clean() -> None:
    result = run(sys.executable, "-m", "mypy")
    assert result.returncode == 0, result.stdout + result.stderr


def test_one_formatter_and_a_clean_lint() -> None:
    formatted = run(str(BIN / "ruff"), "format", "--check", ".")
    assert formatted.returncode == 0, formatted.stdout + formatted.stderr
    linted = run(str(BIN / "ruff"), "check", ".")
    assert linted.returncode == 0, linted.stdout + linted.stderr
