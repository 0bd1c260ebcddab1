"""The product imports no development tooling: nothing under agent/, topology/ or proto/
names devtools, tests or benchmarks (which the package does not install), and the
placement policy and kubelet's encodings load without gRPC."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PRODUCT = ("agent", "topology", "proto")
DEVELOPMENT = frozenset({"devtools", "tests", "benchmarks"})


def imported_modules(tree: ast.Module) -> list[str]:
    """Every module an import statement names, anywhere in the file (inside functions too)."""
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append(node.module)
    return found


def development_imports(tree: ast.Module) -> list[str]:
    return [name for name in imported_modules(tree) if name.split(".")[0] in DEVELOPMENT]


def product_files() -> list[Path]:
    files = sorted(f for package in PRODUCT for f in (ROOT / package).rglob("*.py"))
    assert len(files) > 50, files  # the walk found the code
    return files


def test_no_product_module_imports_development_tooling() -> None:
    offenders = {
        str(f.relative_to(ROOT)): names
        for f in product_files()
        if (names := development_imports(ast.parse(f.read_text(), str(f))))
    }
    assert offenders == {}


@pytest.mark.parametrize(
    ("source", "found"),
    [
        ("from devtools.criclient import CRIClient", ["devtools.criclient"]),
        ("def f():\n    import tests.node.conftest", ["tests.node.conftest"]),
        ("import benchmarks, json", ["benchmarks"]),
        ("from agent.kubelet import MIN_SHARES\nfrom . import sibling", []),
    ],
)
def test_the_check_sees_every_import_form(source: str, found: list[str]) -> None:
    assert development_imports(ast.parse(source)) == found


def loaded_after_importing(modules: list[str]) -> set[str]:
    """Top-level packages in sys.modules of a fresh interpreter after importing `modules`."""
    script = (
        "import importlib, sys\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        "print('\\n'.join(sorted({m.split('.')[0] for m in sys.modules})))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return set(done.stdout.split())


def test_importing_every_product_module_loads_no_development_tooling() -> None:
    # Catches what the source check cannot: an import made through another module.
    modules = [
        ".".join(f.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        for f in product_files()
    ]
    loaded = loaded_after_importing(modules)
    assert "agent" in loaded and "topology" in loaded and "proto" in loaded
    assert loaded & DEVELOPMENT == set()


def test_the_policy_and_kubelets_encodings_load_without_grpc() -> None:
    loaded = loaded_after_importing(
        ["agent.policy.policy", "agent.policy.request", "agent.kubelet"]
    )
    assert "agent" in loaded and "google" in loaded  # protobuf messages: yes
    assert "grpc" not in loaded


def test_the_state_layer_never_imports_the_node_layer() -> None:
    """agent/state/ is below agent/node/ (the node agent saves through it): an import
    the other way is a cycle between layers."""
    offenders = {
        str(f.relative_to(ROOT)): [
            n for n in imported_modules(ast.parse(f.read_text())) if n.startswith("agent.node")
        ]
        for f in sorted((ROOT / "agent" / "state").rglob("*.py"))
    }
    assert {path: names for path, names in offenders.items() if names} == {}
