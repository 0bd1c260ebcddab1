"""What an installed numa-agent may hold: the agent's packages and nothing of the
development tooling. Shared by the checks of `pip install` and of the .deb.

The list of harness modules is read from the checkout's devtools/, so a module
added there is covered without touching this file.
"""

from __future__ import annotations

import ast
import csv
from pathlib import Path

from tests.packaging.helpers import ROOT

PRODUCT_PACKAGES = frozenset({"agent", "topology", "proto"})
DEVELOPMENT_PACKAGES = frozenset({"devtools", "tests", "benchmarks"})
# Where the harness lived inside agent/ before it moved to devtools/.
FORMER_HARNESS_PATHS = frozenset(
    {"agent/containerd_env.py", "agent/oci_image.py", "agent/demo.py", "agent/criclient.py"}
)
# What makes a runtime a test double; the product's MemoryRuntime defines none of it.
FAULT_INJECTION = frozenset({"fail_next", "hold_next", "FaultyRuntime", "Gate", "CallRecord"})


def harness_module_names() -> frozenset[str]:
    """File names of the development modules (devtools/*.py but its __init__)."""
    names = frozenset(p.name for p in (ROOT / "devtools").glob("*.py") if p.name != "__init__.py")
    assert {"containerd.py", "oci_image.py", "demo.py", "fake_runtime.py"} <= names, names
    return names


def record_paths(site_packages: Path) -> list[str]:
    """The files numa-agent's wheel installed, from its dist-info RECORD."""
    (record,) = site_packages.glob("numa_agent-*.dist-info/RECORD")
    with record.open(newline="") as f:
        return [row[0] for row in csv.reader(f) if row]


def _defined_and_imported(source: str, filename: str) -> tuple[set[str], set[str]]:
    tree = ast.parse(source, filename)
    defined: set[str] = set()
    imported: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            defined.add(node.name)
        elif isinstance(node, ast.Import):
            imported.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            imported.add(node.module.split(".")[0])
    return defined, imported


def harness_problems(site_packages: Path) -> list[str]:
    """Every way development tooling got into this installed numa-agent; [] when clean.

    Checks the paths numa-agent's RECORD lists (allowed top levels only, no harness
    module by name) and the source of every installed module of ours (no fault
    injection defined, no development package imported); and that no development
    package sits in site-packages at all, whoever put it there.
    """
    problems: list[str] = []
    for top in sorted(DEVELOPMENT_PACKAGES):
        if (site_packages / top).exists():
            problems.append(f"{top}/ is installed")
    harness = harness_module_names()
    for path in record_paths(site_packages):
        parts = Path(path).parts
        top = parts[0]
        if top.endswith(".dist-info") or top == ".." or top == "bin":
            continue  # metadata; the console script (bin/ with --target, ../../bin in a venv)
        if top not in PRODUCT_PACKAGES:
            problems.append(f"{path}: outside {sorted(PRODUCT_PACKAGES)}")
        elif parts[-1] in harness or path in FORMER_HARNESS_PATHS:
            problems.append(f"{path}: a development module")
        elif path.endswith(".py"):
            defined, imported = _defined_and_imported((site_packages / path).read_text(), path)
            if faults := sorted(defined & FAULT_INJECTION):
                problems.append(f"{path}: defines fault injection {faults}")
            if dev := sorted(imported & DEVELOPMENT_PACKAGES):
                problems.append(f"{path}: imports {dev}")
    return problems
