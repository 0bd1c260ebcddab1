"""docs/troubleshooting.md quotes the messages the code really prints.

Each heading's message becomes a pattern (`<...>` and "..." match anything) and
is matched against the message produced by driving the real code path that
prints it: refusals through the node agent's CRI handlers, start-up errors
through the daemon, log lines through caplog.
"""

from __future__ import annotations

import logging
import re
import socket
import textwrap
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
import yaml

from agent.cli import main
from agent.config import AgentConfig
from agent.daemon import Daemon, StartupError, wait_for_runtime
from agent.introspect.client import StatusError, fetch_status
from agent.kubelet import kubelet_container_config, kubelet_pod_config
from agent.node.agent import NodeAgent
from agent.node.runtime_access import InProcessRuntimeAccess
from agent.policy.config import PolicyConfig
from agent.relay import listen
from agent.relay.hooks import HookAbort
from agent.relay.server import RelayServer
from agent.runtime.inprocess import in_process_forward
from agent.simulate.driver import run_scenario
from agent.simulate.scenario import parse_scenario
from agent.state import StateStore
from agent.state.lock import StateDirLock
from agent.state.writer import StateWriter
from agent.workload import QoSClass
from devtools.criclient import CRIClient, CRIError
from devtools.fake_runtime import FaultyRuntime
from devtools.fakesysfs import write_shape
from proto import cri_pb2
from tests.node.conftest import InProcessKubelet
from topology.sysfs import read_machine
from topology.tree import Machine

DOC = Path(__file__).resolve().parents[2] / "docs" / "troubleshooting.md"
CREATE = "/runtime.v1.RuntimeService/CreateContainer"


def headings() -> list[str]:
    return re.findall(r"^### `(.+)`$", DOC.read_text(), re.MULTILINE)


def pattern(message: str) -> re.Pattern[str]:
    parts = re.split(r"(<[^>]+>|\.\.\.)", message)
    regex = "".join(".*?" if p.startswith("<") or p == "..." else re.escape(p) for p in parts)
    return re.compile(regex + "$" if not message.endswith("...") else regex, re.DOTALL)


@pytest.fixture(scope="module")
def machine(tmp_path_factory: pytest.TempPathFactory) -> Machine:
    return read_machine(write_shape("desktop-1s-4c-ht", tmp_path_factory.mktemp("sysfs")))


