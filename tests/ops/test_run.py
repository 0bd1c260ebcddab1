"""`numa-agent run` as an operator runs it: a real process, signals, readiness, state.

The agent serves a fake 2-socket machine in front of the in-memory runtime
(served over gRPC on a unix socket); readiness is systemd's READY=1 datagram.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest

from agent.kubelet import kubelet_container_config, kubelet_pod_config
from agent.state.journal import saved_payload
from agent.workload import QoSClass
from devtools.criclient import CRIClient, CRIError
from devtools.fake_runtime import FaultyRuntime, serve_memory_runtime
from devtools.fakesysfs import write_shape
from topology.cpuset import CPUSet

READY_TIMEOUT_S = 30.0


@dataclass
class AgentProcess:
    proc: subprocess.Popen[bytes]
    notify: socket.socket
    listen: Path
    state_dir: Path
    config: Path

    def wait_message(self, expected: bytes) -> None:
        """Block until systemd's socket receives `expected` (bounded by the socket timeout)."""
        while True:
            try:
                message = self.notify.recv(256)
            except TimeoutError:
                self.proc.kill()
                _, err = self.proc.communicate()
                raise AssertionError(
                    f"no {expected!r} from the agent; stderr:\n{err.decode()}"
                ) from None
            if message == expected:
                return

    def stop(self) -> tuple[int, str]:
        self.proc.send_signal(signal.SIGTERM)
        _, err = self.proc.communicate(timeout=30)
        return self.proc.returncode, err.decode()


@pytest.fixture
def runtime(tmp_path: Path) -> Iterator[tuple[str, FaultyRuntime]]:
    path = tmp_path / "runtime.sock"
    server, runtime = serve_memory_runtime(path)
    yield f"unix://{path}", runtime
    server.stop(None)


def start_agent(
    tmp_path: Path, runtime_endpoint: str, extra: list[str] | None = None
) -> AgentProcess:
    sysfs = write_shape("xeon-2s-2numa", tmp_path / "sysfs")
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notify_path = tmp_path / f"notify-{uuid.uuid4().hex[:6]}"
    notify.bind(str(notify_path))
    notify.settimeout(READY_TIMEOUT_S)
    config = tmp_path / "config.yaml"
    if not config.exists():
        config.write_text("reserved_cpus: '0,40'\nlog_format: json\n")
    listen = tmp_path / "agent" / "numa-agent.sock"
    state_dir = tmp_path / "state"
    cmd = [
        sys.executable, "-m", "agent.cli", "run",
        "--config", str(config),
        "--runtime-endpoint", runtime_endpoint,
        "--listen", str(listen),
        "--state-dir", str(state_dir),
        "--sysfs-root", str(sysfs),
        "--runtime-wait", "5",
        "--feature-file", "",  # never the host's NFD directory
        *(extra or []),
    ]  # fmt: skip
    env = {**os.environ, "NOTIFY_SOCKET": str(notify_path)}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    return AgentProcess(proc, notify, listen, state_dir, config)


def guaranteed_pod(client: CRIClient, name: str, cpus: int) -> str:
    pod = kubelet_pod_config(name, "default", str(uuid.uuid4()), qos=QoSClass.GUARANTEED)
    sandbox = client.run_pod_sandbox(pod)
    config = kubelet_container_config(pod, "app", cpus * 1000, cpus * 1000, 1 << 30)
    container = client.create_container(sandbox, config, pod)
    client.start_container(container)
    return container


def test_serves_signals_and_keeps_state(tmp_path: Path, runtime: tuple[str, FaultyRuntime]) -> None:
    endpoint, _ = runtime
    agent = start_agent(tmp_path, endpoint)
    agent.wait_message(b"READY=1")
    # The socket is there, mode 0660, and it places containers.
    assert (agent.listen.stat().st_mode & 0o777) == 0o660
    with CRIClient(str(agent.listen)) as client:
        assert client.version().runtime_name
        container = guaranteed_pod(client, "db", 4)
        cpus = CPUSet.parse(client.container_status(container).status.resources.linux.cpuset_cpus)
        assert len(cpus) == 4 and not cpus & CPUSet.parse("0,40"), cpus  # reserved stay out

        # SIGHUP with a broken file: refused with a log line, the agent keeps serving.
        agent.config.write_text("log_level: shout\n")
        agent.proc.send_signal(signal.SIGHUP)
        client.version()
        # A second agent on the same socket refuses to start and says why.
        second = subprocess.run(
            [sys.executable, "-m", "agent.cli", "run", "--runtime-endpoint", endpoint,
             "--listen", str(agent.listen), "--state-dir", str(tmp_path / "s2"),
             "--sysfs-root", str(tmp_path / "sysfs"), "--runtime-wait", "5",
             "--config", str(tmp_path / "none.yaml")],
            capture_output=True, timeout=60,
        )  # fmt: skip
        assert second.returncode == 2 and b"cannot read configuration file" in second.stderr
        (tmp_path / "ok.yaml").write_text("")
        second = subprocess.run(
            [sys.executable, "-m", "agent.cli", "run", "--runtime-endpoint", endpoint,
             "--listen", str(agent.listen), "--state-dir", str(tmp_path / "s2"),
             "--sysfs-root", str(tmp_path / "sysfs"), "--runtime-wait", "5",
             "--config", str(tmp_path / "ok.yaml")],
            capture_output=True, timeout=60,
        )  # fmt: skip
        assert second.returncode == 1
        assert b"already serving" in second.stderr, second.stderr
        client.version()  # the first agent was not disturbed

    code, stderr = agent.stop()
    agent.wait_message(b"STOPPING=1")
    assert code == 0, stderr
    assert "configuration reload refused" in stderr and "log_level" in stderr
    assert not agent.listen.exists()  # socket removed on the way out
    assert container in json.dumps(saved_payload(agent.state_dir))


