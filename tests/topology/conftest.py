"""Fixtures: fake sysfs roots written into tmp_path."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from topology.fakesysfs import MachineSpec, write_shape, write_sysfs
from topology.sysfs import read_machine
from topology.tree import Machine


@pytest.fixture(scope="session")
def shape_root(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """The fake sysfs root of a named shape, written once per test session."""
    roots: dict[str, Path] = {}

    def build(name: str) -> Path:
        if name not in roots:
            roots[name] = write_shape(name, tmp_path_factory.mktemp(name) / "sys")
        return roots[name]

    return build


@pytest.fixture
def shape_machine(shape_root: Callable[[str], Path]) -> Callable[[str], Machine]:
    """Read a named shape's fake sysfs (written once per session)."""

    def build(name: str) -> Machine:
        return read_machine(shape_root(name))

    return build


@pytest.fixture
def spec_root(tmp_path: Path) -> Callable[[MachineSpec], Path]:
    """Write a MachineSpec under tmp_path; returns the fake sysfs root."""
    counter = iter(range(1_000_000))

    def build(spec: MachineSpec) -> Path:
        return write_sysfs(spec, tmp_path / f"m{next(counter)}" / "sys")

    return build
