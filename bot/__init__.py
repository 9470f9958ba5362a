"""Cosigner's server core, in packages by what they do (see docs/architecture.md).

Each package's `__init__` names what the others use (`__all__`) and imports it only when
asked (`lazy_exports`), so importing one package, or one module of it, loads no more than
that module needs: the CLI starts without the app, and the serving path never loads the
sandbox.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Mapping, Sequence


def lazy_exports(
    package: str, exported: Sequence[str], where: Mapping[str, Sequence[str]]
) -> Callable[[str], object]:
    """A module `__getattr__` for `package` that imports each exported name from its module
    (`where`: module -> names) the first time it is asked for. `exported` (the package's
    `__all__`) must name exactly the names of `where`, so the two cannot drift apart."""
    home = {name: module for module, names in where.items() for name in names}
    if sorted(home) != sorted(exported) or len(home) != sum(len(n) for n in where.values()):
        raise ImportError(f"{package}: __all__ and its lazy exports name different things")
    namespace = importlib.import_module(package).__dict__
    # An export named like one of the package's modules would be replaced by that module the
    # moment anything imports it (Python sets the submodule as the package's attribute).
    submodules = {m.name for m in pkgutil.iter_modules(namespace.get("__path__", []))}
    if clashes := sorted(submodules & set(home)):
        raise ImportError(f"{package}: {', '.join(clashes)} names both an export and a module; rename one")

    def __getattr__(name: str) -> object:
        module = home.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value  # asked once: later lookups find it without this hook
        return value

    return __getattr__
