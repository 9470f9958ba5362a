"""axe-core in Chromium, for the inbox's browser tests, and the phone-width check.

axe-core comes from the npm registry, pinned with its integrity hash in
`tests/a11y/package-lock.json` (installed into `tests/a11y/node_modules`, never shipped):
the version is reviewable and `npm ci` verifies what it installs, and the repository keeps
no minified copy. The first test to need it runs `npm ci` when npm is on PATH.
"""

from __future__ import annotations

import shutil
import subprocess
from functools import cache
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parents[1] / "a11y"
AXE = HERE / "node_modules" / "axe-core" / "axe.min.js"
BLOCKING = ("serious", "critical")
PHONE = {"width": 390, "height": 844}  # an iPhone 12-15's CSS pixels


@cache
def axe_source() -> str:
    """axe.min.js as `npm ci` installed it from the lockfile, or a skip naming what is missing."""
    if not AXE.exists():
        npm = shutil.which("npm")
        if npm is None:
            pytest.skip("axe-core needs npm: install Node.js, then `npm ci --prefix tests/a11y`")
        subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund", "--prefix", str(HERE)],
            check=True,
            capture_output=True,
            timeout=300,
        )
    return AXE.read_text(encoding="utf-8")


async def violations(page: Any) -> list[dict[str, Any]]:
    """The page's serious and critical axe-core violations, each with the elements it found.

    axe is evaluated through the DevTools protocol, which the page's Content-Security-Policy
    (scripts from its own origin only) does not govern: the page is checked as served."""
    if not await page.evaluate("() => typeof window.axe === 'object'"):
        await page.evaluate(axe_source())
    found: list[dict[str, Any]] = await page.evaluate(
        """async () => (await axe.run(document, {resultTypes: ['violations']})).violations.map(v => ({
            id: v.id, impact: v.impact, help: v.help,
            nodes: v.nodes.map(n => n.target.join(' ') + ': ' + n.failureSummary)}))"""
    )
    return [v for v in found if v["impact"] in BLOCKING]


async def scroll_width(page: Any) -> int:
    """How wide the page's content is: above the viewport's width, it scrolls sideways."""
    width: int = await page.evaluate("() => document.documentElement.scrollWidth")
    return width
