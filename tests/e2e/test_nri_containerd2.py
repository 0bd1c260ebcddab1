"""End to end through the other front door: numa-agent as an NRI plugin of a real
containerd 2 (NRI on) with real runc. Pods are created through containerd's own
CRI socket, as kubelet would with nothing changed; the kernel's view
(/proc/<pid>/status) is the judge.

containerd 2 is not packaged here: point NUMA_AGENT_CONTAINERD2_DIR at a directory
with containerd, containerd-shim-runc-v2, ctr and runc built from source
(docs/install.md says how). Unset, these tests skip and say so.
"""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from agent.config import config_from_mapping
from agent.daemon import Daemon
from agent.kubelet import kubelet_container_config
from agent.workload import QoSClass
from devtools.containerd import (
    CONTAINERD2_ENV,
    PrivateContainerd,
    containerd2_dir,
    missing_prerequisites,
)
from devtools.criclient import CRIError
from devtools.pods import sleeper_config
from tests.e2e.conftest import Pods
from topology.cpuset import CPUSet

pytestmark = [pytest.mark.root, pytest.mark.containerd]
SYNC_WAIT_S = 20.0


@pytest.fixture(scope="module")
def containerd2() -> Iterator[PrivateContainerd]:
    bin_dir = containerd2_dir()
    if bin_dir is None:
        pytest.skip(
            f"SKIPPED LOUDLY: {CONTAINERD2_ENV} is not set, so the NRI end-to-end tests on "
            "containerd 2 did not run; build containerd 2, its shim and runc (docs/install.md) "
            f"and set {CONTAINERD2_ENV} to their directory"
        )
    missing = missing_prerequisites(bin_dir)
    if missing:
        pytest.skip("containerd 2 cannot run here: " + "; ".join(missing))
    base = Path(tempfile.mkdtemp(prefix="numa-c2-"))
    env = PrivateContainerd(base, bin_dir=bin_dir)
    try:
        env.start(timeout=60)
        yield env
    finally:
        env.stop()
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def state_dir() -> Iterator[Path]:
    base = Path(tempfile.mkdtemp(prefix="numa-c2-agent-"))
    yield base
    shutil.rmtree(base, ignore_errors=True)


def start_plugin(containerd2: PrivateContainerd, state_dir: Path) -> Daemon:
    config = dataclasses.replace(
        config_from_mapping(
            {
                "nri_socket": str(containerd2.paths.nri_socket),
                "runtime_endpoint": containerd2.endpoint,
                "state_dir": str(state_dir / "state"),
                "feature_file": "",  # never the host's NFD directory
            }
        ),
        listen=f"unix://{state_dir}/agent.sock",  # only where the status socket goes
    )
    assert not config.serve_cri
    daemon = Daemon(config)
    daemon.start()
    assert daemon.nri is not None
    assert daemon.nri.plugin.wait_synchronized(1, SYNC_WAIT_S), "containerd never synchronized"
    return daemon


@pytest.fixture
def plugin(containerd2: PrivateContainerd, state_dir: Path) -> Iterator[Daemon]:
    daemon = start_plugin(containerd2, state_dir)
    yield daemon
    daemon.stop()


@pytest.fixture
def pods(containerd2: PrivateContainerd) -> Iterator[Pods]:
    """Pods created through containerd's own CRI socket (kubelet's view unchanged)."""
    tracker = Pods(containerd2)
    yield tracker
    tracker.remove_all()


def run(pods: Pods, name: str, qos: QoSClass, milli: int, **kw: object) -> tuple[str, str]:
    pod = pods.pod_config(name, qos=qos, annotations=kw.get("annotations"))  # type: ignore[arg-type]
    sandbox = pods.run(pod)
    config = sleeper_config(pod, qos, milli, pods.containerd.image)
    return sandbox, pods.start_container(sandbox, pod, config)


def kernel_cpus(containerd: PrivateContainerd, container_id: str) -> CPUSet:
    return CPUSet.parse(containerd.proc_status(container_id).cpus_allowed)


def test_exclusive_cpus_in_the_kernels_view_and_shared_moved_off_and_back(
    containerd2: PrivateContainerd, plugin: Daemon, pods: Pods
) -> None:
    _, batch = run(pods, "batch", QoSClass.BESTEFFORT, 0)
    all_cpus = kernel_cpus(containerd2, batch)
    assert len(all_cpus) >= 2, "needs a machine with at least 2 CPUs"

    sandbox, latency = run(pods, "latency", QoSClass.GUARANTEED, 1000)
    own = kernel_cpus(containerd2, latency)
    assert len(own) == 1
    # containerd applied the update in CreateContainer's reply before answering.
    assert kernel_cpus(containerd2, batch) == all_cpus - own
    assert plugin.node is not None
    placed = {p.container_id: p for p in plugin.node.placements()}
    assert placed[latency].exclusive and CPUSet.parse(placed[latency].cpuset_cpus) == own

    pods.remove(sandbox)  # StopContainer's reply gives the CPU back
    assert kernel_cpus(containerd2, batch) == all_cpus


