"""The operator's own NUMA-node labels: the `numa_labels` policy setting.

`{"3": {"example.com/storage": "nvme"}}` from YAML, JSON or a command-line flag
becomes one immutable, comparable mapping (node id -> label key -> value),
checked once against Kubernetes' label syntax. The agent's own prefix is
reserved so an operator's label can never shadow what the agent reads from sysfs.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType

import yaml

from agent.kube.names import label_key_problem, label_value_problem
from agent.labels import PREFIX
from topology.tree import Machine

_NODE_ID = re.compile(r"[0-9]+")
_EXAMPLE = '{"3": {"example.com/storage": "nvme"}}'

Pairs = tuple[tuple[str, str], ...]


class OperatorLabelError(ValueError):
    """A `numa_labels` entry that is not a NUMA node and Kubernetes labels; names its path."""


@dataclass(frozen=True, slots=True)
class NumaLabels(Mapping[int, Mapping[str, str]]):
    """NUMA node id -> {label key: value}, kept as sorted tuples so it is hashable.

    `str()` is the JSON form `parse_numa_labels` reads back ("" when empty), which
    is how `numa-agent config` prints it and how the command-line flag spells it.
    """

    entries: tuple[tuple[int, Pairs], ...] = ()

    def __getitem__(self, node: int) -> Mapping[str, str]:
        for node_id, pairs in self.entries:
            if node_id == node:
                return MappingProxyType(dict(pairs))
        raise KeyError(node)

    def __iter__(self) -> Iterator[int]:
        return (node_id for node_id, _ in self.entries)

    def __len__(self) -> int:
        return len(self.entries)

    def __str__(self) -> str:
        if not self.entries:
            return ""
        return json.dumps({str(node): dict(pairs) for node, pairs in self.entries})


def reserved_prefix(key: str) -> bool:
    """Whether `key` is in the agent's own namespace (numa-agent.io or a subdomain of it)."""
    prefix, slash, _ = key.rpartition("/")
    own = PREFIX.rstrip("/")
    return bool(slash) and (prefix == own or prefix.endswith("." + own))


def _node_id(raw: object, key: str) -> int:
    if isinstance(raw, int) and not isinstance(raw, bool) and raw >= 0:
        return raw
    if isinstance(raw, str) and _NODE_ID.fullmatch(raw):
        return int(raw)
    raise OperatorLabelError(
        f'{key}.{raw}: {raw!r} is not a NUMA node number (a key such as 3 or "3")'
    )


def _labels(raw: object, where: str) -> Pairs:
    if raw is None:
        return ()
    if not isinstance(raw, Mapping):
        raise OperatorLabelError(
            f"{where}: expected a mapping of label keys to values, got {raw!r}"
        )
    pairs: list[tuple[str, str]] = []
    for label, value in raw.items():
        path = f"{where}.{label}"
        if not isinstance(label, str):
            raise OperatorLabelError(f"{path}: a label key must be a string, got {label!r}")
        problem = label_key_problem(label)
        if problem is not None:
            raise OperatorLabelError(f"{path}: {label!r} is not a label key: {problem}")
        if reserved_prefix(label):
            raise OperatorLabelError(
                f"{path}: the {PREFIX} prefix is the agent's own; "
                "use a prefix of yours, such as example.com/"
            )
        if not isinstance(value, str):
            raise OperatorLabelError(
                f"{path}: expected a string, got {value!r} (quote numbers and booleans)"
            )
        problem = label_value_problem(value)
        if problem is not None:
            raise OperatorLabelError(f"{path}: {value!r} is not a label value: {problem}")
        pairs.append((label, value))
    return tuple(sorted(pairs))


def parse_numa_labels(value: object, key: str = "numa_labels") -> NumaLabels:
    """A NumaLabels from YAML/JSON data or its text form; OperatorLabelError naming the path.

    Node ids may be integers or digit strings (YAML keeps `3:` an int, JSON
    needs "3"); a node given twice, in either spelling, is an error.
    """
    if isinstance(value, NumaLabels):
        return value
    if value is None or value == "":
        return NumaLabels()
    if isinstance(value, str):  # the command-line flag, or `numa-agent config` output
        try:
            value = yaml.safe_load(value)
        except yaml.YAMLError as err:
            reason = getattr(err, "problem", None) or str(err).splitlines()[0]
            raise OperatorLabelError(
                f"{key}: {value!r} is not a YAML or JSON mapping such as {_EXAMPLE}: {reason}"
            ) from None
    if not isinstance(value, Mapping):
        raise OperatorLabelError(
            f"{key}: expected a mapping of NUMA node to labels, such as {_EXAMPLE}, got {value!r}"
        )
    nodes: dict[int, Pairs] = {}
    for raw_node, labels in value.items():
        node = _node_id(raw_node, key)
        if node in nodes:
            raise OperatorLabelError(f"{key}.{raw_node}: NUMA node {node} is given twice")
        nodes[node] = _labels(labels, f"{key}.{raw_node}")
    return NumaLabels(tuple(sorted(nodes.items())))


def numa_labels_problem(labels: Mapping[int, Mapping[str, str]], machine: Machine) -> str | None:
    """Why `labels` do not fit `machine` (a node that is not a NUMA node with CPUs), or None."""
    cpu_nodes = [node.id for node in machine.iter_numa_nodes()]
    memory_only = {node.id for node in machine.memory_only_nodes}
    known = ", ".join(map(str, cpu_nodes))
    for node in sorted(labels):
        if node in cpu_nodes:
            continue
        what = "has no CPUs (memory only)" if node in memory_only else "does not exist"
        return (
            f"numa_labels.{node}: NUMA node {node} {what} on this machine; "
            f"labels go on NUMA nodes with CPUs: {known}"
        )
    return None
