"""Decoding kubelet's messages into the agent's values, and their JSON form."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from agent.kubelet import kubelet_container_resources, kubelet_pod_config
from agent.node.describe import (
    StateFormatError,
    container_from_json,
    container_info,
    container_pod,
    container_to_json,
    linux_from_json,
    linux_to_json,
    pod_from_config,
    pod_from_json,
    qos_from_resources,
    resources_of,
)
from agent.node.fingerprint import machine_fingerprint
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


def test_json_round_trip() -> None:
    config = kubelet_pod_config(
        "p", "ns", "u-1", labels={"app": "x"}, annotations={"a": "b"}, qos=QoSClass.BURSTABLE
    )
    info = container_info("c", pod_from_config("sb1", config), {"l": "1"}, {"t": "2"})
    assert container_from_json(container_to_json(info), "c") == info
    linux = kubelet_container_resources(1500, 2000, 1 << 30, cpuset_cpus="1-3")
    linux.cpuset_mems = "0"
    assert linux_from_json(linux_to_json(linux), "r") == linux


@pytest.mark.parametrize(
    ("data", "names"),
    [
        ({"uid": 1, "qosclass": "Guaranteed"}, r"p\.uid: expected str"),
        ([], "p: expected an object"),
        ({"qosclass": "Gold"}, r"p\.qosclass: unknown QoS class 'Gold'"),
    ],
)
def test_bad_saved_pod_names_the_field(data: object, names: str) -> None:
    with pytest.raises(StateFormatError, match=names):
        pod_from_json(data, "p")


def test_bad_saved_resources_name_the_record() -> None:
    with pytest.raises(StateFormatError, match=r"containers\.x\.resources"):
        linux_from_json({"cpu_shares": "many"}, "containers.x.resources")


def test_fingerprint_follows_the_topology(machines: Callable[[str], Machine]) -> None:
    get = machines
    a = machine_fingerprint(get("desktop-1s-4c-ht"))
    b = machine_fingerprint(get("xeon-2s-2numa"))
    assert a != b and len(a) == 64
    assert a == machine_fingerprint(get("desktop-1s-4c-ht"))
