"""The simulated machine: every topology form goes through the real sysfs reader.

A compact description or a named shape is written as a fake sysfs tree into a
temporary directory first, so simulate sees exactly what the agent would read.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from agent.simulate.scenario import (
    ScenarioError,
    ShapeTopology,
    SysfsTopology,
    Topology,
)
from topology.fakesysfs import FAST_TMP, SHAPES, write_sysfs
from topology.sysfs import SysfsError, read_machine
from topology.tree import Machine


def load_machine(topology: Topology) -> Machine:
    """The Machine a scenario's topology describes; ScenarioError if it cannot be read."""
    if isinstance(topology, SysfsTopology):
        return _read(topology.path, "topology.sysfs")
    if isinstance(topology, ShapeTopology):
        spec, where = SHAPES[topology.name], "topology.shape"
    else:
        spec, where = topology.spec, "topology"
    with tempfile.TemporaryDirectory(prefix="numa-agent-simulate-", dir=FAST_TMP) as tmp:
        return _read(write_sysfs(spec, Path(tmp)), where)


def _read(root: Path, where: str) -> Machine:
    try:
        return read_machine(root, cpu_info=False)
    except SysfsError as exc:
        raise ScenarioError(f"{where}: {exc}") from exc
