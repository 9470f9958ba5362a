"""The habits that keep the code as the README's Layout section describes it, checked on every run."""

from __future__ import annotations

import ast
import importlib.util
import re
import subprocess
import sys
import tomllib
from importlib.metadata import packages_distributions, requires
from pathlib import Path
from typing import Any

import grimp  # import-linter's graph of our imports
import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def run(*command: str) -> subprocess.CompletedProcess[str]:
    """Run a tool of this virtualenv in the repository root."""
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)


def test_imports_keep_to_the_floors() -> None:
    result = run(str(BIN / "lint-imports"), "--no-cache")
    assert result.returncode == 0, result.stdout + result.stderr


# One worker runs both mypy tests, the whole tree first: the probe then finds mypy's cache
# (.mypy_cache) filled instead of checking storage and its libraries again at the same time.
@pytest.mark.slow
@pytest.mark.xdist_group("mypy")
def test_every_package_its_tests_and_the_benchmarks_are_mypy_strict_clean() -> None:
    result = run(sys.executable, "-m", "mypy")
    assert result.returncode == 0, result.stdout + result.stderr


def test_one_formatter_and_a_clean_lint() -> None:
    formatted = run(str(BIN / "ruff"), "format", "--check", ".")
    assert formatted.returncode == 0, formatted.stdout + formatted.stderr
    linted = run(str(BIN / "ruff"), "check", ".")
    assert linted.returncode == 0, linted.stdout + linted.stderr


def loaded_by(statement: str) -> list[str]:
    """The dev-only modules (emulators, the sandbox, uvicorn) loaded by running `statement`."""
    probe = (
        f"{statement}; import sys; "
        "print(' '.join(sorted(m for m in sys.modules if 'emulator' in m or 'sandbox' in m "
        "or m.split('.')[:2] in (['bot', 'dev'], ['bot', 'testing']) or m.split('.')[0] == 'uvicorn')))"
    )
    result = run(sys.executable, "-c", probe)
    assert result.returncode == 0, result.stderr
    return result.stdout.split()


def test_the_app_and_its_surfaces_load_no_emulator_sandbox_or_server() -> None:
    assert loaded_by("import bot.http.app, surfaces.slack, surfaces.sms") == []


def test_the_cli_loads_uvicorn_to_serve_and_nothing_dev_only() -> None:
    # `serve` imports the server when it runs; the other commands load none of it.
    assert loaded_by("import bot.cli.commands") == []
    loaded = loaded_by(
        "import bot.cli.commands, bot.http.app, surfaces.slack, surfaces.sms; "
        "from bot.http import Server, announce, bind, build_app"
    )
    assert "uvicorn" in loaded  # `cosigner serve` runs it
    assert [m for m in loaded if m.split(".")[0] != "uvicorn"] == []


def test_the_cli_loads_a_commands_libraries_only_when_it_runs() -> None:
    # Each `cosigner` command is a new process: `policy check` or `--help` must not pay for
    # the database, the HTTP stack or the models (about half a second of CPU each).
    heavy = ("sqlalchemy", "alembic", "pydantic", "httpx", "starlette", "uvicorn", "jwt", "cryptography")
    probe = f"import sys, bot.cli.commands; print(' '.join(m for m in {heavy!r} if m in sys.modules))"
    result = run(sys.executable, "-c", probe)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == []


def _names(specs: list[str]) -> set[str]:
    """Distribution names of dependency specifiers, normalised (`PyJWT[crypto]>=2` -> `pyjwt`)."""
    return {re.split(r"[\[<>=!~ ]", spec, maxsplit=1)[0].lower().replace("_", "-") for spec in specs}


def _modules_of(distributions: set[str]) -> set[str]:
    """The top-level modules the installed `distributions` provide."""
    return {
        module
        for module, dists in packages_distributions().items()
        if any(d.lower().replace("_", "-") in distributions for d in dists) and module.isidentifier()
    }


def _forbidden(project: dict[str, Any], source: str) -> set[str]:
    (floor,) = [
        c for c in project["tool"]["importlinter"]["contracts"] if c.get("source_modules") == [source]
    ]
    return set(floor["forbidden_modules"])


def test_contracts_floor_forbids_every_dependency_but_its_own() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    allowed = {"cosigner-sdk", "pydantic", "pyjwt", "rfc8785"}
    modules = _modules_of(_names(project["project"]["dependencies"]) - allowed)
    forbidden = _forbidden(project, "contracts")
    assert modules and modules <= forbidden, sorted(modules - forbidden)


