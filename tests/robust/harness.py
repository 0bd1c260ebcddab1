"""What the robustness tests share: `numa-agent run` as a real process (readiness
via systemd's notify socket), the in-memory runtime served on a unix socket that
can go down and come back, and the books check run after every crash."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

from agent.kubelet import kubelet_container_config, kubelet_pod_config
from agent.node.agent import NodeAgent
from agent.node.crashpoints import ENV as CRASH_ENV
from agent.relay.server import RelayServer
from agent.state.journal import saved_payload
from agent.workload import QoSClass
from devtools.criclient import CRIClient
from devtools.fake_runtime import FaultyRuntime, serve_memory_runtime
from proto import cri_pb2
from tests.waiting import wait_until
from topology.cpuset import CPUSet

READY_TIMEOUT_S = 30.0
_LIVE = (cri_pb2.CONTAINER_CREATED, cri_pb2.CONTAINER_RUNNING)


@dataclass
class RuntimeServer:
    """A FaultyRuntime served on `path`; `down()` and `up()` are a runtime restart
    that keeps its pods and containers (the same FaultyRuntime object)."""

    path: Path
    runtime: FaultyRuntime = field(default_factory=FaultyRuntime)
    _server: Any = None

    @property
    def endpoint(self) -> str:
        return f"unix://{self.path}"

    def up(self) -> RuntimeServer:
        self._server, _ = serve_memory_runtime(self.path, self.runtime)
        return self

    def down(self, grace: float | None = None) -> None:
        if self._server is not None:
            self._server.stop(grace).wait()
            self._server = None
        self.path.unlink(missing_ok=True)


@dataclass
class Stack:
    server: RuntimeServer
    node: NodeAgent
    relay: RelayServer
    client: CRIClient


@dataclass
class Agent:
    """One `numa-agent run` process."""

    proc: subprocess.Popen[bytes]
    notify: socket.socket
    listen: Path
    state_file: Path
    log: Path  # the agent's stderr

    def stderr(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_log(self, text: str, timeout: float = 10.0) -> None:
        wait_until(lambda: text in self.stderr(), timeout, f"{text!r} in the agent's log")

    def wait_message(self, expected: bytes) -> None:
        """Until systemd's socket receives `expected`; fails at once if the agent exits."""
        give_up = time.monotonic() + READY_TIMEOUT_S
        while True:
            try:
                if self.notify.recv(256) == expected:
                    return
                continue
            except TimeoutError:
                pass
            if self.proc.poll() is not None or time.monotonic() > give_up:
                self.proc.kill()
                self.proc.wait()
                raise AssertionError(
                    f"no {expected!r} from the agent (exit {self.proc.returncode}); "
                    f"stderr:\n{self.stderr()[-4000:]}"
                )

    def client(self, timeout: float = 10.0) -> CRIClient:
        return CRIClient(str(self.listen), timeout=timeout)

    def stop(self) -> tuple[int, str]:
        self.proc.send_signal(signal.SIGTERM)
        return self.died()

    def kill9(self) -> str:
        self.proc.kill()
        return self.died()[1]

    def died(self, timeout: float = 30.0) -> tuple[int, str]:
        """Wait for the process to end (by itself: an injected crash); (exit code, stderr)."""
        self.proc.wait(timeout=timeout)
        self.notify.close()
        return self.proc.returncode, self.stderr()

    def state(self) -> dict[str, Any]:
        payload: dict[str, Any] = saved_payload(self.state_file.parent)
        return payload


@dataclass
class Site:
    """Paths of one agent installation (short, for the 107-byte socket limit)."""

    base: Path
    sysfs: Path
    config_text: str = "reserved_cpus: '0'\nlog_format: json\n"
    # Every agent started here: a test that fails midway leaves none running.
    started: list[Agent] = field(default_factory=list)

    def kill_all(self) -> None:
        for agent in self.started:
            if agent.proc.poll() is None:
                agent.proc.kill()
                agent.proc.wait()

    @property
    def listen(self) -> Path:
        return self.base / "agent" / "numa-agent.sock"

    @property
    def state_dir(self) -> Path:
        return self.base / "state"

    def start(
        self,
        runtime_endpoint: str,
        *,
        env: Mapping[str, str] | None = None,
        wait: bool = True,
        extra: tuple[str, ...] = (),
        cgroup_procs: Path | None = None,
    ) -> Agent:
        notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        notify_path = self.base / f"n-{uuid.uuid4().hex[:6]}"
        notify.bind(str(notify_path))
        notify.settimeout(0.1)
        config = self.base / "config.yaml"
        config.write_text(self.config_text)
        cmd = [
            sys.executable, "-m", "agent.cli", "run",
            "--config", str(config),
            "--runtime-endpoint", runtime_endpoint,
            "--listen", str(self.listen),
            "--state-dir", str(self.state_dir),
            "--sysfs-root", str(self.sysfs),
            "--runtime-wait", "5",
            "--feature-file", "",  # never the host's NFD directory
            *extra,
        ]  # fmt: skip
        full_env = {k: v for k, v in os.environ.items() if k != CRASH_ENV}
        full_env.update(env or {})
        full_env["NOTIFY_SOCKET"] = str(notify_path)
        log = self.base / f"agent-{notify_path.name}.log"
        with log.open("wb") as stderr:
            proc = subprocess.Popen(
                cmd,
                env=full_env,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
                close_fds=True,
                # Into a cgroup (its cgroup.procs file) before it runs a line of Python.
                preexec_fn=None if cgroup_procs is None else _join(cgroup_procs),
            )
        agent = Agent(proc, notify, self.listen, self.state_dir / "state.json", log)
        self.started.append(agent)
        if wait:
            agent.wait_message(b"READY=1")
        return agent


