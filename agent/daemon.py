"""`numa-agent run`: wire configuration, machine, state, node agent and its front
doors (the CRI relay, the NRI plugin, or both) together.

The imperative shell around everything else: it reads sysfs, waits for the
runtime, restores state, serves the CRI socket, and turns signals into a clean
stop (SIGTERM/SIGINT) or a configuration reload (SIGHUP).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import signal
import time
from collections.abc import Mapping
from types import FrameType
from typing import Any

from agent import __version__
from agent.config import RELAY_LIMIT_KEYS, AgentConfig, ConfigError, resolve_config
from agent.fdreserve import RESERVE
from agent.introspect.document import AgentInfo, status_document
from agent.introspect.machine_map import render_machine_map
from agent.introspect.server import IntrospectServer, status_socket_path
from agent.labels.feature_file import LABEL_KEYS, FeatureFile
from agent.logs import setup_logging
from agent.node.agent import NodeAgent
from agent.node.fingerprint import legacy_fingerprint, machine_fingerprint
from agent.node.methods import VERSION
from agent.node.reconcile import Reconciler
from agent.node.runtime_access import GrpcRuntimeAccess, RuntimeAccess
from agent.nri.plugin import NriPlugin
from agent.nri.runtime import NriRuntime
from agent.nri.session import NriSession
from agent.observe.metrics import AgentMetrics
from agent.observe.process import process_stats
from agent.observe.server import MACHINE_PATH, MetricsServer, MetricsServerError
from agent.relay import listen
from agent.relay.backend import Backend, BackendError
from agent.relay.endpoint import Endpoint
from agent.relay.server import RelayServer
from agent.sdnotify import notify
from agent.state import StateStore
from agent.state.lock import StateDirBusy, StateDirLock
from proto import cri_pb2
from topology.dmi import read_dmi
from topology.sysfs import read_machine
from topology.tree import Machine

log = logging.getLogger(__name__)

RUNTIME_WAIT_S = 30.0
STOP_GRACE_S = 10.0
SIGNAL_POLL_S = 0.1


class StartupError(Exception):
    """The agent cannot start; the message says what to fix."""


def wait_for_runtime(endpoint: str, deadline_s: float) -> str:
    """Poll the runtime's Version until it answers; StartupError naming it otherwise.

    Over the relay's own raw-bytes Backend: the agent needs no CRI client of its own.
    """
    give_up = time.monotonic() + deadline_s
    last = ""
    request = cri_pb2.VersionRequest(version="v1").SerializeToString()
    backend = Backend(Endpoint.parse(endpoint))
    try:
        while True:
            try:
                reply = backend.unary(VERSION, request, timeout=2.0)
            except BackendError as err:
                last = f"{err.code.name}: {err.details}"
            else:
                version = cri_pb2.VersionResponse.FromString(reply.body)
                return f"{version.runtime_name} {version.runtime_version}"
            if time.monotonic() >= give_up:
                raise StartupError(
                    f"the runtime at {endpoint} does not answer Version after {deadline_s:.0f}s "
                    f"({last}); is containerd running, and is --runtime-endpoint right?"
                )
            time.sleep(0.5)
    finally:
        backend.close()


class Daemon:
    """One running agent. `start` returns once the socket serves; `stop` undoes it."""

    def __init__(
        self,
        config: AgentConfig,
        config_path: str | None = None,
        overrides: Mapping[str, Any] | None = None,
        runtime_wait_s: float = RUNTIME_WAIT_S,
    ) -> None:
        self.config = config
        self._config_path = config_path
        self._overrides = dict(overrides or {})
        self._runtime_wait_s = runtime_wait_s
        self.machine: Machine | None = None
        self.node: NodeAgent | None = None
        self.reconciler: Reconciler | None = None
        self._runtime: GrpcRuntimeAccess | None = None
        self.relay: RelayServer | None = None
        self.nri: NriSession | None = None
        self.metrics: AgentMetrics | None = None
        self.metrics_server: MetricsServer | None = None
        self.introspect: IntrospectServer | None = None
        self._state_lock: StateDirLock | None = None
        self.feature_file: FeatureFile | None = None

    def start(self) -> None:
        cfg = self.config
        # Descriptors for the state file and the status socket when a flood takes the rest.
        RESERVE.fill()
        process_stats()  # a first full reading: status answers from it during a flood
        # Before anything touches state or the runtime: is another agent already here?
        if cfg.serve_cri:
            listen.ensure_free(Endpoint.parse(cfg.listen).path)
        self._state_lock = StateDirLock(cfg.state_dir)
        try:
            self._state_lock.acquire()
        except (StateDirBusy, OSError) as err:
            self._state_lock = None
            raise StartupError(str(err)) from err
        try:
            # No py-cpuinfo here: placement needs no CPU model, and it spawns helpers
            # and runs CPUID code; `numa-agent topology` shows the model.
            machine = self.machine = read_machine(cfg.sysfs_root, cpu_info=False)
        except ValueError as err:
            raise StartupError(f"cannot read the machine's topology: {err}") from err
        nri = bool(cfg.nri_socket)
        if not nri:
            runtime = wait_for_runtime(cfg.runtime_endpoint, self._runtime_wait_s)
            log.info("runtime %s answers at %s", runtime, cfg.runtime_endpoint)
        store = StateStore(
            cfg.state_dir,
            machine_fingerprint(machine),
            also_accept=(legacy_fingerprint(machine),),
        )
        self._runtime = GrpcRuntimeAccess(cfg.runtime_endpoint, update_timeout=cfg.update_timeout)
        # NRI mode: the runtime's NRI view answers the agent's listings; its CRI
        # socket only what NRI may not tell (a started container's pid).
        access: RuntimeAccess = (
            NriRuntime(cfg.nri_socket, cri=self._runtime) if nri else self._runtime
        )
        metrics = self.metrics = AgentMetrics() if cfg.metrics_address else None
        if metrics is not None:
            metrics.watch_state_file(store)  # a read-only state dir serves, counting failures
        try:
            self.node = NodeAgent(
                machine,
                cfg.policy,
                access,
                store=store,
                # NRI: updates owed go in the reply to the request that made them.
                background_updates=not nri,
                observer=metrics,
            )
        except ConfigError as err:
            # Keys only this machine can check (reserved_cpus, numa_labels).
            raise StartupError(f"invalid configuration for this machine: {err}") from err
        if isinstance(access, NriRuntime):
            # The runtime's Synchronize does what node.start() does for the proxy.
            self.nri = NriSession(
                cfg.nri_socket, cfg.nri_plugin_index, NriPlugin(self.node, access), access
            )
            self.nri.start()
        else:
            self.node.start()
        self.reconciler = Reconciler(self.node, access, cfg.reconcile_period, observer=metrics)
        self.reconciler.start()
        if cfg.serve_cri:
            self.relay = RelayServer(
                cfg.listen,
                cfg.runtime_endpoint,
                cfg.image_endpoint or None,
                # NRI mode places through NRI: a CRI socket there only relays.
                hooks=None if nri else self.node.relay_hooks(),
                socket_group=cfg.socket_group,
                observer=None if metrics is None else metrics.observe_call,
                limits=cfg.relay_limits,
            )
            self.relay.start()
        self.introspect = IntrospectServer(status_socket_path(cfg.listen), self.status)
        self.introspect.start()
        if metrics is not None:
            metrics.watch(self.node)
            try:
                self.metrics_server = MetricsServer(
                    cfg.metrics_address,
                    metrics.registry,
                    pages={MACHINE_PATH: lambda: render_machine_map(self.status())},
                )
            except MetricsServerError as err:
                raise StartupError(str(err)) from err
            log.info("metrics on http://%s/metrics", cfg.metrics_address)
        self.feature_file = FeatureFile(machine, read_dmi(cfg.sysfs_root))
        self.feature_file.update(cfg)  # logs, never raises: labels must not stop the relay
        notify("READY=1")
        if self.relay is not None:
            log.info("serving CRI on %s (pid %d)", self.relay.path, os.getpid())
        if nri:
            log.info("plugging into NRI at %s (pid %d)", cfg.nri_socket, os.getpid())

    def stop(self, grace: float = STOP_GRACE_S) -> None:
        """Stop accepting, finish calls in flight, write state, remove the socket."""
        notify("STOPPING=1")
        if self.metrics_server is not None:
            self.metrics_server.stop()
            self.metrics_server = None
        if self.introspect is not None:
            self.introspect.stop()
            self.introspect = None
        if self.relay is not None:
            self.relay.stop(grace)
            self.relay = None
        if self.nri is not None:
            self.nri.stop()
            self.nri = None
        if self.reconciler is not None:
            self.reconciler.stop()
            self.reconciler = None
        if self.node is not None:
            self.node.close()
            self.node = None
        if self._runtime is not None:
            self._runtime.close()
            self._runtime = None
        if self._state_lock is not None:
            self._state_lock.release()  # last: the state is written
            self._state_lock = None
        RESERVE.release_all()
        log.info("stopped")

    def status(self) -> dict[str, Any]:
        """The document `numa-agent status` prints (served on the introspection socket)."""
        node, machine, cfg = self.node, self.machine, self.config
        if node is None or machine is None:
            raise RuntimeError("the agent is starting or stopping; ask again")
        info = AgentInfo(
            version=__version__,
            runtime_endpoint=cfg.runtime_endpoint,
            listen=cfg.listen,
            metrics_address=(
                "{}:{}".format(*self.metrics_server.address) if self.metrics_server else ""
            ),
            pending_updates=node.pending_updates(),
            process=process_stats(),
            state_problem=node.state_problem(),
            stray_processes=() if self.reconciler is None else self.reconciler.strays(),
            start=node.started.counts(),
        )
        placements, capacity = node.placements_and_capacity()
        return status_document(
            info, machine, cfg.policy.reserved_cpus, placements, capacity, time.time()
        )

    def reload(self) -> None:
        """SIGHUP: re-read the configuration file; a bad one is refused and the old one stays.

        Log settings and the feature file's keys apply at once; keys that shape the
        socket, the runtime connection or placement apply at the next start (logged
        when changed).
        """
        try:
            new = resolve_config(self._config_path, self._overrides)
        except ConfigError as err:
            log.error("configuration reload refused, keeping the old one: %s", err)
            return
        setup_logging(new.log_level, new.log_format)
        changed = sorted(
            key
            for key in (
                "runtime_endpoint",
                "image_endpoint",
                "listen",
                "state_dir",
                "sysfs_root",
                "reconcile_period",
                *RELAY_LIMIT_KEYS,
                "update_timeout",
                "nri_socket",
                "nri_plugin_index",
            )
            if getattr(new, key) != getattr(self.config, key)
        )
        if new.policy != self.config.policy:
            changed.append("policy")
        if changed:
            log.warning("configuration reloaded; %s take effect at restart", ", ".join(changed))
        else:
            log.info("configuration reloaded")
        self.config = dataclasses.replace(
            self.config,
            log_level=new.log_level,
            log_format=new.log_format,
            **{key: getattr(new, key) for key in LABEL_KEYS},  # the feature file's keys
        )
        if self.feature_file is not None:
            self.feature_file.update(self.config)


def serve(daemon: Daemon) -> int:
    """Run until SIGTERM/SIGINT; SIGHUP reloads. Returns the exit code.

    Signal handlers only set flags, which the loop polls, so a SIGTERM that
    arrives while a reload is handled is never lost. They take no lock: the
    kernel may deliver the signal to a gRPC thread, leaving the main thread
    blocked in a wait without timeout that never runs the handler (seen: SIGTERM
    ignored), and a handler setting an Event can deadlock on the lock of the
    very Event.wait it interrupted.
    """
    wanted = {"stop": 0, "reload": 0}  # the signal number that asked, 0: none

    def on_stop(signum: int, _frame: FrameType | None) -> None:
        wanted["stop"] = signum

    def on_hup(signum: int, _frame: FrameType | None) -> None:
        wanted["reload"] = signum

    previous: dict[int, Any] = {}
    for signum, handler in (
        (signal.SIGTERM, on_stop),
        (signal.SIGINT, on_stop),
        (signal.SIGHUP, on_hup),
    ):
        previous[signum] = signal.signal(signum, handler)
    try:
        daemon.start()
        while not wanted["stop"]:
            time.sleep(SIGNAL_POLL_S)
            if wanted["reload"]:
                wanted["reload"] = 0
                daemon.reload()
        log.info("received %s, stopping", signal.Signals(wanted["stop"]).name)
    finally:
        daemon.stop()
        for number, old in previous.items():
            signal.signal(number, old)
    return 0
