"""The pod rules govern every container of the pod, init containers included, each
placed on its own (issues 14 and 15), through simulate's kubelet."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from agent.simulate.driver import run_scenario
from agent.simulate.scenario import parse_scenario
from topology.cpuset import CPUSet
from topology.tree import Machine

RULES = """\
nodeAffinity:
  requiredDuringSchedulingIgnoredDuringExecution:
    nodeSelectorTerms:
    - matchExpressions: [{key: numa-agent.io/numa, operator: In, values: ["3"]}]
"""


def test_an_init_container_follows_the_pods_node_affinity(
    machines: Callable[[str], Machine],
) -> None:
    machine = machines("xeon-2s-2numa")
    data = {
        "topology": {"shape": "xeon-2s-2numa"},
        "pods": [
            {
                "name": "app",
                "annotations": {"numa-agent.io/affinity": RULES},
                "init_containers": [{"name": "setup", "cpu": "2", "memory": "1Gi"}],
                "containers": [{"name": "main", "cpu": "2", "memory": "1Gi"}],
            }
        ],
    }
    result = run_scenario(parse_scenario(data, base_dir=Path(".")), machine)
    node3 = machine.numa_node(3).cpus
    decided = {d.name: d for d in result.decisions}
    assert set(decided) == {"setup", "main"}
    assert decided["setup"].pool == "numa3" and decided["main"].pool == "numa3"
    (main,) = result.containers
    assert CPUSet.parse(main.cpuset_cpus).is_subset(node3)
