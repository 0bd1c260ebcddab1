"""Fixtures: fake sysfs roots written into tmp_path."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from topology.fakesysfs import MachineSpec, write_shape, write_sysfs
from topology.sysfs import read_machine
from topology.tree import Machine


@pytest.fixture
def shape_machine(tmp_path: Path) -> Callable[[str], Machine]:
    """Write a named shape under tmp_path and read it back."""

    def build(name: str) -> Machine:
        return read_machine(write_shape(name, tmp_path / name / "sys"))

    return build


@pytest.fixture
def spec_root(tmp_path: Path) -> Callable[[MachineSpec], Path]:
    """Write a MachineSpec under tmp_path; returns the fake sysfs root."""
    counter = iter(range(1_000_000))

    def build(spec: MachineSpec) -> Path:
        return write_sysfs(spec, tmp_path / f"m{next(counter)}" / "sys")

    return build
