"""`./run` on a fresh checkout: it says what it is doing, the install prints no warnings, and
the next run starts without pip."""

from __future__ import annotations

import shutil
import subprocess
import sysconfig
import venv
from pathlib import Path

import pytest

from tests.processes import REPO


@pytest.mark.slow
def test_first_run_says_what_it_does_and_installs_without_warnings(tmp_path: Path) -> None:
    copy = tmp_path / "checkout"
    files = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    for name in files:
        if (REPO / name).is_file():
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, copy / name)
    # A fresh .venv that already sees this environment's dependencies, so only Cosigner
    # itself is built and installed (the real first run also downloads them).
    venv.create(copy / ".venv", with_pip=True)
    site = Path(sysconfig.get_path("purelib", vars={"base": str(copy / ".venv")}))
    (site / "dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")

    done = subprocess.run(
        ["./run", "cosigner", "--help"], cwd=copy, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: cosigner"), done.stdout  # progress stays on stderr
    assert (
        "./run: installing Cosigner and its dependencies into .venv (first run: about 2 minutes"
        in done.stderr
    )
    # Each step and what pip does in it, one line each (the editable builds here; on a real
    # first run also each package collected, numbered).
    for said in ("./run: 1/2: the agent SDK", "./run:   Building editable for cosigner-sdk", "./run: 2/2"):
        assert said in done.stderr, done.stderr
    assert (copy / ".venv" / "install.log").read_text().count("Successfully installed") == 1
    for noise in ("BuildBackendWarning", "Editable install", "!!", "Traceback"):
        assert noise not in done.stderr, done.stderr
    pth = next(site.glob("__editable__.cosigner-*.pth"))
    assert pth.read_text().strip() == str(copy), "a plain path entry, no import hook"

    # The second run calls no pip: with pip gone from the venv it still starts, silently.
    (site / "pip").rename(site / "pip-gone")
    again = subprocess.run(
        ["./run", "cosigner", "--help"], cwd=copy, capture_output=True, text=True, timeout=60
    )
    assert again.returncode == 0 and again.stdout == done.stdout and again.stderr == "", again.stderr
