"""The simulated machine: a named shape or a compact description is built directly
(`topology.shapes`); a sysfs tree (captured or written) goes through the real reader.
"""

from __future__ import annotations

from pathlib import Path

from agent.simulate.scenario import (
    ScenarioError,
    ShapeTopology,
    SysfsTopology,
    Topology,
)
from topology.shapes import SHAPES, MachineSpecError, build_machine
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
    try:
        return build_machine(spec)
    except (SysfsError, MachineSpecError) as exc:
        raise ScenarioError(f"{where}: {exc}") from exc


def _read(root: Path, where: str) -> Machine:
    try:
        return read_machine(root, cpu_info=False)
    except SysfsError as exc:
        raise ScenarioError(f"{where}: {exc}") from exc
