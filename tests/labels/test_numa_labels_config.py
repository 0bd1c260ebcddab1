"""The `numa_labels` policy setting: accepted forms, every rejection naming its key
path, an immutable comparable value, and the check against a machine."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent.commands.config import render_config
from agent.config import config_from_mapping
from agent.labels.operator_labels import NumaLabels, parse_numa_labels
from agent.policy.config import ConfigError, PolicyConfig, check_numa_labels
from agent.policy.policy import Policy
from agent.simulate.scenario import ScenarioError, parse_scenario
from topology.tree import Machine

NVME = {"example.com/storage": "nvme"}


@pytest.mark.parametrize(
    ("value", "expect"),
    [
        ({3: NVME}, {3: NVME}),  # YAML `3:` is an int
        ({"3": NVME}, {3: NVME}),  # JSON keys are strings
        ({"03": NVME}, {3: NVME}),
        ({0: {"tier": "a", "example.com/x": ""}}, {0: {"tier": "a", "example.com/x": ""}}),
        ({1: None, 2: {}}, {1: {}, 2: {}}),
        ('{"3": {"example.com/storage": "nvme"}}', {3: NVME}),  # --numa-labels flag
        ("{3: {example.com/storage: nvme}}", {3: NVME}),  # YAML flow on the flag
        ("", {}),
        (None, {}),
        ({}, {}),
    ],
)
def test_accepted(value: object, expect: dict[int, dict[str, str]]) -> None:
    labels = PolicyConfig.from_mapping({"numa_labels": value}).numa_labels
    assert {node: dict(labels[node]) for node in labels} == expect
    assert len(labels) == len(expect)


REJECTED: list[tuple[object, str]] = [
    ({"x": NVME}, "numa_labels.x: 'x' is not a NUMA node number"),
    ({-1: NVME}, "numa_labels.-1: -1 is not a NUMA node number"),
    ({True: NVME}, "numa_labels.True: True is not a NUMA node number"),
    ({"1.5": NVME}, "numa_labels.1.5: '1.5' is not a NUMA node number"),
    ({3: NVME, "3": {}}, "numa_labels.3: NUMA node 3 is given twice"),
    ({3: ["nvme"]}, "numa_labels.3: expected a mapping of label keys to values, got ['nvme']"),
    (
        {3: {"example.com/storage": 5}},
        "numa_labels.3.example.com/storage: expected a string, got 5",
    ),
    (
        {3: {"example.com/fast": True}},
        "numa_labels.3.example.com/fast: expected a string, got True",
    ),
    ({3: {1: "a"}}, "numa_labels.3.1: a label key must be a string, got 1"),
    (
        {3: {"Example.com/a": "b"}},
        "numa_labels.3.Example.com/a: 'Example.com/a' is not a label key",
    ),
    ({3: {"/a": "b"}}, "numa_labels.3./a: '/a' is not a label key: the prefix before '/'"),
    ({3: {"a b": "c"}}, "numa_labels.3.a b: 'a b' is not a label key: the name part"),
    ({3: {"x" * 64: "c"}}, "is not a label key: the name part must be at most 63 characters"),
    ({3: {"a": "b c"}}, "numa_labels.3.a: 'b c' is not a label value"),
    ({3: {"a": "v" * 64}}, "numa_labels.3.a: " + repr("v" * 64) + " is not a label value"),
    ({3: {"a": "-x"}}, "numa_labels.3.a: '-x' is not a label value"),
    (
        {3: {"numa-agent.io/numa": "9"}},
        "numa_labels.3.numa-agent.io/numa: the numa-agent.io/ prefix",
    ),
    ({3: {"x.numa-agent.io/a": "b"}}, "numa_labels.3.x.numa-agent.io/a: the numa-agent.io/ prefix"),
    (["3"], "numa_labels: expected a mapping of NUMA node to labels"),
    (5, "numa_labels: expected a mapping of NUMA node to labels"),
    ("{3: [", "numa_labels: '{3: [' is not a YAML or JSON mapping"),
]


@pytest.mark.parametrize(("value", "says"), REJECTED)
def test_rejected_naming_the_key_path(value: object, says: str) -> None:
    with pytest.raises(ConfigError) as err:
        PolicyConfig.from_mapping({"numa_labels": value})
    assert says in str(err.value)
    assert "\n" not in str(err.value)


def test_a_lookalike_prefix_is_the_operators() -> None:
    labels = parse_numa_labels({0: {"numa-agent.io.example.com/a": "b", "my-numa-agent.io/c": "d"}})
    assert dict(labels[0]) == {"my-numa-agent.io/c": "d", "numa-agent.io.example.com/a": "b"}


def test_value_is_immutable_comparable_and_hashable() -> None:
    a = PolicyConfig.from_mapping({"numa_labels": {3: NVME, 1: {"b": "c"}}})
    b = PolicyConfig.from_mapping({"numa_labels": {"1": {"b": "c"}, "3": NVME}})
    assert a == b and hash(a) == hash(b)
    assert a != PolicyConfig.from_mapping({"numa_labels": {3: NVME}})
    assert list(a.numa_labels) == [1, 3]
    view = a.numa_labels[3]
    with pytest.raises(TypeError):
        view["example.com/storage"] = "hdd"  # type: ignore[index]
    with pytest.raises(KeyError):
        a.numa_labels[2]
    assert PolicyConfig().numa_labels == NumaLabels() and not PolicyConfig().numa_labels


def test_the_agent_config_and_numa_agent_config_round_trip() -> None:
    config = config_from_mapping({"numa_labels": {3: NVME}, "reserved_cpus": "0"})
    assert dict(config.policy.numa_labels[3]) == NVME
    printed = yaml.safe_load(render_config(config))
    assert config_from_mapping(printed) == config
    empty = yaml.safe_load(render_config(config_from_mapping({})))
    assert config_from_mapping(empty).policy.numa_labels == NumaLabels()


@pytest.mark.parametrize(
    ("name", "nodes", "says"),
    [
        ("xeon-2s-2numa", {3: NVME, 0: {}}, None),
        (
            "xeon-2s-2numa",
            {4: NVME},
            "numa_labels.4: NUMA node 4 does not exist on this machine; "
            "labels go on NUMA nodes with CPUs: 0, 1, 2, 3",
        ),
        (
            "cxl-memory-only",
            {2: NVME},
            "numa_labels.2: NUMA node 2 has no CPUs (memory only) on "
            "this machine; labels go on NUMA nodes with CPUs: 0, 1",
        ),
        (
            "desktop-1s-4c-ht",
            {1: NVME, 9: NVME},
            "numa_labels.1: NUMA node 1 does not exist on this machine; labels go on NUMA nodes "
            "with CPUs: 0",
        ),
    ],
)
def test_checked_against_the_machine_when_the_policy_is_built(
    name: str,
    nodes: dict[int, dict[str, str]],
    says: str | None,
    shape_machine: Callable[[str], Machine],
) -> None:
    config = PolicyConfig.from_mapping({"numa_labels": nodes})
    machine = shape_machine(name)
    if says is None:
        check_numa_labels(config.numa_labels, machine)
        assert Policy(machine, config).config.numa_labels == config.numa_labels
        return
    with pytest.raises(ConfigError) as err:
        check_numa_labels(config.numa_labels, machine)
    assert str(err.value) == says
    with pytest.raises(ConfigError, match="numa_labels"):
        Policy(machine, config)


def _scenario(config: Any) -> dict[str, Any]:
    return {
        "topology": {"shape": "xeon-2s-2numa"},
        "config": config,
        "pods": [{"name": "web", "containers": [{"name": "app", "cpu": "1"}]}],
    }


def test_simulate_scenarios_take_numa_labels(tmp_path: Path) -> None:
    scenario = parse_scenario(_scenario({"numa_labels": {2: NVME}}), base_dir=tmp_path)
    assert dict(scenario.config.numa_labels[2]) == NVME
    with pytest.raises(ScenarioError, match=r"config: numa_labels\.2\.Bad/x: 'Bad/x' is not"):
        parse_scenario(_scenario({"numa_labels": {2: {"Bad/x": "y"}}}), base_dir=tmp_path)