def _needed_by(specs: list[str]) -> set[str]:
    """The distributions `specs` install, with their extras' and dependencies' (as installed here)."""
    needed: set[str] = set()
    todo = [Requirement(spec) for spec in specs]
    while todo:
        req = todo.pop()
        name = req.name.lower().replace("_", "-")
        if name in needed:
            continue
        needed.add(name)
        for line in requires(req.name) or []:
            dep = Requirement(line)
            if dep.marker is None or any(dep.marker.evaluate({"extra": e}) for e in req.extras or {""}):
                todo.append(dep)
    return needed


def test_the_sdk_floor_forbids_the_server_and_every_library_only_the_server_needs() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    sdk = tomllib.loads((ROOT / "sdk" / "python" / "pyproject.toml").read_text())
    # The core imports OpenTelemetry's API when it is there (the `otel` extra), nothing else optional.
    core = sdk["project"]["dependencies"] + sdk["project"]["optional-dependencies"]["otel"]
    extra = _names(project["project"]["dependencies"]) - _needed_by(core)
    # `opentelemetry` is a namespace the API (which the SDK may import) shares with the
    # server-only SDK and exporter; import-linter cannot forbid an external subpackage, and
    # tests/sdk/test_tracing.py runs the SDK with OpenTelemetry absent.
    modules = _modules_of(extra - {"cosigner-sdk"}) - _modules_of(_needed_by(core))
    server = set(project["tool"]["importlinter"]["root_packages"]) - {"cosigner"}
    forbidden = _forbidden(project, "cosigner")
    assert server == {"contracts", "bot", "storage", "surfaces"}
    assert modules and modules | server <= forbidden, sorted(modules | server - forbidden)


def test_mypy_covers_the_import_floors_the_tests_and_the_benchmarks() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    checked = {Path(path).name for path in project["tool"]["mypy"]["files"]}
    assert checked == set(project["tool"]["importlinter"]["root_packages"]) | {"tests", "bench"}
    assert all((ROOT / path).is_dir() for path in project["tool"]["mypy"]["files"])
    assert project["tool"]["mypy"]["strict"] is True and project["tool"]["mypy"]["mypy_path"] == "sdk/python"


def _imported_by(folder: Path) -> dict[str, set[str]]:
    """The top-level modules the Python files under `folder` import, outside the standard
    library and `cosigner` itself, each with the files that import it."""
    found: dict[str, set[str]] = {}
    for path in folder.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top not in ("cosigner", "__future__"):
                    found.setdefault(top, set()).add(str(path.relative_to(ROOT)))
    return found


def test_every_library_the_sdk_imports_is_declared() -> None:
    sdk = tomllib.loads((ROOT / "sdk" / "python" / "pyproject.toml").read_text())["project"]
    declared = _names(
        sdk["dependencies"] + [s for specs in sdk["optional-dependencies"].values() for s in specs]
    )
    provided = packages_distributions()
    undeclared = {
        module: sorted(files)
        for module, files in _imported_by(ROOT / "sdk" / "python" / "cosigner").items()
        if not any(d.lower().replace("_", "-") in declared for d in provided.get(module, []))
    }
    assert undeclared == {}, f"declare these in sdk/python/pyproject.toml: {undeclared}"


def test_every_bot_package_exports_what_its_all_names_and_loads_it_only_when_asked() -> None:
    probe = (
        "import importlib, pathlib, pkgutil\n"
        "packages = sorted(p.name for p in pathlib.Path('bot').iterdir() if (p / '__init__.py').is_file())\n"
        "for name in packages:\n"
        "    package = importlib.import_module('bot.' + name)\n"
        "    exported = getattr(package, '__all__', None)\n"
        "    assert exported, f'bot.{name} has no __all__'\n"
        "    for attr in exported:\n"
        "        getattr(package, attr)\n"
        "    modules = {m.name for m in pkgutil.iter_modules(package.__path__)}\n"
        "    clash = sorted(set(exported) & modules)\n"
        "    assert not clash, f'bot.{name} exports {clash}, also names of its modules'\n"
        "print(len(packages))\n"
    )
    result = run(sys.executable, "-c", probe)
    assert result.returncode == 0, result.stderr
    assert int(result.stdout) >= 12
    # Importing a package loads none of its modules until a name is asked for.
    lazy = run(
        sys.executable,
        "-c",
        "import sys, bot.approvals, bot.http, bot.policy; "
        "print(' '.join(m for m in sys.modules if m.count('.') >= 2 and m.startswith('bot.')))",
    )
    assert lazy.returncode == 0, lazy.stderr
    assert lazy.stdout.split() == []


# What a unit of work and a Database hold: storage's own, never reached from bot/.
_STORAGE_INSIDES = {"conn", "_writer", "_reader", "_sync_writer", "_sync_reader", "_group"}


