"""The SDK alone needs no agent framework: only the adapter modules import one."""

from __future__ import annotations

import subprocess
import sys

import grimp

FRAMEWORKS = {"langchain", "langchain_core", "langgraph", "agents", "openai", "pydantic_ai", "temporalio"}
ADAPTERS = {f"cosigner.adapters.{name}" for name in ("langchain", "openai_agents", "pydantic_ai", "temporal")}


def core_modules(graph: grimp.ImportGraph) -> set[str]:
    """Every module of the SDK but the framework adapters."""
    return {m for m in graph.find_descendants("cosigner") | {"cosigner"} if m not in ADAPTERS}


def test_no_core_module_imports_a_framework_even_indirectly() -> None:
    graph = grimp.build_graph("cosigner", include_external_packages=True)
    present = FRAMEWORKS & graph.modules
    assert present >= {"langchain", "agents", "pydantic_ai", "temporalio"}  # the adapters do import them
    chains = {
        (module, framework)
        for module in core_modules(graph)
        for framework in present
        if graph.find_shortest_chain(importer=module, imported=framework) is not None
    }
    assert chains == set()


def test_importing_the_sdk_loads_no_framework() -> None:
    probe = (
        "import pkgutil, importlib, sys, cosigner, cosigner.adapters\n"
        f"adapters = {sorted(ADAPTERS)!r}\n"
        "for m in pkgutil.walk_packages(cosigner.__path__, 'cosigner.'):\n"
        "    if m.name not in adapters: importlib.import_module(m.name)\n"
        "print(' '.join(sorted({n.split('.')[0] for n in sys.modules})))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert FRAMEWORKS.isdisjoint(done.stdout.split())
