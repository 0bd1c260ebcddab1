"""Hostile input through the real relay (unix sockets, node agent hooks, the
in-memory runtime behind): random bytes as request bodies of every hooked
method, and well-formed requests with hostile field values. Every call gets a
proper status (never UNKNOWN/INTERNAL from a Python exception), no thread and
no allocation is leaked."""

from __future__ import annotations

import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
import yaml
from google.protobuf.message import DecodeError
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from agent.affinity import ANNOTATION_AFFINITY, ANNOTATION_ANTI_AFFINITY
from agent.kubelet import kubelet_container_config, kubelet_pod_config
from agent.node import agent as node_agent
from agent.node.agent import NodeAgent
from agent.node.runtime_access import GrpcRuntimeAccess
from agent.policy.config import PolicyConfig
from agent.relay.server import RelayServer
from agent.workload import QoSClass
from devtools.criclient import CRIClient, CRIError
from devtools.fakesysfs import write_shape
from proto import cri_pb2
from tests.robust.harness import RuntimeServer, live
from tests.waiting import LIMIT_S, wait_until
from topology.cpuset import CPUSet
from topology.sysfs import read_machine

# Statuses that mean "a Python exception escaped" rather than an answer.
CRASH_CODES = {grpc.StatusCode.UNKNOWN, grpc.StatusCode.INTERNAL}

HOOKED: dict[str, Any] = {
    node_agent.RUN_POD_SANDBOX: cri_pb2.RunPodSandboxRequest,
    node_agent.STOP_POD_SANDBOX: cri_pb2.StopPodSandboxRequest,
    node_agent.REMOVE_POD_SANDBOX: cri_pb2.RemovePodSandboxRequest,
    node_agent.CREATE_CONTAINER: cri_pb2.CreateContainerRequest,
    node_agent.STOP_CONTAINER: cri_pb2.StopContainerRequest,
    node_agent.REMOVE_CONTAINER: cri_pb2.RemoveContainerRequest,
    node_agent.UPDATE_CONTAINER_RESOURCES: cri_pb2.UpdateContainerResourcesRequest,
    node_agent.LIST_CONTAINERS: cri_pb2.ListContainersRequest,
    node_agent.CONTAINER_STATUS: cri_pb2.ContainerStatusRequest,
}


@dataclass
class Fuzzed:
    server: RuntimeServer
    node: NodeAgent
    relay: RelayServer
    channel: grpc.Channel
    client: CRIClient
    machine_cpus: CPUSet

    def raw(self, method: str, body: bytes) -> grpc.StatusCode:
        call = self.channel.unary_unary(method)
        try:
            call(body, timeout=10)
        except grpc.RpcError as err:
            code: grpc.StatusCode = err.code()
            return code
        return grpc.StatusCode.OK


@pytest.fixture(scope="module")
def fuzzed() -> Iterator[Fuzzed]:
    with tempfile.TemporaryDirectory(prefix="na-fz-", dir="/tmp") as d:
        base = Path(d)
        machine = read_machine(write_shape("desktop-1s-4c-ht", base / "sysfs"), cpu_info=False)
        server = RuntimeServer(base / "rt.sock").up()
        access = GrpcRuntimeAccess(server.endpoint, timeout=10)
        node = NodeAgent(
            machine,
            PolicyConfig.from_mapping({"reserved_cpus": "0"}),
            access,
            background_updates=True,
        )
        node.start()
        relay = RelayServer(str(base / "agent.sock"), server.endpoint, hooks=node.relay_hooks())
        relay.start()
        channel = grpc.insecure_channel(f"unix://{relay.path}")
        client = CRIClient(relay.path, timeout=10)
        yield Fuzzed(server, node, relay, channel, client, machine.cpus)
        client.close()
        channel.close()
        relay.stop(0)
        node.close()
        access.close()
        server.down()


def _decodes(kind: Any, body: bytes) -> bool:
    try:
        kind.FromString(body)
    except DecodeError:
        return False
    return True


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(method=st.sampled_from(sorted(HOOKED)), body=st.binary(max_size=300))
def test_random_bytes_get_a_proper_status(fuzzed: Fuzzed, method: str, body: bytes) -> None:
    code = fuzzed.raw(method, body)
    event(code.name)
    assert code not in CRASH_CODES, (method, body)
    if not _decodes(HOOKED[method], body):
        assert code == grpc.StatusCode.INVALID_ARGUMENT, (method, body, code)


# ----------------------------------------------------------------------------- field values

huge = st.text(min_size=5000, max_size=20000)
texts = st.one_of(st.text(max_size=40), huge, st.sampled_from(["", "\x00", "😀🧠", "../../etc"]))
int64 = st.one_of(
    st.integers(-(2**63), 2**63 - 1),
    st.sampled_from([0, -1, 2, 1024, 100000, -100000, 2**62]),
)
cgroup_parents = st.one_of(
    texts,
    st.sampled_from(
        [
            "kubepods-pod1.slice",
            "/kubepods/burstable/podx",
            "kubepods-besteffort-pod.slice",
            "/kubepods/pod/",
            "/sys/fs/cgroup/../../",
        ]
    ),
)
cpusets = st.one_of(texts, st.sampled_from(["0-3", "7-1", "1,,2", "-1", "0-99999", "a-b", " 1 "]))

