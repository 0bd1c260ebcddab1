"""Huge requests under a memory cgroup of the unit's size (MemoryMax=512M; cgroup v1
here: memory.limit_in_bytes). One 96 MiB CreateContainer and 16 concurrent 15 MiB
ones (each under kubelet's own 16 MiB cap) once got the agent OOM-killed: now the
first is refused before it is read, the others share a byte budget, and the agent
lives on and answers."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc
import pytest

from agent.kubelet import kubelet_container_config
from devtools.criclient import CRIClient, CRIError
from proto import cri_pb2
from tests.robust.harness import RuntimeServer, Site, run_pod
from tests.robust.privileges import require_root

MEMORY_ROOT = Path("/sys/fs/cgroup/memory")
UNIT = Path(__file__).resolve().parents[2] / "systemd" / "numa-agent.service"
MIB = 1 << 20


def unit_memory_max() -> int:
    """MemoryMax= of the shipped unit, in bytes (the test follows the unit)."""
    match = re.search(r"^MemoryMax=(\d+)M$", UNIT.read_text(), re.MULTILINE)
    assert match, "no MemoryMax=<n>M in the unit"
    return int(match.group(1)) * MIB


@pytest.fixture
def memory_cgroup() -> Iterator[Path]:
    require_root("a memory cgroup")
    if not (MEMORY_ROOT / "memory.limit_in_bytes").exists():
        pytest.skip("no cgroup v1 memory controller at /sys/fs/cgroup/memory")
    group = MEMORY_ROOT / f"numa-agent-test-{uuid.uuid4().hex[:8]}"
    group.mkdir()
    try:
        (group / "memory.limit_in_bytes").write_text(str(unit_memory_max()))
        yield group
    finally:
        for pid in (group / "cgroup.procs").read_text().split():
            (MEMORY_ROOT / "cgroup.procs").write_text(pid)
        group.rmdir()


def _create(path: Path, sandbox: str, pod: cri_pb2.PodSandboxConfig, name: str, size: int) -> str:
    config = kubelet_container_config(pod, name, 0, 0, 0)
    config.annotations["blob"] = "x" * size
    request = cri_pb2.CreateContainerRequest(
        pod_sandbox_id=sandbox, config=config, sandbox_config=pod
    ).SerializeToString()
    options = [("grpc.max_send_message_length", -1), ("grpc.max_receive_message_length", -1)]
    with grpc.insecure_channel(f"unix://{path}", options=options) as channel:
        call = channel.unary_unary("/runtime.v1.RuntimeService/CreateContainer")
        try:
            call(request, timeout=60)
        except grpc.RpcError as err:
            return str(err.code().name)
    return "OK"


def test_huge_requests_never_push_the_agent_past_its_units_memory(
    site: Site, runtime_server: RuntimeServer, memory_cgroup: Path
) -> None:
    agent = site.start(runtime_server.endpoint, cgroup_procs=memory_cgroup / "cgroup.procs")
    try:
        assert str(agent.proc.pid) in (memory_cgroup / "cgroup.procs").read_text().split()
        with agent.client() as client:
            sandbox, pod = run_pod(client, "big")
        assert _create(site.listen, sandbox, pod, "huge", 96 * MIB) == "RESOURCE_EXHAUSTED"
        with ThreadPoolExecutor(16) as pool:
            outcomes = list(
                pool.map(lambda i: _create(site.listen, sandbox, pod, f"c{i}", 15 * MIB), range(16))
            )
        assert agent.proc.poll() is None, f"the agent died: {outcomes}"
        assert "RESOURCE_EXHAUSTED" in outcomes  # the budget refused some at once
        with CRIClient(str(site.listen), timeout=10) as client:
            client.version()
            try:
                client.list_containers()
            except CRIError as err:  # the runtime's own reply limit, not the agent's
                assert err.code == grpc.StatusCode.RESOURCE_EXHAUSTED
        peak = int((memory_cgroup / "memory.max_usage_in_bytes").read_text())
        failcnt = int((memory_cgroup / "memory.failcnt").read_text())
        print(
            f"peak {peak / MIB:.0f} MiB of {unit_memory_max() / MIB:.0f} MiB; outcomes {outcomes}"
        )
        assert failcnt == 0, f"the agent hit its memory limit {failcnt} times (peak {peak})"
    finally:
        code, stderr = agent.stop()
    assert code == 0, stderr[-3000:]