def refusals(machine: Machine) -> list[str]:
    """CRI refusals as kubelet sees them: "CODE: details", from a simulated node."""
    scenario = yaml.safe_load(
        textwrap.dedent(
            """
            topology: {shape: desktop-1s-4c-ht}
            pods:
              - name: rules
                annotations:
                  cri-resource-manager.intel.com/affinity: |
                    main:
                      - match: {key: name, operator: Equal, values: [x]}
                containers: [{name: main, cpu: 100m}]
              - name: yaml
                annotations: {cri-resource-manager.intel.com/affinity: "main: [a"}
                containers: [{name: main, cpu: 100m}]
              - name: optout
                annotations:
                  prefer-shared-cpus.cri-resource-manager.intel.com/container.main: maybe
                containers: [{name: main, cpu: "1", memory: 1Gi}]
              - name: little
                annotations: {numa-agent.io/cpu-class: efficiency}
                containers: [{name: main, cpu: "1", memory: 1Gi}]
              - name: turbo
                annotations: {numa-agent.io/cpu-class: turbo}
                containers: [{name: main, cpu: 100m}]
              - name: big
                containers: [{name: main, cpu: "8", memory: 1Gi}]
              - name: hog
                containers: [{name: main, cpu: "7", memory: 1Gi}]
              - name: more
                containers: [{name: main, cpu: "2", cpu_limit: "3"}]
              - name: zone
                annotations:
                  numa-agent.io/affinity: |
                    podAntiAffinity:
                      requiredDuringSchedulingIgnoredDuringExecution:
                      - labelSelector: {matchLabels: {app: db}}
                        topologyKey: topology.kubernetes.io/zone
                containers: [{name: main, cpu: 100m}]
              - name: alone
                annotations:
                  numa-agent.io/affinity: |
                    podAntiAffinity:
                      requiredDuringSchedulingIgnoredDuringExecution:
                      - {labelSelector: {}, namespaceSelector: {}, topologyKey: numa-agent.io/numa}
                containers: [{name: main, cpu: 100m}]
              - name: shared-core
                annotations:
                  numa-agent.io/affinity: |
                    podAntiAffinity:
                      requiredDuringSchedulingIgnoredDuringExecution:
                      - {labelSelector: {}, topologyKey: numa-agent.io/core}
                containers: [{name: main, cpu: 100m}]
              - name: apart-0
                labels: {app: db}
                annotations: &apart
                  numa-agent.io/affinity: |
                    podAntiAffinity:
                      requiredDuringSchedulingIgnoredDuringExecution:
                      - labelSelector: {matchLabels: {app: db}}
                        topologyKey: kubernetes.io/hostname
                containers: [{name: main, cpu: 100m}]
              - name: apart-1
                labels: {app: db}
                annotations: *apart
                containers: [{name: main, cpu: 100m}]
              - name: lonely
                annotations:
                  numa-agent.io/affinity: |
                    podAffinity:
                      requiredDuringSchedulingIgnoredDuringExecution:
                      - labelSelector: {matchLabels: {app: cache}}
                        topologyKey: numa-agent.io/numa
                containers: [{name: main, cpu: 100m}]
              - name: even-0
                labels: {app: web}
                annotations: &even
                  numa-agent.io/topology-spread-constraints: |
                    - maxSkew: 1
                      topologyKey: kubernetes.io/hostname
                      minDomains: 2
                      labelSelector: {matchLabels: {app: web}}
                containers: [{name: main, cpu: 100m}]
              - name: even-1
                labels: {app: web}
                annotations: *even
                containers: [{name: main, cpu: 100m}]
            """
        )
    )
    result = run_scenario(parse_scenario(scenario, base_dir=DOC.parent), machine)
    return [f"{r.code}: {r.message}" for r in result.errors]


def aborted(machine: Machine) -> list[str]:
    """A kubelet retry arriving while the first create is still at the runtime."""
    runtime = FaultyRuntime()
    agent = NodeAgent(machine, PolicyConfig(), InProcessRuntimeAccess(runtime))
    handlers = agent.handlers()
    pod = kubelet_pod_config("p", "default", "uid-1", qos=QoSClass.BURSTABLE)
    sid = InProcessKubelet(agent, runtime).run_pod_sandbox(pod)
    request = cri_pb2.CreateContainerRequest(
        pod_sandbox_id=sid,
        config=kubelet_container_config(pod, "main", 100, 0, 0),
        sandbox_config=pod,
    ).SerializeToString()
    seen: list[str] = []
    to_runtime = in_process_forward(runtime, CREATE)

    def slow_runtime(body: bytes) -> bytes:
        try:
            handlers[CREATE](request, to_runtime)
        except HookAbort as err:
            seen.append(f"{err.code.name}: {err.details}")
        return to_runtime(body)

    handlers[CREATE](request, slow_runtime)
    return seen


def start_pod(kubelet: InProcessKubelet, name: str, qos: QoSClass, milli: int) -> str:
    pod = kubelet_pod_config(name, "default", f"uid-{name}", qos=qos)
    sandbox = kubelet.run_pod_sandbox(pod)
    guaranteed = qos is QoSClass.GUARANTEED
    config = kubelet_container_config(
        pod, "main", milli, milli if guaranteed else 0, 1 << 30 if guaranteed else 0
    )
    container = kubelet.create_container(sandbox, config, pod)
    kubelet.start_container(container)
    return container


def unavailable(tmp_path: Path) -> list[str]:
    relay = RelayServer(str(tmp_path / "agent.sock"), str(tmp_path / "gone.sock"))
    relay.start()
    try:
        with CRIClient(str(tmp_path / "agent.sock"), timeout=5) as client:
            client.version()
    except CRIError as err:
        return [f"{err.code.name}: {err.details}"]
    finally:
        relay.stop(None)
    return []


