"""Decoding kubelet's messages into the agent's values."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from agent.kubelet import kubelet_container_resources, kubelet_pod_config
from agent.node.describe import (
    container_pod,
    pod_from_config,
    qos_from_resources,
    qos_of_pod,
    resources_of,
)
from agent.node.fingerprint import machine_fingerprint
from agent.node.runtime_access import cgroup_parent_from_info
from agent.policy.request import Resources
from agent.workload import QoSClass
from topology.tree import Machine


@pytest.mark.parametrize(
    ("request_milli", "limit_milli", "memory", "qos"),
    [
        (2000, 2000, 1 << 30, QoSClass.GUARANTEED),
        (500, 500, 0, QoSClass.GUARANTEED),
        (500, 1000, 0, QoSClass.BURSTABLE),
        (500, 0, 0, QoSClass.BURSTABLE),
        (0, 0, 1 << 30, QoSClass.BURSTABLE),
        (0, 0, 0, QoSClass.BESTEFFORT),
    ],
)
def test_qos_approximated_from_resources(
    request_milli: int, limit_milli: int, memory: int, qos: QoSClass
) -> None:
    linux = kubelet_container_resources(request_milli, limit_milli, memory)
    assert qos_from_resources(resources_of(linux)) is qos


@pytest.mark.parametrize("driver", ["systemd", "cgroupfs"])
@pytest.mark.parametrize("qos", list(QoSClass))
def test_cgroup_parent_wins_over_resources(driver: str, qos: QoSClass) -> None:
    config = kubelet_pod_config("p", "ns", "u-1", qos=qos, cgroup_driver=driver)
    pod = pod_from_config("sb1", config)
    assert (pod.qosclass, pod.id, pod.uid, pod.namespace) == (qos, "sb1", "u-1", "ns")
    # A BestEffort-looking container of a Guaranteed pod stays Guaranteed, and vice versa.
    res = resources_of(kubelet_container_resources(1000, 1000))
    assert container_pod(pod, res).qosclass is qos


def test_unknown_cgroup_parent_uses_the_containers_resources() -> None:
    config = kubelet_pod_config("p", "ns", "u-1")
    config.linux.cgroup_parent = "/custom/slice"
    pod = pod_from_config("sb1", config)
    res = resources_of(kubelet_container_resources(1000, 1000))
    assert container_pod(pod, res).qosclass is QoSClass.GUARANTEED


def test_only_the_annotations_the_agent_reads_are_kept() -> None:
    annotations = {
        "kubectl.kubernetes.io/last-applied-configuration": "x" * 100_000,
        "cri-resource-manager.intel.com/affinity": "web: [cache]",
        "cri-resource-manager.intel.com/anti-affinity": "web: [web]",
        "prefer-shared-cpus.cri-resource-manager.intel.com/pod": "true",
        "prefer-isolated-cpus.cri-resource-manager.intel.com/container.web": "false",
        "numa-agent.io/affinity": "{}",
        "example.com/other": "y",
    }
    config = kubelet_pod_config("p", "ns", "u-1", annotations=annotations)
    kept = pod_from_config("sb1", config).annotations
    assert set(kept) == set(annotations) - {
        "kubectl.kubernetes.io/last-applied-configuration",
        "example.com/other",
    }


def test_fingerprint_follows_the_topology(machines: Callable[[str], Machine]) -> None:
    get = machines
    a = machine_fingerprint(get("desktop-1s-4c-ht"))
    b = machine_fingerprint(get("xeon-2s-2numa"))
    assert a != b and len(a) == 64
    assert a == machine_fingerprint(get("desktop-1s-4c-ht"))


@pytest.mark.parametrize(
    ("containers", "expected"),
    [
        ([(1000, 1000, 1 << 30)], QoSClass.GUARANTEED),
        ([(1000, 1000, 1 << 30), (100, 0, 0)], QoSClass.BURSTABLE),  # the sidecar counts
        ([(1000, 1000, 0)], QoSClass.BURSTABLE),  # no memory limit: not Guaranteed
        ([(0, 0, 0), (0, 0, 0)], QoSClass.BESTEFFORT),
        ([], QoSClass.BESTEFFORT),
    ],
)
def test_a_pods_class_without_a_cgroup_parent_is_judged_over_all_its_containers(
    containers: list[tuple[int, int, int]], expected: QoSClass
) -> None:
    resources = [
        Resources(
            cpu_shares=max(request * 1024 // 1000, 2) if request else 2,
            cpu_quota=limit * 100 if limit else 0,
            cpu_period=100_000 if limit else 0,
            memory_limit_bytes=memory,
        )
        for request, limit, memory in containers
    ]
    assert qos_of_pod(resources) is expected


def test_the_cgroup_parent_comes_from_a_verbose_pod_sandbox_status() -> None:
    info = {"info": '{"config": {"linux": {"cgroup_parent": "/kubepods/burstable/pod1"}}}'}
    assert cgroup_parent_from_info(info) == "/kubepods/burstable/pod1"
    for broken in ({}, {"info": "not json"}, {"info": '{"config": 3}'}, {"info": "[]"}):
        assert cgroup_parent_from_info(broken) == ""
