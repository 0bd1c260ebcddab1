"""Shared by the packaging tests: the CI-aware skip, loading packaging/*.py, unit files.

packaging/ is not importable as a package (the name is taken by the `packaging`
library), so its scripts are loaded from their files.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() not in ("", "0", "false")


def require(missing: list[str], what: str) -> None:
    """Skip when this host lacks something; in CI (env CI set) fail instead."""
    if not missing:
        return
    reason = f"{what} needs " + "; ".join(missing)
    if in_ci():
        pytest.fail(f"{reason} (CI is set, so this fails instead of skipping)", pytrace=False)
    pytest.skip(reason)


def load_script(name: str) -> ModuleType:
    """packaging/<name>.py as a module."""
    key = f"numa_agent_packaging_{name}"
    if key in sys.modules:
        return sys.modules[key]
    spec = importlib.util.spec_from_file_location(key, ROOT / "packaging" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[key] = module  # dataclasses look their module up while being defined
    spec.loader.exec_module(module)
    return module


UnitFile = dict[str, dict[str, list[str]]]


def parse_unit(text: str) -> UnitFile:
    """A systemd unit or drop-in: section -> key -> every value given, in order.

    Handles comments and backslash continuation lines, which is all these files use.
    """
    sections: UnitFile = {}
    current: dict[str, list[str]] | None = None
    pending = ""
    for raw in text.splitlines():
        line = pending + raw.strip()
        pending = ""
        if not line or line.startswith(("#", ";")):
            continue
        if line.endswith("\\"):
            pending = line[:-1] + " "
            continue
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1], {})
            continue
        key, sep, value = line.partition("=")
        if not sep or current is None:
            raise ValueError(f"not a unit file line: {raw!r}")
        current.setdefault(key.strip(), []).append(value.strip())
    return sections


def words(unit: UnitFile, section: str, key: str) -> list[str]:
    """A list-valued setting (After=, CapabilityBoundingSet=, ...) split into its words."""
    return [word for value in unit.get(section, {}).get(key, []) for word in value.split()]


def single(unit: UnitFile, section: str, key: str) -> str:
    """A setting given exactly once."""
    values = unit.get(section, {}).get(key, [])
    assert len(values) == 1, f"[{section}] {key}= given {len(values)} times: {values}"
    return values[0]
