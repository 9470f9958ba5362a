"""The parts of docs/architecture.md computed from the tree: its package table and the
walk's module counts, each between `<!-- generated: NAME -->` and `<!-- end -->`.

    .venv/bin/python -m tests.docs_map            # check: exit 1 and name the stale parts
    .venv/bin/python -m tests.docs_map --write    # rewrite them in place (also `./run docs --write`)

`tests/test_docs_map.py` fails while the document differs from what this computes, so a
module added, removed or grown shows up in the map or in a failing test.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
from collections import Counter
from collections.abc import Mapping
from pathlib import Path

from tests.walk import package_of, walk

ROOT = Path(__file__).resolve().parent.parent
ARCHITECTURE = ROOT / "docs" / "architecture.md"
FLOORS = ("contracts", "storage", "surfaces", "bot")  # bottom to top, as the layers go
BLOCK = re.compile(r"(<!-- generated: (?P<name>[a-z]+) -->\n)(?P<body>.*?)(<!-- end -->)", re.DOTALL)
STEP_TITLES = {
    "create": "create: `POST /v1/approvals`, a person asked on the dashboard",
    "decide": "decision: `POST /v1/approvals/{id}/decision` with an approver key",
    "read": "read: `GET /v1/approvals/{id}` of the decided approval",
}


def _lines(path: Path) -> int:
    """Lines as `wc -l` counts them."""
    return path.read_bytes().count(b"\n")


def packages_table(root: Path = ROOT) -> str:
    """Every folder of Python modules in the four floors: its modules (not counting the
    `__init__.py`, which names a package's exports), their lines, and the largest."""
    rows = ["| package | modules | lines | largest module |", "| --- | ---: | ---: | --- |"]
    total_modules = total_lines = 0
    for floor in FLOORS:
        folders = sorted({p.parent for p in (root / floor).rglob("*.py") if "__pycache__" not in p.parts})
        for folder in folders:
            modules = sorted(p for p in folder.glob("*.py") if p.name != "__init__.py")
            if not modules:
                continue
            sizes = {p.name: _lines(p) for p in modules}
            largest = max(sizes, key=lambda name: (sizes[name], name))
            lines = sum(sizes.values())
            total_modules += len(modules)
            total_lines += lines
            name = folder.relative_to(root).as_posix()
            rows.append(f"| `{name}/` | {len(modules)} | {lines:,} | `{largest}` {sizes[largest]:,} |")
    rows.append(f"| all of them | {total_modules} | {total_lines:,} | |")
    return "\n".join(rows) + "\n"


def walk_table(steps: Mapping[str, set[str]]) -> str:
    """The modules of ours each step of the walk ran, in `bot/` and by `bot/`'s packages,
    then the `bot/` modules of each step by name."""
    every: set[str] = set().union(*steps.values())
    rows = [
        "| step | modules of ours | in `bot/` | `bot/`'s packages |",
        "| --- | ---: | ---: | --- |",
    ]
    named = [(STEP_TITLES[step], found) for step, found in steps.items()]
    for title, found in [*named, ("the three steps together", every)]:
        ours = sorted(m for m in found if m.startswith("bot."))
        by_package = Counter(package_of(m).removeprefix("bot.") for m in ours)
        packages = ", ".join(f"`{p}` {n}" for p, n in sorted(by_package.items()))
        rows.append(f"| {title} | {len(found)} | {len(ours)} | {packages} |")
    outside = Counter(package_of(m) for m in every if not m.startswith("bot."))
    lines = [
        *rows,
        "",
        "Outside `bot/`, over the three steps: "
        + ", ".join(f"`{p}` {n}" for p, n in sorted(outside.items()))
        + " (`cosigner` is the SDK's protocol modules).",
        "",
    ]
    lines += [
        f"- {STEP_TITLES[step].split(':')[0]}: "
        + ", ".join(f"`{m}`" for m in sorted(m for m in found if m.startswith("bot.")))
        for step, found in steps.items()
    ]
    return "\n".join(lines) + "\n"


async def generated() -> dict[str, str]:
    """Each generated part of the document, by its marker's name, computed now."""
    return {"packages": packages_table(), "walk": walk_table(await walk())}


def render(doc: str, parts: Mapping[str, str]) -> str:
    """`doc` with the body of each generated part replaced; every part must be there once,
    and every marker in the document must name a part."""
    found = [m.group("name") for m in BLOCK.finditer(doc)]
    if sorted(found) != sorted(parts):
        raise ValueError(
            f"docs/architecture.md has generated parts {sorted(found)}, expected {sorted(parts)}: "
            "each as <!-- generated: NAME --> … <!-- end --> on lines of their own"
        )
    return BLOCK.sub(lambda m: m.group(1) + parts[m.group("name")] + m.group(4), doc)


def stale(doc: str, parts: Mapping[str, str]) -> list[str]:
    """The names of the parts whose text in `doc` differs from `parts`."""
    return [m.group("name") for m in BLOCK.finditer(doc) if m.group("body") != parts.get(m.group("name"))]


def main() -> int:
    """Check the document, or rewrite its generated parts with `--write`."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--write", action="store_true", help="rewrite the generated parts in place")
    args = parser.parse_args()
    doc = ARCHITECTURE.read_text()
    parts = asyncio.run(generated())
    updated = render(doc, parts)
    if args.write:
        if updated != doc:
            ARCHITECTURE.write_text(updated)
        print(f"{ARCHITECTURE.relative_to(ROOT)}: {', '.join(stale(doc, parts)) or 'nothing'} rewritten")
        return 0
    if updated != doc:
        print(
            f"{ARCHITECTURE.relative_to(ROOT)}: {', '.join(stale(doc, parts))} out of date; "
            "run `python -m tests.docs_map --write`",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