def test_bot_never_reaches_inside_a_unit_of_work_or_the_database() -> None:
    reached = [
        f"{path.relative_to(ROOT)}:{node.lineno} {ast.unparse(node)}"
        for path in sorted((ROOT / "bot").rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text(), str(path)))
        if isinstance(node, ast.Attribute) and node.attr in _STORAGE_INSIDES
    ]
    assert reached == [], "bot hands a Work to storage's functions and never opens it"


@pytest.mark.xdist_group("mypy")
def test_mypy_refuses_anything_but_a_unit_of_work_where_storage_wants_one(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import sqlalchemy as sa\n"
        "from storage import ledger\n"
        "from storage.database import Database\n"
        "async def f(db: Database, conn: sa.Connection) -> None:\n"
        "    ledger.load(conn, 'apv_1')\n"
        "    await db.run_read(lambda conn: conn.execute(sa.text('SELECT 1')))\n"
    )
    result = run(sys.executable, "-m", "mypy", str(probe))
    assert result.returncode == 1, result.stdout + result.stderr
    assert 'incompatible type "Connection"; expected "Work"' in result.stdout, result.stdout
    assert '"Work" has no attribute "execute"' in result.stdout, result.stdout


# Import cycles between our modules: each module must load without needing one that needs
# it. grimp finds every import; a cycle counts the ones that run when a module loads (at its
# top, in a class body, under `if` or `try`), not those inside functions, which run later,
# nor those under `if TYPE_CHECKING`, which never run. A `bot` package's `__init__` imports
# nothing itself and hands out each name from its module on first use (`bot.lazy_exports`):
# `from bot.policy import Policy` at the top of a module loads `bot.policy.rules` then and
# there, so the import counts as one of that module (without this, every cycle through a
# package's names would be invisible, since the `__init__` imports none of its modules).
CYCLE_FREE = ("bot", "storage", "surfaces", "contracts")


def _top_level_imports(tree: ast.Module) -> dict[int, ast.Import | ast.ImportFrom]:
    """The import statements that run when the module loads, by their first line."""
    found: dict[int, ast.Import | ast.ImportFrom] = {}
    todo: list[ast.AST] = list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            found[node.lineno] = node
        elif isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            todo += node.orelse
        elif not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            todo += ast.iter_child_nodes(node)
    return found