def test_a_cpuset_update_keeps_the_containers_other_resources(
    containerd2: PrivateContainerd, plugin: Daemon, pods: Pods
) -> None:
    """The plugin's updates carry only cpusets: containerd keeps shares and limits."""
    _, web = run(pods, "web", QoSClass.BURSTABLE, 200)
    before = containerd2.client().container_status(web).status.resources.linux
    sandbox, _ = run(pods, "latency", QoSClass.GUARANTEED, 1000)
    after = containerd2.client().container_status(web).status.resources.linux
    assert after.cpuset_cpus != before.cpuset_cpus  # moved off the exclusive CPU
    assert (after.cpu_shares, after.cpu_quota, after.memory_limit_in_bytes) == (
        before.cpu_shares,
        before.cpu_quota,
        before.memory_limit_in_bytes,
    )
    assert after.cpu_shares == 200 * 1024 // 1000
    pods.remove(sandbox)


def test_a_bad_annotation_fails_the_creation_naming_container_and_annotation(
    containerd2: PrivateContainerd, plugin: Daemon, pods: Pods
) -> None:
    bad = {"cri-resource-manager.intel.com/affinity": "app:\n- match: {key: name, operator: Equal}"}
    pod = pods.pod_config("typo", qos=QoSClass.BURSTABLE, annotations=bad)
    sandbox = pods.run(pod)
    config = kubelet_container_config(
        pod, "app", 100, 0, 0, image=containerd2.image, command=["/bin/sleep", "3600"]
    )
    with pytest.raises(CRIError) as err:
        pods.client.create_container(sandbox, config, pod)
    # What kubelet would get back from containerd (and show as CreateContainerError).
    assert err.value.code == grpc.StatusCode.INVALID_ARGUMENT  # the plugin's code, kept
    assert "cri-resource-manager.intel.com/affinity" in err.value.details
    assert 'container "app", rule 1' in err.value.details
    assert "failed to get NRI adjustment" in err.value.details
    assert not [c for c in pods.client.list_containers() if c.pod_sandbox_id == sandbox]


def test_a_plugin_restart_moves_nothing(
    containerd2: PrivateContainerd, state_dir: Path, pods: Pods
) -> None:
    first = start_plugin(containerd2, state_dir)
    try:
        _, batch = run(pods, "batch", QoSClass.BESTEFFORT, 0)
        _, latency = run(pods, "latency", QoSClass.GUARANTEED, 1000)
        before = {cid: kernel_cpus(containerd2, cid) for cid in (batch, latency)}
        assert first.node is not None
        placements = first.node.placements()
    finally:
        first.stop()
    # Down: containerd runs containers without the plugin (no cpuset from us).
    second = start_plugin(containerd2, state_dir)
    try:
        assert {cid: kernel_cpus(containerd2, cid) for cid in before} == before
        assert second.node is not None
        assert second.node.placements() == placements
    finally:
        second.stop()


def test_a_required_plugin_makes_creation_fail_while_it_is_away(state_dir: Path) -> None:
    """docs/install.md's recipe: NRI's default validator with required_plugins."""
    bin_dir = containerd2_dir()
    if bin_dir is None:
        pytest.skip(f"SKIPPED LOUDLY: {CONTAINERD2_ENV} is not set")
    base = Path(tempfile.mkdtemp(prefix="numa-c2r-"))
    ctrd = PrivateContainerd(base, bin_dir=bin_dir, nri_required=("numa-agent",))
    try:
        ctrd.start(timeout=60)
        pods = Pods(ctrd)
        pod = pods.pod_config("needs-it", qos=QoSClass.BESTEFFORT)
        sandbox = pods.run(pod)
        config = kubelet_container_config(
            pod, "app", image=ctrd.image, command=["/bin/sleep", "3600"]
        )
        with pytest.raises(CRIError) as err:
            pods.client.create_container(sandbox, config, pod)
        assert 'required plugin "numa-agent" not present' in err.value.details
        daemon = start_plugin(ctrd, state_dir)
        try:
            assert pods.start_container(sandbox, pod, config)
        finally:
            pods.remove_all()
            daemon.stop()
    finally:
        ctrd.stop()
        shutil.rmtree(base, ignore_errors=True)