def test_state_survives_a_restart(tmp_path: Path, runtime: tuple[str, FaultyRuntime]) -> None:
    endpoint, _ = runtime
    agent = start_agent(tmp_path, endpoint)
    agent.wait_message(b"READY=1")
    with CRIClient(str(agent.listen)) as client:
        first = guaranteed_pod(client, "a", 20)
    assert agent.stop()[0] == 0
    agent = start_agent(tmp_path, endpoint)
    agent.wait_message(b"READY=1")
    with CRIClient(str(agent.listen)) as client:
        second = guaranteed_pod(client, "b", 20)
        a = CPUSet.parse(client.container_status(first).status.resources.linux.cpuset_cpus)
        b = CPUSet.parse(client.container_status(second).status.resources.linux.cpuset_cpus)
    assert len(a) == len(b) == 20
    assert a.isdisjoint(b)  # the restarted agent remembered who had what
    assert agent.stop()[0] == 0


def test_runtime_down_at_start_is_a_clear_error(tmp_path: Path) -> None:
    agent = start_agent(tmp_path, f"unix://{tmp_path}/nobody.sock", ["--runtime-wait", "1"])
    _, err = agent.proc.communicate(timeout=60)
    assert agent.proc.returncode == 1
    assert f"the runtime at unix://{tmp_path}/nobody.sock does not answer Version" in err.decode()
    assert not agent.listen.exists()


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--reserved-cpus", "200"], "reserved_cpus: CPUs 200 are not online CPUs of this machine"),
        (["--numa-labels", '{"7": {"example.com/x": "y"}}'], "numa_labels"),
    ],
)
def test_configuration_this_machine_refuses_is_a_clear_error(
    tmp_path: Path, runtime: tuple[str, FaultyRuntime], flags: list[str], message: str
) -> None:
    """Keys only the machine can check stop the agent with a message, not a traceback."""
    endpoint, _ = runtime
    agent = start_agent(tmp_path, endpoint, flags)
    _, err = agent.proc.communicate(timeout=60)
    text = err.decode()
    assert agent.proc.returncode == 1
    assert "cannot start: invalid configuration for this machine: " in text
    assert message in text and "Traceback" not in text
    assert not agent.listen.exists()


def test_refusals_reach_the_caller(tmp_path: Path, runtime: tuple[str, FaultyRuntime]) -> None:
    endpoint, backend = runtime
    agent = start_agent(tmp_path, endpoint)
    agent.wait_message(b"READY=1")
    try:
        with CRIClient(str(agent.listen)) as client, pytest.raises(CRIError) as err:
            guaranteed_pod(client, "huge", 79)
        assert err.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "requested 79 exclusive CPUs" in err.value.details
        # Refused before the runtime: it saw the sandbox but never a CreateContainer.
        methods = [call.method for call in backend.calls]
        assert "RunPodSandbox" in methods and "CreateContainer" not in methods
    finally:
        assert agent.stop()[0] == 0


def test_a_second_agent_never_touches_the_live_agents_state(
    tmp_path: Path, runtime: tuple[str, FaultyRuntime]
) -> None:
    endpoint, _ = runtime
    agent = start_agent(tmp_path, endpoint)
    agent.wait_message(b"READY=1")
    try:
        with CRIClient(str(agent.listen)) as client:
            guaranteed_pod(client, "db", 4)
        state = agent.state_dir / "state.json"
        before = (state.read_bytes(), state.stat().st_mtime_ns)
        common = [
            sys.executable, "-m", "agent.cli", "run", "--runtime-endpoint", endpoint,
            "--sysfs-root", str(tmp_path / "sysfs"), "--runtime-wait", "5",
            "--config", str(agent.config),
        ]  # fmt: skip
        # Same state directory, another socket: refused by the state dir lock.
        other_socket = subprocess.run(
            [*common, "--state-dir", str(agent.state_dir), "--listen", str(tmp_path / "b.sock")],
            capture_output=True, timeout=60, text=True,
        )  # fmt: skip
        assert other_socket.returncode == 1
        assert f"another numa-agent (pid {agent.proc.pid}) is using this state directory" in (
            other_socket.stderr
        )
        assert not (tmp_path / "b.sock").exists()
        # Same socket, same state directory: refused before anything is read.
        same_socket = subprocess.run(
            [*common, "--state-dir", str(agent.state_dir), "--listen", str(agent.listen)],
            capture_output=True, timeout=60, text=True,
        )  # fmt: skip
        assert same_socket.returncode == 1 and "already serving" in same_socket.stderr
        assert (state.read_bytes(), state.stat().st_mtime_ns) == before
    finally:
        assert agent.stop()[0] == 0