def _lazy_homes(tree: ast.Module) -> dict[str, str]:
    """A package's lazily exported names and the module each comes from (`lazy_exports`'s map)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and ast.unparse(node.func) == "lazy_exports" and len(node.args) == 3:
            where: dict[str, list[str]] = ast.literal_eval(node.args[2])
            return {name: module for module, names in where.items() for name in names}
    return {}


def import_graph(*packages: str) -> dict[str, set[str]]:
    """Each module of `packages` and the modules of `packages` it loads as it loads."""
    graph = grimp.build_graph(*packages, exclude_type_checking_imports=True, cache_dir=None)
    trees = {}
    for module in graph.modules:
        spec = importlib.util.find_spec(module)
        assert spec is not None and spec.origin is not None, module
        trees[module] = ast.parse(Path(spec.origin).read_text(), spec.origin)
    homes = {module: _lazy_homes(tree) for module, tree in trees.items()}
    edges: dict[str, set[str]] = {module: set() for module in graph.modules}
    for module, tree in trees.items():
        statements = _top_level_imports(tree)
        for imported in graph.find_modules_directly_imported_by(module):
            for detail in graph.get_import_details(importer=module, imported=imported):
                statement = statements.get(detail["line_number"])
                if statement is None:
                    continue  # inside a function, or only for the type checker
                edges[module].add(imported)
                if isinstance(statement, ast.ImportFrom) and homes.get(imported):
                    edges[module] |= {
                        homes[imported][a.name] for a in statement.names if a.name in homes[imported]
                    }
    return edges


def import_cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Every set of modules that import each other (strongly connected, Tarjan), each as one
    cycle through them, sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for other in sorted(edges[module]):
            if other not in index:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            members = stack[stack.index(module) :]
            del stack[stack.index(module) :]
            if len(members) > 1:
                cycles.append(_cycle_through(sorted(members), edges))

    for module in sorted(edges):
        if module not in index:
            visit(module)
    return sorted(cycles)


def _cycle_through(members: list[str], edges: dict[str, set[str]]) -> list[str]:
    """One cycle from the first of `members` back to it, inside them (breadth first)."""
    start, inside = members[0], set(members)
    came: dict[str, str] = {}
    todo = [start]
    while todo:
        module = todo.pop(0)
        for other in sorted(edges[module] & inside):
            if other == start:
                path = [module]
                while path[-1] != start:
                    path.append(came[path[-1]])
                return [*reversed(path), start]
            if other not in came:
                came[other] = module
                todo.append(other)
    raise AssertionError(f"no cycle through {members}")


def test_no_module_of_ours_imports_one_that_imports_it() -> None:
    cycles = import_cycles(import_graph(*CYCLE_FREE))
    assert cycles == [], "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)


def test_a_cycle_counts_the_imports_that_run_as_a_module_loads(tmp_path: Path) -> None:
    # cyc.a -> cyc.b through cyc.kinds' lazy export, cyc.b -> cyc.a at the top: a cycle; the
    # imports of cyc.a inside a function and under TYPE_CHECKING are none.
    pkg = tmp_path / "cyc"
    (pkg / "kinds").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "kinds" / "__init__.py").write_text(
        "from bot import lazy_exports\n"
        "__all__ = ['B']\n"
        "__getattr__ = lazy_exports(__name__, __all__, {'cyc.kinds.b': ['B']})\n"
    )
    (pkg / "kinds" / "b.py").write_text("import cyc.a\nclass B: ...\n")
    (pkg / "a.py").write_text("from cyc.kinds import B\n")
    (pkg / "c.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from cyc.d import D\n"
        "def f() -> None:\n    from cyc.d import D\n"
    )
    (pkg / "d.py").write_text("import cyc.c\nclass D: ...\n")
    sys.path.insert(0, str(tmp_path))
    try:
        edges = import_graph("cyc")
    finally:
        sys.path.remove(str(tmp_path))
        for name in [m for m in sys.modules if m == "cyc" or m.startswith("cyc.")]:
            del sys.modules[name]
    assert edges["cyc.a"] == {"cyc.kinds", "cyc.kinds.b"}
    assert edges["cyc.c"] == set()
    assert import_cycles(edges) == [["cyc.a", "cyc.kinds.b", "cyc.a"]]


# Storage's mechanics, which bot/ must not name: the replica's cache of pending approvals
# (`storage.known`), a transaction mode of `Database.run_write`, the database's schema.
_STORAGE_MECHANICS = {"known", "single_write", "optimistic"}
# None does: bot says what it wants stored (`db.create(...)`, `db.answer(...)`,
# `db.pending_copy(...)`) and storage chooses these itself.
_STILL_NAMED: dict[str, list[str]] = {}


def storage_mechanics_named(path: Path) -> list[str]:
    """What of storage's mechanics a module names: `known` (an attribute, a name or a module
    imported), `single_write=`/`optimistic=` and a database's `.schema`, in source order."""
    found: list[tuple[int, int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        where = (getattr(node, "lineno", 0), getattr(node, "col_offset", 0))
        if isinstance(node, ast.Attribute) and node.attr == "known":
            found.append((*where, ast.unparse(node)))
        elif isinstance(node, ast.Attribute) and node.attr == "schema":
            base = node.value
            if (isinstance(base, ast.Name) and base.id == "db") or (
                isinstance(base, ast.Attribute) and base.attr == "db"
            ):
                found.append((*where, ast.unparse(node)))
        elif isinstance(node, ast.keyword) and node.arg in _STORAGE_MECHANICS:
            shown = ast.unparse(node.value) if isinstance(node.value, ast.Constant) else "..."
            found.append((*where, f"{node.arg}={shown}"))
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("storage"):
            names = {node.module or "", *(f"{node.module}.{a.name}" for a in node.names)}
            found.extend((*where, name) for name in sorted(names) if name == "storage.known")
        elif isinstance(node, ast.Import):
            found.extend((*where, a.name) for a in node.names if a.name == "storage.known")
    return [what for *_, what in sorted(found)]


def test_bot_names_no_storage_mechanics() -> None:
    named = {
        str(path.relative_to(ROOT)): found
        for path in sorted((ROOT / "bot").rglob("*.py"))
        if (found := storage_mechanics_named(path))
    }
    assert named == _STILL_NAMED, (
        "bot says what it wants stored; storage chooses the cache, the transaction mode and "
        "the schema (say it with a storage function, or a Database method, instead)"
    )


def test_naming_a_storage_mechanic_is_found(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(
        "from storage import known\n"
        "async def f(db, tx):\n"
        "    db.known.get('apv_1')\n"
        "    await db.run_write(tx, single_write=True, optimistic=tx)\n"
        "    return self.db.schema, tx.schema\n"
    )
    assert storage_mechanics_named(probe) == [
        "storage.known",
        "db.known",
        "single_write=True",
        "optimistic=...",
        "self.db.schema",
    ]


def test_no_property_test_has_a_wall_clock_deadline() -> None:
    from hypothesis import settings

    assert settings.default is not None and settings.default.deadline is None, (
        "a Hypothesis deadline fails a property test on a loaded machine; tests/conftest.py "
        "loads the 'cosigner' profile, which has none"
    )
