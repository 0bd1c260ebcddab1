"""The numa-agent.io rules through the agent's CRI handlers, in-process and over real
unix sockets: bad annotations are INVALID_ARGUMENT naming the annotation, the
container and the exact path, and a refusal by the rules is FAILED_PRECONDITION."""

from __future__ import annotations

import grpc
import pytest

from agent.workload import QoSClass
from devtools.criclient import CRIError
from tests.node.conftest import MODES, NodeFactory
from topology.cpuset import CPUSet

APART = """
podAntiAffinity:
  requiredDuringSchedulingIgnoredDuringExecution:
  - labelSelector: {matchLabels: {app: db}}
    topologyKey: numa-agent.io/socket
"""


@pytest.mark.parametrize("mode", MODES)
def test_replicas_are_kept_apart_and_the_third_is_refused(
    make_node: NodeFactory, mode: str
) -> None:
    node = make_node("xeon-2s-2numa", mode)
    placed = []
    for n in range(2):
        _, cid = node.guaranteed(
            f"db-{n}", 2, annotations={"numa-agent.io/affinity": APART}, labels={"app": "db"}
        )
        placed.append(CPUSet.parse(node.cpus(cid)))
    sockets = [{s.id for s in node.machine.sockets if s.cpus & cpus} for cpus in placed]
    assert sockets[0] != sockets[1]
    with pytest.raises(CRIError) as refused:
        node.guaranteed(
            "db-2", 2, annotations={"numa-agent.io/affinity": APART}, labels={"app": "db"}
        )
    assert refused.value.code == grpc.StatusCode.FAILED_PRECONDITION
    details = refused.value.details
    assert details.startswith("cannot place container 'db-2' of pod default/db-2: ")
    assert (
        "numa-agent.io/affinity: podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0]"
        in details
    )
    assert "every socket already runs a pod matching app=db" in details
    # Nothing reached the runtime for the refused container.
    assert [c for c in node.calls("CreateContainer") if c.config.metadata.name == "db-2"] == []


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    ("annotation", "value", "path"),
    [
        (
            "numa-agent.io/affinity",
            "podAntiAffinity:\n  requiredDuringSchedulingIgnoredDuringExecution:\n"
            "  - labelSelector: {}\n    topologyKey: topology.kubernetes.io/zone\n",
            "podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey",
        ),
        (
            "numa-agent.io/affinity",
            "podAffinity:\n  preferredDuringSchedulingIgnoredDuringExecution:\n"
            "  - weight: 101\n    podAffinityTerm: {topologyKey: numa-agent.io/numa}\n",
            "podAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight",
        ),
        (
            "numa-agent.io/topology-spread-constraints",
            "- {maxSkew: 1, topologyKey: numa-agent.io/numa, labelSelector: {}, colour: red}\n",
            "[0]",
        ),
    ],
)
def test_bad_rules_are_invalid_argument_naming_the_path(
    make_node: NodeFactory, mode: str, annotation: str, value: str, path: str
) -> None:
    node = make_node("desktop-1s-4c-ht", mode)
    sandbox = node.pod("bad", QoSClass.BURSTABLE, annotations={annotation: value})
    with pytest.raises(CRIError) as refused:
        node.container(sandbox, "app", 500)
    assert refused.value.code == grpc.StatusCode.INVALID_ARGUMENT
    details = refused.value.details
    assert details.startswith("cannot place container 'app' of pod default/bad: ")
    assert f"{annotation}: {path}" in details
    assert not node.calls("CreateContainer")
