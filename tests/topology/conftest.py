"""Fixtures: fake sysfs roots written into tmp_path."""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from devtools.fakesysfs import FAST_TMP, write_shape, write_sysfs
from topology.shapes import MachineSpec
from topology.sysfs import read_machine
from topology.tree import Machine


@contextmanager
def fast_tmpdir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="numa-agent-sysfs-", dir=FAST_TMP) as tmp:
        yield Path(tmp)


@pytest.fixture(scope="session")
def shape_root() -> Iterator[Callable[[str], Path]]:
    """The fake sysfs root of a named shape, written once per test session."""
    roots: dict[str, Path] = {}
    with fast_tmpdir() as tmp:

        def build(name: str) -> Path:
            if name not in roots:
                roots[name] = write_shape(name, tmp / name / "sys")
            return roots[name]

        yield build


@pytest.fixture
def shape_machine(shape_root: Callable[[str], Path]) -> Callable[[str], Machine]:
    """Read a named shape's fake sysfs (written once per session)."""

    def build(name: str) -> Machine:
        return read_machine(shape_root(name))

    return build


@pytest.fixture
def spec_root() -> Iterator[Callable[[MachineSpec], Path]]:
    """Write a MachineSpec to a fresh temporary directory; returns the fake sysfs root."""
    counter = iter(range(1_000_000))
    with fast_tmpdir() as tmp:

        def build(spec: MachineSpec) -> Path:
            return write_sysfs(spec, tmp / f"m{next(counter)}" / "sys")

        yield build
