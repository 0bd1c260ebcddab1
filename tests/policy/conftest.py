"""Fixtures of the policy tests: machine shapes written to a temporary sysfs and read back."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.policy.helpers import spec_machine
from topology.shapes import MachineSpec
from topology.tree import Machine


@pytest.fixture(scope="session")
def spec_machines(
    tmp_path_factory: pytest.TempPathFactory,
) -> Callable[[MachineSpec, str], Machine]:
    base = tmp_path_factory.mktemp("specs")
    return lambda spec, label: spec_machine(spec, base, label)
