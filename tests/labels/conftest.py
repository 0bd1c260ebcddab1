"""Fixtures of the label tests: the named shapes' fake sysfs roots and machines."""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from devtools.fakesysfs import FAST_TMP, write_shape
from topology.sysfs import read_machine
from topology.tree import Machine


@pytest.fixture(scope="session")
def shape_root() -> Iterator[Callable[[str], Path]]:
    """A named shape's fake sysfs root (with NICs and DMI), written once per session."""
    roots: dict[str, Path] = {}
    with tempfile.TemporaryDirectory(prefix="numa-agent-labels-", dir=FAST_TMP) as tmp:

        def build(name: str) -> Path:
            if name not in roots:
                roots[name] = write_shape(name, Path(tmp) / name / "sys")
            return roots[name]

        yield build


@pytest.fixture(scope="session")
def shape_machine(shape_root: Callable[[str], Path]) -> Callable[[str], Machine]:
    machines: dict[str, Machine] = {}

    def get(name: str) -> Machine:
        if name not in machines:
            machines[name] = read_machine(shape_root(name), cpu_info=False)
        return machines[name]

    return get