yaml_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=20)),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=12,
)
annotation_texts = st.one_of(
    st.text(max_size=200),
    yaml_values.map(lambda v: yaml.safe_dump(v)),
    st.sampled_from(
        [
            "app: [db]",
            "app:\n- match: {key: name, operator: Equals, values: [db]}\n  weight: 5",
            "&a [*a]",
            "app: !!python/object/apply:os.system ['true']",
            "a: " + "[" * 200,
        ]
    ),
)


@st.composite
def create_requests(draw: st.DrawFn) -> tuple[cri_pb2.PodSandboxConfig, cri_pb2.ContainerConfig]:
    qos = draw(st.sampled_from(list(QoSClass)))
    annotations = draw(
        st.dictionaries(
            st.sampled_from([ANNOTATION_AFFINITY, ANNOTATION_ANTI_AFFINITY, "other"]),
            annotation_texts,
            max_size=2,
        )
    )
    pod = kubelet_pod_config(
        draw(st.text(min_size=1, max_size=30)),
        draw(st.text(max_size=30)),
        draw(st.text(max_size=40)),
        labels=draw(st.dictionaries(texts, texts, max_size=3)),
        annotations=annotations,
        qos=qos,
    )
    pod.linux.cgroup_parent = draw(cgroup_parents)
    config = kubelet_container_config(
        pod, draw(texts), draw(st.integers(0, 8000)), draw(st.integers(0, 8000))
    )
    res = config.linux.resources
    res.cpu_shares = draw(int64)
    res.cpu_quota = draw(int64)
    res.cpu_period = draw(int64)
    res.memory_limit_in_bytes = draw(int64)
    res.cpuset_cpus = draw(cpusets)
    res.cpuset_mems = draw(cpusets)
    return pod, config


ANSWERS = {
    grpc.StatusCode.OK,
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
}


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(request=create_requests(), update=st.tuples(int64, int64, int64, cpusets))
def test_hostile_field_values_get_a_proper_status(
    fuzzed: Fuzzed,
    request: tuple[cri_pb2.PodSandboxConfig, cri_pb2.ContainerConfig],
    update: tuple[int, int, int, str],
) -> None:
    pod, config = request
    client = fuzzed.client
    sandbox = client.run_pod_sandbox(pod)
    try:
        try:
            cid = client.create_container(sandbox, config, pod)
        except CRIError as err:
            event(f"create: {err.code.name}")
            assert err.code in ANSWERS, err
            return
        event("create: OK")
        client.start_container(cid)
        linux = cri_pb2.LinuxContainerResources()
        linux.CopyFrom(config.linux.resources)
        linux.cpu_shares, linux.cpu_quota, linux.cpu_period, linux.cpuset_cpus = update
        try:
            client.update_container_resources(cid, linux)
        except CRIError as err:
            assert err.code in ANSWERS, err
        client.container_status(cid)
        client.list_containers()
    finally:
        client.stop_pod_sandbox(sandbox)
        client.remove_pod_sandbox(sandbox)


def _threads_beside_the_pools() -> int:
    """Threads other than pool workers (the relay's, and the runtime's bounded
    ThreadPoolExecutor), which start as calls come and end when idle for a while."""
    pools = ("relay-", "ThreadPoolExecutor-")
    return sum(not t.name.startswith(pools) for t in threading.enumerate())


def test_nothing_leaked_after_the_fuzzing(fuzzed: Fuzzed) -> None:
    """Runs after the fuzz tests in this module: every pod was removed, so the agent
    holds nothing, the runtime runs nothing, and threads did not pile up."""
    assert fuzzed.node.wait_for_updates(LIMIT_S)
    assert fuzzed.node.placements() == []
    assert live(fuzzed.server.runtime) == {}
    baseline, pooled = _threads_beside_the_pools(), fuzzed.relay.threads()
    for _ in range(50):
        fuzzed.raw(node_agent.CREATE_CONTAINER, b"\xff")
        fuzzed.client.list_containers()
    # No call is left in flight, and threads settle back: none outside the pools, and
    # the relay's pool grew by a thread or two at most (a call arriving while the last
    # one's thread is still finishing gets a new one), not by one per call made.
    wait_until(lambda: not any(fuzzed.relay.in_flight().values()), what="no call in flight")
    wait_until(lambda: _threads_beside_the_pools() <= baseline, what=f"at most {baseline} threads")
    assert fuzzed.relay.threads() <= pooled + 2
    # Everything is free again: one BestEffort container gets every usable CPU.
    pod = kubelet_pod_config("probe", "default", "uid-probe")
    sandbox = fuzzed.client.run_pod_sandbox(pod)
    cid = fuzzed.client.create_container(sandbox, kubelet_container_config(pod, "probe"), pod)
    status = fuzzed.client.container_status(cid).status
    assert CPUSet.parse(status.resources.linux.cpuset_cpus) == fuzzed.machine_cpus - CPUSet.of([0])
    fuzzed.client.remove_pod_sandbox(sandbox)
