"""docs/architecture.md's package table and walk are the tree as it is (`tests/docs_map.py`;
regenerate them with `python -m tests.docs_map --write`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.docs_map import ARCHITECTURE, BLOCK, generated, packages_table, render, stale


async def test_the_architecture_map_is_the_tree_as_it_is() -> None:
    doc = ARCHITECTURE.read_text()
    written = {m.group("name"): m.group("body") for m in BLOCK.finditer(doc)}
    assert written == await generated(), (
        "docs/architecture.md is out of date: run `python -m tests.docs_map --write`"
    )


def test_the_package_table_counts_modules_lines_and_the_largest(tmp_path: Path) -> None:
    (tmp_path / "bot" / "kind").mkdir(parents=True)
    (tmp_path / "bot" / "kind" / "__init__.py").write_text("x = 1\n" * 50)  # exports: not counted
    (tmp_path / "bot" / "kind" / "big.py").write_text("x = 1\n" * 1200)
    (tmp_path / "bot" / "kind" / "small.py").write_text("x = 1\n" * 3)
    (tmp_path / "contracts").mkdir()
    (tmp_path / "contracts" / "enums.py").write_text("")
    assert packages_table(tmp_path).splitlines()[2:] == [
        "| `contracts/` | 1 | 0 | `enums.py` 0 |",
        "| `bot/kind/` | 2 | 1,203 | `big.py` 1,200 |",
        "| all of them | 3 | 1,203 | |",
    ]


def test_generated_parts_are_replaced_between_their_markers_and_nothing_else() -> None:
    doc = "a\n<!-- generated: packages -->\nold\n<!-- end -->\nb\n<!-- generated: walk -->\n<!-- end -->\n"
    parts = {"packages": "new\n", "walk": "steps\n"}
    assert stale(doc, parts) == ["packages", "walk"]
    assert render(doc, parts) == (
        "a\n<!-- generated: packages -->\nnew\n<!-- end -->\n"
        "b\n<!-- generated: walk -->\nsteps\n<!-- end -->\n"
    )
    with pytest.raises(ValueError, match=r"expected \['packages', 'walk'\]"):
        render("a\n<!-- generated: packages -->\nold\n<!-- end -->\n", parts)
