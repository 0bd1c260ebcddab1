"""Scenario parsing: quantities, QoS classes, topology forms, and errors that name the key."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from agent.simulate.machine import load_machine
from agent.simulate.scenario import (
    CompactTopology,
    CreatePod,
    ExitContainer,
    RecreateContainer,
    RemovePod,
    ResizeContainer,
    ScenarioError,
    ShapeTopology,
    SysfsTopology,
    load_scenario,
    parse_cpu,
    parse_scenario,
    pod_uid,
)
from agent.workload import QoSClass
from devtools.fakesysfs import write_sysfs
from topology.shapes import SHAPES, MachineSpec

BASE: dict[str, Any] = {
    "topology": {"sockets": 1, "cores_per_numa": 2},
    "pods": [
        {"name": "a", "containers": [{"name": "main", "cpu": "1", "memory": "1Gi"}]},
        {"name": "b", "namespace": "other", "containers": [{"name": "main"}]},
    ],
}


def parse(data: Any, base_dir: Path = Path(".")) -> Any:
    return parse_scenario(data, base_dir=base_dir, source="test.yaml")


@pytest.mark.parametrize(
    ("text", "milli"),
    [("2", 2000), ("500m", 500), ("1.5", 1500), (2, 2000), (0.25, 250), ("0", 0), ("1m", 1)],
)
def test_cpu_quantities(text: object, milli: int) -> None:
    assert parse_cpu(text, "cpu") == milli


@pytest.mark.parametrize("text", ["2x", "-1", "0.5m", "1.0005", "", True, None, [1]])
def test_bad_cpu_quantities(text: object) -> None:
    with pytest.raises(ScenarioError, match="cpu"):
        parse_cpu(text, "cpu")


def containers(*specs: dict[str, Any]) -> dict[str, Any]:
    return {"topology": {"cores_per_numa": 2}, "pods": [{"name": "p", "containers": list(specs)}]}


@pytest.mark.parametrize(
    ("specs", "qos"),
    [
        # requests = limits, both set, for every container: Guaranteed
        ([{"name": "a", "cpu": "1", "memory": "1Gi"}], QoSClass.GUARANTEED),
        ([{"name": "a", "cpu": "500m", "memory": "1Gi"}], QoSClass.GUARANTEED),
        # a limit alone sets the request too, as Kubernetes does
        ([{"name": "a", "cpu_limit": "1", "memory_limit": "1Gi"}], QoSClass.GUARANTEED),
        ([{"name": "a", "cpu": "1", "cpu_limit": "2", "memory": "1Gi"}], QoSClass.BURSTABLE),
        ([{"name": "a", "cpu": "1"}], QoSClass.BURSTABLE),  # no memory
        ([{"name": "a", "cpu": "1", "cpu_limit": None, "memory": "1Gi"}], QoSClass.BURSTABLE),
        (
            [{"name": "a", "cpu": "1", "memory": "1Gi"}, {"name": "b"}],
            QoSClass.BURSTABLE,
        ),
        ([{"name": "a"}, {"name": "b"}], QoSClass.BESTEFFORT),
    ],
)
def test_qos_follows_kubernetes(specs: list[dict[str, Any]], qos: QoSClass) -> None:
    assert parse(containers(*specs)).pods[0].qos is qos


def test_init_containers_count_for_qos() -> None:
    data = containers({"name": "app", "cpu": "1", "memory": "1Gi"})
    data["pods"][0]["init_containers"] = [{"name": "init", "cpu": "1"}]
    pod = parse(data).pods[0]
    assert pod.qos is QoSClass.BURSTABLE
    assert [c.name for c in pod.init_containers] == ["init"]


def test_defaults() -> None:
    scenario = parse(BASE)
    a, b = scenario.pods
    assert (a.namespace, b.namespace) == ("default", "other")
    assert a.uid == pod_uid("default", "a") != b.uid
    assert parse(BASE).pods[0].uid == a.uid  # reproducible
    main = a.containers[0]
    assert (main.cpu_milli, main.cpu_limit_milli) == (1000, 1000)
    assert main.memory_bytes == main.memory_limit_bytes == 1024**3
    assert scenario.events == (CreatePod("default/a"), CreatePod("other/b"))
    assert scenario.config.reserved_namespaces == ("kube-system",)


def with_change(path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    """BASE with the value at `path` set (or deleted when value is ...)."""
    data = copy.deepcopy(BASE)
    target = data
    for step in path[:-1]:
        target = target[step]
    if value is ...:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return data


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        (("extra",), 1, "scenario: unknown key 'extra'"),
        (("topology",), ..., "topology: missing"),
        (("pods",), [], "pods: expected a non-empty list"),
        (("topology",), {"sockets": 1, "cpus": 4}, "topology.cpus: unknown key"),
        (("topology",), {"sockets": 0}, "topology.sockets: must be at least 1"),
        (("topology",), {"shape": "nope"}, "topology.shape: unknown shape 'nope'"),
        (("topology",), {"shape": "xeon-2s-2numa", "sockets": 2}, "shape cannot be combined"),
        (("topology",), {"sysfs": "does/not/exist"}, "topology.sysfs: .* is not a directory"),
        (("config",), {"reserved_cpu": "0"}, "config: unknown policy config key.*reserved_cpu"),
        (("config",), {"reserved_cpus": "x"}, "config: reserved_cpus"),
        (("pods", 0, "name"), "Bad_Name", r"pods\[0\]: name"),
        (("pods", 0, "colour"), "red", r"pods\[0\]: unknown key 'colour'"),
        (("pods", 0, "labels"), {"tier": 1}, "pod default/a: labels: 'tier'"),
        (("pods", 0, "containers"), ..., "pod default/a: containers: missing"),
        (("pods", 0, "containers", 0, "cpu"), "2x", "pod default/a: container main: cpu: '2x'"),
        (
            ("pods", 0, "containers", 0, "memory"),
            "1Gb",
            "pod default/a: container main: memory: '1Gb'",
        ),
        (("pods", 0, "containers", 0, "gpu"), 1, "containers\\[0\\]: unknown key 'gpu'"),
        (
            ("pods", 0, "containers", 0, "cpu_limit"),
            "500m",
            "container main: cpu: request 1 is above cpu_limit 500m",
        ),
        (
            ("pods", 0, "containers"),
            [{"name": "x"}, {"name": "x"}],
            "pod default/a: container x: name used twice",
        ),
        (("pods", 1, "namespace"), "default", None),  # two pods named differently: fine
        (("pods", 1, "name"), "a", None),  # same name, other namespace: fine
        (("pods", 1, "uid"), pod_uid("default", "a"), "uid .* is also pod default/a's"),
        (("events",), [{"create": "zz"}], r"events\[0\]: create: no pod 'zz'"),
        (("events",), [{"remove": "a"}], r"events\[0\]: remove: pod default/a is not running"),
        (
            ("events",),
            [{"create": "a"}, {"create": "a"}],
            r"events\[1\]: create: pod default/a is already running",
        ),
        (("events",), [{"create": "a", "remove": "a"}], "expected exactly one of"),
        (("events",), [{"start": "a"}], r"events\[0\]: unknown key 'start'"),
        (("events",), [{"exit": "a"}], "exit: expected POD/CONTAINER"),
        (("events",), [{"create": "a"}, {"exit": "a/side"}], "has no app container 'side'"),
        (("events",), [{"exit": "a/main"}], "pod default/a is not running"),
        (
            ("events",),
            [{"create": "a"}, {"exit": "a/main"}, {"exit": "a/main"}],
            "already exited",
        ),
        (("events",), [{"create": "a"}, {"recreate": "a/main"}], "has not exited"),
        (("events",), [{"recreate": "a/main"}], "pod default/a is not running"),
        (
            ("events",),
            [{"create": "a"}, {"exit": "a/main"}, {"recreate": "a/main"}, {"recreate": "a/main"}],
            "has not exited",
        ),
        (("events",), [{"create": "a"}, {"resize": {"container": "a/main"}}], "nothing to change"),
        (
            ("events",),
            [{"create": "a"}, {"resize": {"container": "a/main", "cpu": "x"}}],
            r"resize: cpu",
        ),
        (
            ("events",),
            [{"create": "a"}, {"resize": {"container": "a/main", "size": 1}}],
            "unknown key 'size'",
        ),
        (
            ("events",),
            [{"create": "a"}, {"exit": "a/main"}, {"resize": {"container": "a/main", "cpu": 1}}],
            "has exited",
        ),
    ],
)
def test_validation_errors_name_the_key(
    path: tuple[Any, ...], value: Any, message: str | None
) -> None:
    data = with_change(path, value)
    if message is None:
        parse(data)
        return
    with pytest.raises(ScenarioError, match=message) as info:
        parse(data)
    assert str(info.value).startswith("test.yaml: ")


def test_ambiguous_pod_name_needs_its_namespace() -> None:
    data = with_change(("pods", 1, "name"), "a")
    with pytest.raises(ScenarioError, match="'a' is ambiguous, say one of default/a, other/a"):
        parse({**data, "events": [{"create": "a"}]})
    events = parse({**data, "events": [{"create": "other/a"}, {"exit": "other/a/main"}]}).events
    assert events == (CreatePod("other/a"), ExitContainer("other/a", "main"))


def test_recreate_and_resize_events() -> None:
    events = [
        {"create": "a"},
        {"exit": "a/main"},
        {"recreate": "a/main"},
        {"resize": {"container": "a/main", "cpu": "600m", "cpu_limit": None}},
    ]
    parsed = parse({**BASE, "events": events}).events
    assert parsed[2] == RecreateContainer("default/a", "main")
    assert parsed[3] == ResizeContainer("default/a", "main", 600, 0, None, None)


def test_events_after_remove_may_create_again() -> None:
    events = [{"create": "a"}, {"exit": "a/main"}, {"remove": "a"}, {"create": "a"}]
    parsed = parse({**BASE, "events": events}).events
    assert parsed[2] == RemovePod("default/a")
    assert len(parsed) == 4


def test_three_topology_forms_read_the_same_machine(tmp_path: Path) -> None:
    spec = MachineSpec(sockets=2, cores_per_numa=3)
    write_sysfs(spec, tmp_path / "machines" / "m")
    from_sysfs = parse({**BASE, "topology": {"sysfs": "machines/m"}}, base_dir=tmp_path)
    assert from_sysfs.topology == SysfsTopology((tmp_path / "machines" / "m").resolve())
    compact = parse({**BASE, "topology": {"sockets": 2, "cores_per_numa": 3}})
    assert compact.topology == CompactTopology(spec)
    assert load_machine(from_sysfs.topology) == load_machine(compact.topology)

    shape = parse({**BASE, "topology": {"shape": "xeon-2s-2numa"}})
    assert shape.topology == ShapeTopology("xeon-2s-2numa")
    machine = load_machine(shape.topology)
    xeon = SHAPES["xeon-2s-2numa"]
    assert len(machine.cpus) == xeon.cpu_count
    assert len(list(machine.iter_numa_nodes())) == xeon.cpu_node_count


def test_broken_sysfs_tree_is_a_scenario_error(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    scenario = parse({**BASE, "topology": {"sysfs": "empty"}}, base_dir=tmp_path)
    with pytest.raises(ScenarioError, match=r"topology\.sysfs: .*missing"):
        load_machine(scenario.topology)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("pods: [\n", "not valid YAML"),
        ("- 1\n- 2\n", "scenario: expected a mapping"),
    ],
)
def test_load_scenario_file_errors(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(text)
    with pytest.raises(ScenarioError, match=message) as info:
        load_scenario(path)
    assert str(path) in str(info.value)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match="cannot read scenario"):
        load_scenario(tmp_path / "absent.yaml")
