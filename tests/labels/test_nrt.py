"""The NodeResourceTopology object: valid under the v1alpha2 CRD's schema (its rules
written down here), capacity and costs from the machine, available from a status
document built by a real node agent."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import yaml

from agent.introspect.document import AgentInfo, status_document
from agent.kubelet import kubelet_container_config, kubelet_pod_config
from agent.labels.nrt import cpu_quantity, memory_quantity, node_resource_topology
from agent.labels.usage import NodeUse, UsageError, node_memory, node_use, split
from agent.node.agent import NodeAgent
from agent.node.runtime_access import InProcessRuntimeAccess
from agent.observe.process import process_stats
from agent.policy.config import PolicyConfig
from agent.runtime.memory import MemoryRuntime
from agent.workload import QoSClass
from tests.node.conftest import InProcessKubelet
from topology.cpuset import CPUSet
from topology.shapes import SHAPES
from topology.tree import Machine

# The CRD's quantity pattern (k8s.io/apimachinery resource.Quantity, as the CRD
# manifest of noderesourcetopology-api spells it).
QUANTITY = re.compile(
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|"
    r"([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)


def schema_problems(obj: Any) -> list[str]:
    """The v1alpha2 CRD's rules: what a NodeResourceTopology must and may hold.

    Required at the top: apiVersion, kind, metadata.name, topologyPolicies (strings),
    zones; a zone needs name and type; a cost name and an int64 value; a resource
    name, capacity, allocatable and available, each an int or a quantity string;
    an attribute name and value. No other fields (a structural schema prunes them).
    """
    out: list[str] = []

    def need(where: str, data: Any, required: set[str], allowed: set[str]) -> bool:
        if not isinstance(data, dict):
            out.append(f"{where}: not an object")
            return False
        out.extend(f"{where}: missing {k}" for k in sorted(required - set(data)))
        out.extend(f"{where}: unknown field {k}" for k in sorted(set(data) - allowed))
        return True

    def strings(where: str, data: dict[str, Any], keys: tuple[str, ...]) -> None:
        out.extend(
            f"{where}.{k}: not a string" for k in keys if k in data and not isinstance(data[k], str)
        )

    def attributes(where: str, items: Any) -> None:
        if not isinstance(items, list):
            out.append(f"{where}: not a list")
            return
        for i, item in enumerate(items):
            if need(f"{where}[{i}]", item, {"name", "value"}, {"name", "value"}):
                strings(f"{where}[{i}]", item, ("name", "value"))

    top = {"apiVersion", "kind", "metadata", "topologyPolicies", "zones", "attributes"}
    if not need("", obj, top - {"attributes"}, top):
        return out
    if obj.get("apiVersion") != "topology.node.k8s.io/v1alpha2":
        out.append(f"apiVersion: {obj.get('apiVersion')!r}")
    if obj.get("kind") != "NodeResourceTopology":
        out.append(f"kind: {obj.get('kind')!r}")
    meta = obj.get("metadata")
    if not isinstance(meta, dict) or not isinstance(meta.get("name"), str) or not meta["name"]:
        out.append("metadata.name: missing")
    elif "namespace" in meta:
        out.append("metadata.namespace: the resource is cluster-scoped")
    policies = obj.get("topologyPolicies")
    if not isinstance(policies, list) or not all(isinstance(p, str) for p in policies):
        out.append("topologyPolicies: not a list of strings")
    if "attributes" in obj:
        attributes("attributes", obj["attributes"])
    zones = obj.get("zones")
    if not isinstance(zones, list):
        return [*out, "zones: not a list"]
    zone_keys = {"name", "type", "parent", "costs", "attributes", "resources"}
    for z, zone in enumerate(zones):
        where = f"zones[{z}]"
        if not need(where, zone, {"name", "type"}, zone_keys):
            continue
        strings(where, zone, ("name", "type", "parent"))
        for c, cost in enumerate(zone.get("costs", [])):
            if need(f"{where}.costs[{c}]", cost, {"name", "value"}, {"name", "value"}):
                strings(f"{where}.costs[{c}]", cost, ("name",))
                value = cost["value"]
                if isinstance(value, bool) or not isinstance(value, int) or abs(value) >= 2**63:
                    out.append(f"{where}.costs[{c}].value: not an int64")
        if "attributes" in zone:
            attributes(f"{where}.attributes", zone["attributes"])
        fields = {"name", "capacity", "allocatable", "available"}
        for r, res in enumerate(zone.get("resources", [])):
            if need(f"{where}.resources[{r}]", res, fields, fields):
                strings(f"{where}.resources[{r}]", res, ("name",))
                for key in ("capacity", "allocatable", "available"):
                    if key not in res:
                        continue  # reported missing above
                    value = res[key]
                    ok = (isinstance(value, int) and not isinstance(value, bool)) or (
                        isinstance(value, str) and QUANTITY.match(value)
                    )
                    if not ok:
                        out.append(f"{where}.resources[{r}].{key}: {value!r} is not a quantity")
    return out


def milli(quantity: str) -> int:
    return int(quantity[:-1]) if quantity.endswith("m") else 1000 * int(quantity)


def kib(quantity: str) -> int:
    return int(quantity.removesuffix("Ki")) * 1024 if quantity.endswith("Ki") else int(quantity)


def zones_by_name(obj: dict[str, Any]) -> dict[str, dict[str, dict[str, str]]]:
    return {z["name"]: {r["name"]: r for r in z["resources"]} for z in obj["zones"]}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_valid_under_the_crd_schema(name: str, shape_machine: Callable[[str], Machine]) -> None:
    machine = shape_machine(name)
    obj = node_resource_topology(machine, node_name="worker-1", reserved_cpus=CPUSet.parse("0"))
    # What `numa-agent labels` prints, read back as kubectl would.
    loaded = yaml.safe_load(yaml.safe_dump(obj, sort_keys=False))
    assert schema_problems(loaded) == []
    assert loaded["topologyPolicies"] == ["None"]
    assert {"name": "topologyManagerScope", "value": "container"} in loaded["attributes"]
    names = [z["name"] for z in loaded["zones"]]
    assert names == [f"node-{n.id}" for n in sorted(machine.iter_numa_nodes(), key=lambda n: n.id)]
    assert {z["type"] for z in loaded["zones"]} == {"Node"}


SCHEMA_CONTROLS: list[tuple[Callable[[dict[str, Any]], None], str]] = [
    (lambda o: o.pop("topologyPolicies"), ": missing topologyPolicies"),
    (lambda o: o["zones"][0].pop("type"), "zones[0]: missing type"),
    (lambda o: o["zones"][0]["resources"][0].pop("available"), "missing available"),
    (lambda o: o["zones"][0]["resources"][0].update(capacity="12 cores"), "is not a quantity"),
    (lambda o: o["zones"][0]["resources"][1].update(capacity="1.5Gb"), "is not a quantity"),
    (lambda o: o["zones"][0]["costs"][0].update(value="10"), "not an int64"),
    (lambda o: o["zones"][0].update(numa=0), "unknown field numa"),
    (lambda o: o["metadata"].update(namespace="default"), "cluster-scoped"),
    (lambda o: o.update(apiVersion="topology.node.k8s.io/v1alpha1"), "apiVersion"),
]


@pytest.mark.parametrize(("break_it", "says"), SCHEMA_CONTROLS)
def test_the_schema_rules_catch_broken_objects(
    break_it: Callable[[dict[str, Any]], None], says: str, shape_machine: Callable[[str], Machine]
) -> None:
    obj = node_resource_topology(
        shape_machine("desktop-1s-4c-ht"), node_name="n", reserved_cpus=CPUSet()
    )
    break_it(obj)
    assert any(says in problem for problem in schema_problems(obj)), schema_problems(obj)


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_capacity_allocatable_and_costs(name: str, shape_machine: Callable[[str], Machine]) -> None:
    machine = shape_machine(name)
    reserved = CPUSet.of([machine.cpus.first(), max(machine.cpus.ids())])
    zones = node_resource_topology(machine, node_name="n", reserved_cpus=reserved)["zones"]
    by_name = {z["name"]: z for z in zones}
    for node in machine.iter_numa_nodes():
        zone = by_name[f"node-{node.id}"]
        resources = {r["name"]: r for r in zone["resources"]}
        cpu, memory = resources["cpu"], resources["memory"]
        assert milli(cpu["capacity"]) == 1000 * len(node.cpus)
        assert milli(cpu["allocatable"]) == 1000 * len(node.cpus - reserved)
        assert cpu["available"] == cpu["allocatable"]  # nothing placed
        attached = [m for m in machine.memory_only_nodes if m.closest_cpu_node == node.id]
        expected = node.memory_bytes + sum(m.memory_bytes for m in attached)
        assert kib(memory["capacity"]) == expected == kib(memory["allocatable"])
        costs = {c["name"]: c["value"] for c in zone["costs"]}
        assert costs == {
            f"node-{other.id}": node.distances[other.id] for other in machine.iter_numa_nodes()
        }
        assert costs[f"node-{node.id}"] == 10


@pytest.mark.parametrize(
    ("milli_cpu", "text"), [(0, "0"), (1000, "1"), (64000, "64"), (1500, "1500m"), (1, "1m")]
)
def test_cpu_quantity(milli_cpu: int, text: str) -> None:
    assert cpu_quantity(milli_cpu) == text and QUANTITY.match(text)


@pytest.mark.parametrize(
    ("size", "text"), [(0, "0Ki"), (1024, "1Ki"), (64 << 30, "67108864Ki"), (1500, "1500")]
)
def test_memory_quantity(size: int, text: str) -> None:
    assert memory_quantity(size) == text and QUANTITY.match(text)


@pytest.mark.parametrize(
    ("total", "weights"),
    [(1000, {0: 1, 1: 1, 2: 1}), (7, {3: 2, 1: 5}), (0, {0: 1}), (999, {0: 0, 1: 3}), (5, {})],
)
def test_split_is_exact_and_proportional(total: int, weights: dict[int, int]) -> None:
    parts = split(total, weights)
    assert sorted(parts) == sorted(weights)
    if weights:
        assert sum(parts.values()) == total
    whole = sum(weights.values())
    for node, part in parts.items():
        assert abs(part - total * weights[node] / whole) < 1


# -- available, from a real node agent's status document --------------------------------


@pytest.fixture
def xeon_agent(shape_machine: Callable[[str], Machine]) -> Iterator[tuple[NodeAgent, Any]]:
    runtime = MemoryRuntime()
    agent = NodeAgent(
        shape_machine("xeon-2s-2numa"),
        PolicyConfig.from_mapping({"reserved_cpus": "0,40"}),
        InProcessRuntimeAccess(runtime),
    )
    agent.start()
    yield agent, InProcessKubelet(agent, runtime)
    agent.close()


def start(kubelet: Any, pod: str, milli_cpu: int, qos: QoSClass, memory: int, **kw: Any) -> None:
    config = kubelet_pod_config(pod, kw.get("namespace", "default"), f"uid-{pod}", qos=qos)
    sandbox = kubelet.run_pod_sandbox(config)
    limit = milli_cpu if qos is QoSClass.GUARANTEED else 0
    ctr = kubelet_container_config(config, "app", milli_cpu, limit, memory)
    kubelet.create_container(sandbox, ctr, config)


def document(agent: NodeAgent, machine: Machine) -> dict[str, Any]:
    info = AgentInfo("test", "unix:///rt", "unix:///agent", "", 0, process_stats())
    placements, capacity = agent.placements_and_capacity()
    return status_document(info, machine, CPUSet.parse("0,40"), placements, capacity, time.time())


def test_available_subtracts_what_is_placed(
    xeon_agent: tuple[NodeAgent, Any], shape_machine: Callable[[str], Machine]
) -> None:
    agent, kubelet = xeon_agent
    machine = shape_machine("xeon-2s-2numa")
    gi = 1 << 30
    start(kubelet, "db", 4000, QoSClass.GUARANTEED, 8 * gi)  # 4 exclusive CPUs, one node
    start(kubelet, "web", 1500, QoSClass.BURSTABLE, 2 * gi)  # shared
    start(kubelet, "batch", 0, QoSClass.BESTEFFORT, 0)
    start(kubelet, "dns", 500, QoSClass.BURSTABLE, gi, namespace="kube-system")  # reserved
    doc = document(agent, machine)
    use = node_use(doc, machine)
    assert sorted(use) == [0, 1, 2, 3]
    # Every request is counted once, whatever pool it landed in; reserved ones not at all.
    assert sum(u.cpu_milli for u in use.values()) == 4000 + 1500
    # The policy accounts memory for Guaranteed containers (their limit is their request).
    assert sum(u.memory_bytes for u in use.values()) == 8 * gi
    placed = {(p.namespace, p.pod): p for p in agent.placements_and_capacity()[0]}
    db_cpus = CPUSet.parse(placed["default", "db"].cpuset_cpus)
    (db_node,) = [n for n in machine.iter_numa_nodes() if db_cpus.is_subset(n.cpus)]
    assert use[db_node.id].cpu_milli >= 4000

    obj = node_resource_topology(
        machine, node_name="n", reserved_cpus=CPUSet.parse("0,40"), use=use
    )
    assert schema_problems(obj) == []
    for node in machine.iter_numa_nodes():
        cpu = zones_by_name(obj)[f"node-{node.id}"]["cpu"]
        assert milli(cpu["available"]) == milli(cpu["allocatable"]) - use[node.id].cpu_milli
        memory = zones_by_name(obj)[f"node-{node.id}"]["memory"]
        assert kib(memory["available"]) == node_memory(machine, node.id) - use[node.id].memory_bytes


def test_a_container_spanning_nodes_is_split_by_their_shared_cpus(
    shape_machine: Callable[[str], Machine],
) -> None:
    machine = shape_machine("xeon-2s-2numa")
    nodes = {n.id: n for n in machine.iter_numa_nodes()}
    socket0 = machine.sockets[0]
    pool = {
        "name": "socket0",
        "parent": None,
        "numa_nodes": [0, 1],
        "cpus": str(socket0.cpus),
        "exclusive_cpus": "",
        # Node 0 has 10 shared CPUs left, node 1 all 20: a 3000m request splits 1:2.
        "shared_cpus": str(nodes[0].cpus.union(nodes[1].cpus) - CPUSet.parse("0-9")),
        "shared_milli_used": 3000,
        "memory_used_bytes": 1 << 30,
    }
    doc = {"machine": {"cpus": str(machine.cpus)}, "pools": [pool]}
    use = node_use(doc, machine)
    assert use[0] == NodeUse(1000, 1 << 29) and use[1] == NodeUse(2000, 1 << 29)
    assert use[2] == use[3] == NodeUse(0, 0)


@pytest.mark.parametrize(
    ("doc", "says"),
    [
        ({"machine": {"cpus": "0-7"}, "pools": []}, "the running agent sees CPUs '0-7'"),
        ({}, "the running agent sees CPUs None"),
        ({"machine": "80 CPUs"}, "the running agent sees CPUs None"),
        ({"machine": {"cpus": "0-79"}, "pools": "x"}, "no list of pools"),
        (
            {"machine": {"cpus": "0-79"}, "pools": [{"name": "machine", "exclusive_cpus": "x"}]},
            "pool 'machine': bad exclusive_cpus",
        ),
    ],
)
def test_another_machines_document_is_refused(
    doc: dict[str, Any], says: str, shape_machine: Callable[[str], Machine]
) -> None:
    with pytest.raises(UsageError) as err:
        node_use(doc, shape_machine("xeon-2s-2numa"))
    assert says in str(err.value)