def _join(cgroup_procs: Path) -> Callable[[], None]:
    def join() -> None:
        cgroup_procs.write_text(str(os.getpid()))

    return join


# ----------------------------------------------------------------------------- kubelet


def run_pod(client: CRIClient, name: str, qos: QoSClass = QoSClass.GUARANTEED) -> tuple[str, Any]:
    pod = kubelet_pod_config(name, "default", f"uid-{name}", qos=qos)
    return client.run_pod_sandbox(pod), pod


def create(
    client: CRIClient, sandbox: str, pod: Any, name: str, cpus: int, *, start: bool = True
) -> str:
    """A Guaranteed container with `cpus` whole CPUs (0: BestEffort), started."""
    milli = cpus * 1000
    config = kubelet_container_config(pod, name, milli, milli, (1 << 30) if cpus else 0)
    cid = client.create_container(sandbox, config, pod)
    if start:
        client.start_container(cid)
    return cid


# ----------------------------------------------------------------------------- the books


def live(runtime: FaultyRuntime) -> dict[str, CPUSet]:
    """Live container id -> the cpuset the runtime holds for it."""
    out: dict[str, CPUSet] = {}
    for ctr in runtime.list_containers(cri_pb2.ListContainersRequest()).containers:
        if ctr.state in _LIVE:
            status = runtime.container_status(cri_pb2.ContainerStatusRequest(container_id=ctr.id))
            out[ctr.id] = CPUSet.parse(status.status.resources.linux.cpuset_cpus)
    return out


def books_problems(runtime: FaultyRuntime, state: Mapping[str, Any]) -> list[str]:
    """What is wrong between the runtime and the agent's state file (empty: nothing).

    - the state knows exactly the live containers, exclusive ones with the CPUs the
      runtime holds for them;
    - no CPU exclusive to one container is in any other container's cpuset.
    """
    problems: list[str] = []
    running = live(runtime)
    saved = state["containers"]
    if set(saved) != set(running):
        problems.append(
            f"state knows {sorted(set(saved) - set(running))} that do not run; "
            f"runtime runs {sorted(set(running) - set(saved))} the state does not know"
        )
    for cid, cpus in running.items():
        entry = saved.get(cid)
        if entry is not None and entry["exclusive_cpus"]:
            held = CPUSet.parse(entry["exclusive_cpus"])
            if held != cpus:
                problems.append(f"{cid[:12]}: state says cpus {held}, runtime has {cpus}")
    for cid, entry in saved.items():
        if not entry["exclusive_cpus"] or cid not in running:
            continue
        mine = running[cid]
        for other, cpus in running.items():
            if other != cid and cpus & mine:
                problems.append(
                    f"exclusive CPUs {mine & cpus} of {cid[:12]} also given to {other[:12]}"
                )
    return problems


def exclusive_held(state: Mapping[str, Any]) -> CPUSet:
    held = CPUSet()
    for entry in state["containers"].values():
        held = held | CPUSet.parse(entry["exclusive_cpus"])
    return held


def probe_free(client: CRIClient, name: str) -> CPUSet:
    """The CPUs a new BestEffort container gets: all not held exclusively (a leak shows
    as a CPU missing here and held by nobody). The probe is removed again."""
    sandbox, pod = run_pod(client, name, QoSClass.BESTEFFORT)
    cid = create(client, sandbox, pod, name, 0)
    cpus = CPUSet.parse(client.container_status(cid).status.resources.linux.cpuset_cpus)
    client.stop_pod_sandbox(sandbox)
    client.remove_pod_sandbox(sandbox)
    return cpus


def code_of(err: grpc.RpcError) -> grpc.StatusCode:
    code: grpc.StatusCode = err.code()
    return code
