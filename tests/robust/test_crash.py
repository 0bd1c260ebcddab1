"""kill -9 of the agent at any point: at injected points between the runtime's
answer and the state write, and at random times under load. After a restart no
CPU is exclusive to two containers, none is leaked, and the state file says what
the runtime runs."""

from __future__ import annotations

import contextlib
import random
import signal
import threading
from collections.abc import Callable

import pytest

from agent.workload import QoSClass
from devtools.criclient import CRIClient, CRIError
from tests.robust.harness import (
    Agent,
    RuntimeServer,
    Site,
    books_problems,
    create,
    exclusive_held,
    probe_free,
    run_pod,
    wait_until,
)
from topology.cpuset import CPUSet

USABLE = CPUSet.range(1, 7)  # desktop-1s-4c-ht with reserved_cpus '0'
SETTLE_S = 10.0


def assert_books_sound(agent: Agent, server: RuntimeServer, what: str) -> None:
    """Runtime and state agree (updates owed at start may still be in flight: wait for
    them), no exclusive CPU is shared, and every CPU held by nobody is free."""

    def agree() -> bool:
        return books_problems(server.runtime, agent.state()) == []

    try:
        wait_until(agree, SETTLE_S, f"state and runtime to agree ({what})")
    except AssertionError:
        raise AssertionError(f"{what}: {books_problems(server.runtime, agent.state())}") from None
    held = exclusive_held(agent.state())
    with agent.client() as client:
        free = probe_free(client, "probe")
    assert free == USABLE - held, (
        f"{what}: free {free}, exclusive {held}: leaked {USABLE - held - free}"
    )


def _create_new(client: CRIClient) -> None:
    sandbox, pod = run_pod(client, "new")
    create(client, sandbox, pod, "new", 2)


def _remove_db(client: CRIClient) -> None:
    db = next(c for c in client.list_containers() if c.metadata.name == "db")
    client.stop_container(db.id)
    client.remove_container(db.id)


BEFORE, WITH_NEW = frozenset({"batch", "db"}), frozenset({"batch", "db", "new"})
# point -> what kubelet does that passes it, and which containers may run after
ACTIONS: dict[str, tuple[Callable[[CRIClient], None], set[frozenset[str]]]] = {
    "create-after-decision": (_create_new, {BEFORE}),  # never reached the runtime
    "create-after-runtime": (_create_new, {WITH_NEW}),  # adopted at restart
    "create-after-save": (_create_new, {WITH_NEW}),
    "remove-after-runtime": (_remove_db, {frozenset({"batch"})}),  # forgotten at restart
    # Moving batch off the new CPUs is sent while the create is being forwarded:
    # the agent may die before or after the runtime got the create.
    "update-after-runtime": (_create_new, {BEFORE, WITH_NEW}),
}


@pytest.mark.parametrize("point", sorted(ACTIONS))
def test_kill_at_injected_points(point: str, site: Site, runtime_server: RuntimeServer) -> None:
    agent = site.start(runtime_server.endpoint)
    with agent.client() as client:
        sandbox, pod = run_pod(client, "batch", QoSClass.BESTEFFORT)
        create(client, sandbox, pod, "batch", 0)
        sandbox, pod = run_pod(client, "db")
        create(client, sandbox, pod, "db", 2)
    assert agent.stop()[0] == 0

    armed = site.start(runtime_server.endpoint, env={"NUMA_AGENT_CRASH_AT": point})
    # The agent dies under the call: kubelet sees UNAVAILABLE (or, for a
    # background update, the call itself succeeded first).
    with armed.client() as client, contextlib.suppress(CRIError):
        ACTIONS[point][0](client)
    code, _ = armed.died()
    assert code == -signal.SIGKILL, f"{point}: the crash point was never reached"

    agent = site.start(runtime_server.endpoint)
    try:
        assert_books_sound(agent, runtime_server, point)
        state = agent.state()["containers"]
        running = frozenset(e["name"] for e in state.values())
        assert running in ACTIONS[point][1], (point, running)
        exclusive = {e["name"] for e in state.values() if e["exclusive_cpus"]}
        assert exclusive == running - {"batch"}, point
    finally:
        assert agent.stop()[0] == 0


def _churn(endpoint: str, worker: int, stop: threading.Event, seed: int) -> None:
    """kubelet under load: pods of 1-2 exclusive CPUs come and go until `stop`."""
    rng = random.Random(seed)
    mine: list[str] = []
    with CRIClient(endpoint, timeout=5) as client:
        n = 0
        while not stop.is_set():
            n += 1
            try:
                if mine and rng.random() < 0.4:
                    sandbox = mine.pop(rng.randrange(len(mine)))
                    client.stop_pod_sandbox(sandbox)
                    client.remove_pod_sandbox(sandbox)
                else:
                    sandbox, pod = run_pod(client, f"w{worker}-{n}")
                    mine.append(sandbox)
                    create(client, sandbox, pod, "app", rng.choice((1, 2)))
            except CRIError:
                pass  # refused (no room) or the agent died under the call


def test_kill_at_random_times_under_load(site: Site, runtime_server: RuntimeServer) -> None:
    rng = random.Random(6)
    agent = site.start(runtime_server.endpoint)
    for round_ in range(4):
        stop = threading.Event()
        enough = len(runtime_server.runtime.calls) + 20
        workers = [
            threading.Thread(target=_churn, args=(str(site.listen), w, stop, round_ * 10 + w))
            for w in range(4)
        ]
        for w in workers:
            w.start()
        # Let some calls land first; then kill at a random moment among them.
        wait_until(lambda: len(runtime_server.runtime.calls) > enough, 20, "load")  # noqa: B023
        threading.Event().wait(rng.uniform(0.0, 0.3))
        agent.kill9()
        stop.set()
        for w in workers:
            w.join(timeout=30)
        agent = site.start(runtime_server.endpoint)
        assert_books_sound(agent, runtime_server, f"round {round_}")
    assert agent.stop()[0] == 0
