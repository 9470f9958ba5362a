"""The packages of `bot/` export their names lazily (`bot.lazy_exports`); an export that
shares its name with one of the package's modules is refused when the package loads,
because importing that module would silently replace the export with the module."""

from __future__ import annotations

import importlib
import pkgutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import bot


@pytest.fixture
def on_path(tmp_path: Path) -> Iterator[Path]:
    sys.path.insert(0, str(tmp_path))
    try:
        yield tmp_path
    finally:
        sys.path.remove(str(tmp_path))
        for name in [m for m in sys.modules if m.startswith("lazy_pkg")]:
            del sys.modules[name]


def write_package(root: Path, exported: str) -> None:
    pkg = root / "lazy_pkg"
    pkg.mkdir()
    (pkg / "replay.py").write_text("def replay() -> str:\n    return 'the function'\n")
    (pkg / "__init__.py").write_text(
        "from bot import lazy_exports\n"
        f"__all__ = [{exported!r}]\n"
        f"__getattr__ = lazy_exports(__name__, __all__, {{'lazy_pkg.replay': [{exported!r}]}})\n"
    )


def test_an_export_named_like_a_module_of_its_package_is_refused(on_path: Path) -> None:
    write_package(on_path, "replay")
    with pytest.raises(ImportError, match="replay names both an export and a module"):
        importlib.import_module("lazy_pkg")


def test_every_package_of_bot_loads_its_exports_and_each_is_what_its_module_defines() -> None:
    for info in pkgutil.iter_modules(bot.__path__):
        if not info.ispkg:
            continue
        package = importlib.import_module(f"bot.{info.name}")
        for name in getattr(package, "__all__", []):
            value = getattr(package, name)
            assert not isinstance(value, type(bot)), f"bot.{info.name}.{name} is a module"
