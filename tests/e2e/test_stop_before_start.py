"""A created container's exclusive CPUs are held as long as it could still run.

containerd 1.6 answers StopContainer of a container that never started with OK,
leaves it CREATED, and starts it on a later StartContainer (seen on these
machines). So the agent keeps tracking it as a live container until it is
removed (or seen exited): otherwise two Guaranteed containers would run on one
CPU. Its exclusive CPUs then stay its pod's until the sandbox stops (a pod's
place holds for its whole life, docs/pod-rules.md). Needs root and containerd.
"""

from __future__ import annotations

import grpc
import pytest

from agent.workload import QoSClass
from devtools.containerd import PrivateContainerd
from devtools.criclient import CRIError
from proto import cri_pb2
from tests.e2e import test_kernel_truth
from tests.e2e.test_kernel_truth import AgentFactory, create, kernel, settle

pytestmark = [pytest.mark.root, pytest.mark.containerd]

make_agent = test_kernel_truth.make_agent  # the fixture, shared


def test_a_container_stopped_before_it_started_keeps_its_cpus_until_its_pod_stops(
    containerd: PrivateContainerd, make_agent: AgentFactory
) -> None:
    daemon, pods = make_agent()
    _, batch = create(pods, "batch", QoSClass.BESTEFFORT, 0)
    pods.client.start_container(batch)
    early_pod, early = create(pods, "early", QoSClass.GUARANTEED, 1000)
    pods.client.stop_container(early)
    # What containerd does with it: still created, and it can still start.
    direct = containerd.client()
    assert direct.container_status(early).status.state == cri_pb2.CONTAINER_CREATED
    # Its CPU is still its own: a second exclusive CPU would take the last shared one.
    with pytest.raises(CRIError) as refused:
        create(pods, "late", QoSClass.GUARANTEED, 1000)
    assert refused.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED
    pods.client.start_container(early)
    settle(daemon)
    own = kernel(containerd, early)
    assert len(own) == 1 and kernel(containerd, batch).isdisjoint(own)
    # Removed, the CPU stays the pod's (a re-create would get it back) ...
    pods.client.stop_container(early)
    pods.client.remove_container(early)
    with pytest.raises(CRIError) as still:
        create(pods, "late1", QoSClass.GUARANTEED, 1000)
    assert still.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED
    # ... until its sandbox stops: free again.
    pods.client.stop_pod_sandbox(early_pod)
    _, late = create(pods, "late2", QoSClass.GUARANTEED, 1000)
    pods.client.start_container(late)
    settle(daemon)
    assert kernel(containerd, batch).isdisjoint(kernel(containerd, late))
