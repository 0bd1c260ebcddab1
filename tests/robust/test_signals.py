"""Signals to `numa-agent run`: SIGTERM stops accepting, lets the call in flight
finish for its caller, writes state, removes the socket and exits 0; SIGHUP
reloads the configuration file and refuses a bad one, keeping the old."""

from __future__ import annotations

import threading

from agent.workload import QoSClass
from devtools.criclient import CRIClient, CRIError
from tests.robust.harness import RuntimeServer, Site, books_problems, create, run_pod
from tests.waiting import wait_until


def _refused(site: Site) -> bool:
    """A new caller is turned away (the agent no longer accepts calls)."""
    try:
        with CRIClient(str(site.listen), timeout=2) as client:
            client.version()
    except CRIError:
        return True
    return False


def test_sigterm_finishes_the_call_in_flight(site: Site, runtime_server: RuntimeServer) -> None:
    runtime = runtime_server.runtime
    agent = site.start(runtime_server.endpoint)
    with agent.client() as client:
        sandbox, pod = run_pod(client, "batch", QoSClass.BESTEFFORT)
        create(client, sandbox, pod, "batch", 0)
        db_sandbox, db_pod = run_pod(client, "db")

        # db's create is slow at the runtime; SIGTERM arrives meanwhile.
        gate = runtime.hold_next("CreateContainer")
        result: list[str | Exception] = []

        def kubelet() -> None:
            try:
                result.append(create(client, db_sandbox, db_pod, "db", 2, start=False))
            except CRIError as err:
                result.append(err)

        caller = threading.Thread(target=kubelet)
        caller.start()
        assert gate.entered.wait(10)
        agent.proc.terminate()
        agent.wait_message(b"STOPPING=1")
        wait_until(lambda: _refused(site), 10, "the agent to stop accepting new calls")
        assert agent.proc.poll() is None, "exited with a call in flight"
        gate.release.set()
        caller.join(15)

    code, stderr = agent.died()
    assert code == 0, stderr
    assert len(result) == 1 and isinstance(result[0], str), result  # succeeded for its caller
    db = result[0]
    assert not site.listen.exists(), "socket left behind"
    state = agent.state()
    assert state["containers"][db]["exclusive_cpus"]  # written on the way out
    assert books_problems(runtime, state) == []


def test_sighup_reloads_and_refuses_a_bad_file(site: Site, runtime_server: RuntimeServer) -> None:
    agent = site.start(runtime_server.endpoint)
    config = site.base / "config.yaml"
    config.write_text("reserved_cpus: '0'\nlog_format: json\nlog_level: [not, a, level]\n")
    agent.proc.send_signal(1)  # SIGHUP
    agent.wait_log("configuration reload refused")
    with agent.client() as client:
        assert client.version().runtime_name  # still serving, on the old configuration
    config.write_text("reserved_cpus: '0'\nlog_format: json\nlog_level: debug\n")
    agent.proc.send_signal(1)
    agent.wait_log("configuration reloaded")
    with agent.client() as client:
        sandbox, pod = run_pod(client, "db")
        create(client, sandbox, pod, "db", 1)  # its scoring is logged at debug level
    code, stderr = agent.stop()
    assert code == 0, stderr
    refused = next(line for line in stderr.splitlines() if "reload refused" in line)
    assert "log_level" in refused, refused  # names what was wrong
    assert '"level": "debug"' in stderr, "the new log level was not applied"
    assert '"level": "debug"' not in stderr.split("configuration reloaded")[0]