def startup(tmp_path: Path) -> list[str]:
    """What `numa-agent run` logs as "cannot start: <error>" (agent/commands/run.py)."""
    out = []
    try:
        wait_for_runtime(f"unix://{tmp_path}/none.sock", 0.1)
    except StartupError as err:
        out.append(f"cannot start: {err}")
    with socket.socket(socket.AF_UNIX) as live:
        path = tmp_path / "live.sock"
        live.bind(str(path))
        live.listen()
        try:
            listen.prepare(path)
        except listen.SocketInUseError as err:
            out.append(f"cannot start: {err}")
    daemon = Daemon(
        AgentConfig(
            sysfs_root=str(tmp_path / "no-sysfs"),
            listen=str(tmp_path / "a.sock"),
            state_dir=str(tmp_path / "state-a"),
        )
    )
    try:
        daemon.start()
    except StartupError as err:
        out.append(f"cannot start: {err}")
    held = StateDirLock(tmp_path / "state-b")
    held.acquire()
    try:
        Daemon(
            AgentConfig(listen=str(tmp_path / "b.sock"), state_dir=str(tmp_path / "state-b"))
        ).start()
    except StartupError as err:
        out.append(f"cannot start: {err}")
    finally:
        held.release()
    return out


def logged(caplog: pytest.LogCaptureFixture, tmp_path: Path, machine: Machine) -> Iterator[str]:
    with caplog.at_level(logging.INFO):
        store = StateStore(tmp_path / "state", "m")
        store.path.parent.mkdir(parents=True)
        store.path.write_text("{truncated")
        store.load()
        bad = tmp_path / "bad.yaml"
        bad.write_text("log_level: shout\n")
        Daemon(AgentConfig(), config_path=str(bad)).reload()
        runtime = FaultyRuntime()
        agent = NodeAgent(machine, PolicyConfig(), InProcessRuntimeAccess(runtime))
        kubelet = InProcessKubelet(agent, runtime)
        start_pod(kubelet, "batch", QoSClass.BESTEFFORT, 0)
        runtime.fail_next("UpdateContainerResources", grpc.StatusCode.UNAVAILABLE, "busy")
        start_pod(kubelet, "db", QoSClass.GUARANTEED, 2000)
        (tmp_path / "not-a-dir").write_text("")
        writer = StateWriter(StateStore(tmp_path / "not-a-dir" / "state", "m"))
        writer.write(writer.snapshot({"version": 2, "pods": {}, "containers": {}}))
    yield from (r.getMessage() for r in caplog.records)


def invalid_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> list[str]:
    bad = tmp_path / "invalid.yaml"
    bad.write_text("log_level: shout\n")
    assert main(["config", "--config", str(bad)]) == 2
    return capsys.readouterr().err.splitlines()


def status_message(tmp_path: Path) -> list[str]:
    try:
        fetch_status(tmp_path / "numa-agent-status.sock", timeout=1)
    except StatusError as err:
        return [str(err)]
    return []


def test_every_heading_is_a_message_the_code_prints(
    machine: Machine,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    produced = [
        *refusals(machine),
        *aborted(machine),
        *unavailable(tmp_path),
        *startup(tmp_path),
        *logged(caplog, tmp_path, machine),
        *status_message(tmp_path),
        *invalid_config(tmp_path, capsys),
    ]
    unmatched = [h for h in headings() if not any(pattern(h).match(m) for m in produced)]
    assert not unmatched, "\n".join(
        ["documented but not produced:", *unmatched, "produced:", *produced]
    )


def test_the_doc_covers_the_main_failures() -> None:
    found = " ".join(headings())
    for code in (
        "INVALID_ARGUMENT",
        "RESOURCE_EXHAUSTED",
        "FAILED_PRECONDITION",
        "UNAVAILABLE",
        "ABORTED",
    ):
        assert code in found
