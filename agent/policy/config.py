"""The placement policy's configuration: one frozen value, validated once.

`PolicyConfig.from_mapping` turns the `policy:` part of the agent's config file
(or a `simulate` scenario's `config:`) into a typed value, naming any bad key.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields

from agent.labels.operator_labels import (
    NumaLabels,
    OperatorLabelError,
    numa_labels_problem,
    parse_numa_labels,
)
from topology.cpuset import CPUSet, CPUSetError
from topology.tree import Machine


class ConfigError(ValueError):
    """A policy configuration key or value that cannot be used; the message names it."""


@dataclass(frozen=True, slots=True)
class PolicyConfig:
    reserved_cpus: CPUSet = CPUSet()  # never handed to non-reserved containers
    reserved_namespaces: tuple[str, ...] = ("kube-system",)
    pin_cpus: bool = True  # write cpuset_cpus
    pin_memory: bool = True  # write cpuset_mems
    colocate_pods: bool = False  # implicit pull between containers of one pod
    colocate_namespaces: bool = False  # ... of one namespace
    colocate_weight: int = 1
    isolated_for_exclusive: bool = False  # hand isolcpus to exclusive containers unasked
    # Also count the rules of already placed containers toward the newcomer, so
    # `web: [cache]` pulls a cache created after its web. Off: a container's rules
    # act when it is placed (cri-resource-manager's behaviour).
    symmetric_affinity: bool = False
    # Daemons: containers of these namespaces are invisible to required pod
    # anti-affinity, in both directions (docs/pod-rules.md).
    system_namespaces: tuple[str, ...] = ("kube-system",)
    # Namespaces whose pods may have a required anti-affinity to every pod of every
    # namespace above the core level (it closes whole sockets to everyone else).
    exclusive_domain_namespaces: tuple[str, ...] = ()
    # The operator's own labels per NUMA node, e.g. {3: {"example.com/storage": "nvme"}},
    # next to the agent's (agent.labels.numa); a Mapping, immutable and hashable.
    numa_labels: NumaLabels = NumaLabels()

    @classmethod
    def from_mapping(cls, data: Mapping[str, object]) -> PolicyConfig:
        """Build from plain YAML/JSON data; unknown keys and bad values raise ConfigError."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(str(key) for key in data if key not in known)
        if unknown:
            raise ConfigError(
                f"unknown policy config key(s) {', '.join(unknown)}; "
                f"known keys: {', '.join(sorted(known))}"
            )
        values: dict[str, object] = {}
        for key, value in data.items():
            if key == "reserved_cpus":
                values[key] = _cpuset(key, value)
            elif key in ("reserved_namespaces", "system_namespaces", "exclusive_domain_namespaces"):
                values[key] = _namespaces(key, value)
            elif key == "colocate_weight":
                values[key] = _int(key, value)
            elif key == "numa_labels":
                try:
                    values[key] = parse_numa_labels(value, key)
                except OperatorLabelError as err:
                    raise ConfigError(str(err)) from None
            else:
                values[key] = _bool(key, value)
        return cls(**values)  # type: ignore[arg-type]


def check_numa_labels(labels: Mapping[int, Mapping[str, str]], machine: Machine) -> None:
    """ConfigError unless every node `numa_labels` names is a NUMA node with CPUs of `machine`.

    Separate from `from_mapping` because the file is read before the machine is
    known; the policy calls it when it is built for a machine.
    """
    problem = numa_labels_problem(labels, machine)
    if problem is not None:
        raise ConfigError(problem)


def _cpuset(key: str, value: object) -> CPUSet:
    if isinstance(value, CPUSet):
        return value
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise ConfigError(f'{key}: expected a CPU list such as "0-1,40", got {value!r}')
    try:
        return CPUSet.parse(str(value))
    except CPUSetError as err:
        raise ConfigError(f"{key}: {err}") from err


def _namespaces(key: str, value: object) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [part.strip() for part in value.split(",") if part.strip()]
    if not isinstance(value, list | tuple) or not all(
        isinstance(item, str) and item for item in value
    ):
        raise ConfigError(f"{key}: expected a list of namespace names, got {value!r}")
    return tuple(value)


def _int(key: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{key}: expected an integer, got {value!r}")
    return value


def _bool(key: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"{key}: expected true or false, got {value!r}")
    return value
