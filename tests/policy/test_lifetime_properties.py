"""Random lives of pods with pod rules: creates, exits, re-creates, resizes and sandbox
stops keep the promises of docs/pod-rules.md ("A pod's life").

After every step: the policy's own invariants (every index rebuilt from the records);
no required anti-affinity is violated among pods whose sandboxes run; every required
affinity held when its pod was placed; no re-create is refused, nor a resize that does
not grow.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent.policy.domains import machine_topology
from agent.policy.errors import PlacementError
from agent.policy.policy import Policy
from agent.policy.request import ContainerRequest, Resources
from agent.rules import Level, PodRules, TermKind, parse_pod_rules, pod_selector
from agent.workload import ContainerInfo, PodInfo, QoSClass
from tests.policy.helpers import policy
from topology.tree import Machine

Machines = Callable[[str], Machine]
LEVELS = (Level.CORE, Level.NUMA, Level.SOCKET)
APPS = ("a", "b")


def rules_text(kind: int, app: str, level: Level) -> dict[str, str]:
    selector = {"matchLabels": {"app": app}}
    req = "requiredDuringSchedulingIgnoredDuringExecution"
    pref = "preferredDuringSchedulingIgnoredDuringExecution"
    body = {"labelSelector": selector, "topologyKey": str(level)}
    affinity: dict[str, object] = {}
    if kind == 1:
        affinity = {"podAntiAffinity": {req: [body]}}
    elif kind == 2:
        affinity = {"podAffinity": {req: [body]}}
    elif kind == 3:
        affinity = {
            "podAntiAffinity": {pref: [{"weight": 40, "podAffinityTerm": body}]},
            "podAffinity": {
                pref: [
                    {
                        "weight": 20,
                        "podAffinityTerm": {**body, "topologyKey": "numa-agent.io/socket"},
                    }
                ]
            },
        }
    out = {"numa-agent.io/affinity": json.dumps(affinity)} if affinity else {}
    if kind == 4:
        spread = [{"maxSkew": 1, "topologyKey": str(level), "labelSelector": selector}]
        out["numa-agent.io/topology-spread-constraints"] = json.dumps(spread)
    return out


@dataclass
class Pod:
    number: int
    info: PodInfo
    rules: PodRules
    containers: dict[str, str] = field(default_factory=dict)  # name -> key (live or exited)
    exited: set[str] = field(default_factory=set)
    attempts: dict[str, int] = field(default_factory=dict)
    sizes: dict[str, int] = field(default_factory=dict)


def container_request(pod: Pod, name: str, milli: int) -> ContainerRequest:
    attempt = pod.attempts.get(name, 0)
    key = f"{pod.info.id}/{name}/{attempt}"
    info = ContainerInfo(name, pod.info)
    if milli % 1000 == 0:
        res = Resources(milli * 1024 // 1000, milli * 100, 100_000, 1 << 28)
    else:
        res = Resources(cpu_shares=milli * 1024 // 1000)
    return ContainerRequest(key, info, res, (), pod.rules)


_op = st.tuples(
    st.sampled_from(["create", "create", "exit", "recreate", "resize", "stop"]),
    st.integers(0, 5),  # pod
    st.integers(0, 1),  # container
    st.integers(1, 4),  # size
    st.integers(0, 4),  # rules kind (at creation)
    st.integers(0, 2),  # level
)
OPS = st.lists(_op, min_size=1, max_size=40)


class World:
    def __init__(self, machine: Machine, pol: Policy) -> None:
        self.machine = machine
        self.pol = pol
        self.topology = machine_topology(machine)
        self.pods: dict[int, Pod] = {}
        self.sandboxes = 0

    def occupied(self, pod: Pod) -> int:
        mask = 0
        for record in self.pol.records().values():
            if record.request.container.pod.id != pod.info.id:
                continue
            if record.exclusive:
                mask |= record.exclusive.mask
            elif record.pool is not None:
                mask |= record.pool.cpus.mask
        return mask

    def check(self) -> None:
        self.pol.check_invariants()
        running = [p for p in self.pods.values() if p.containers]
        for pod in running:
            for term in pod.rules.terms(TermKind.ANTI_AFFINITY, required=True):
                domains = self.topology[term.level]
                mine = domains.expand(self.occupied(pod))
                for other in running:
                    if other is pod or not pod_selector(term).matches_pod(
                        pod.info.namespace, other.info.namespace, other.info.labels
                    ):
                        continue
                    assert not mine & self.occupied(other), (
                        f"{pod.info.name} and {other.info.name} share a {term.level}"
                    )

    def first_placed(self, pod: Pod) -> None:
        """Every required affinity held when the pod was placed."""
        for term in pod.rules.terms(TermKind.AFFINITY, required=True):
            domains = self.topology[term.level]
            mine = domains.expand(self.occupied(pod))
            if pod_selector(term).matches_pod(
                pod.info.namespace, pod.info.namespace, pod.info.labels
            ):
                continue  # the first of its kind may go anywhere
            others = [
                o
                for o in self.pods.values()
                if o is not pod
                and o.containers
                and pod_selector(term).matches_pod(
                    pod.info.namespace, o.info.namespace, o.info.labels
                )
            ]
            assert any(mine & self.occupied(o) for o in others), f"{pod.info.name}: {term.path}"

    def play(self, op: tuple[str, int, int, int, int, int]) -> None:
        kind, number, which, size, rules_kind, level = op
        name = f"c{which}"
        pod = self.pods.get(number)
        if kind == "create":
            if pod is None:
                self.sandboxes += 1
                app = APPS[number % 2]
                annotations = rules_text(rules_kind, app, LEVELS[level])
                info = PodInfo(
                    f"uid-{number}-{self.sandboxes}",
                    f"p{number}",
                    "default",
                    QoSClass.GUARANTEED,
                    id=f"s{self.sandboxes}",
                    labels={"app": app, "io.kubernetes.pod.namespace": "default"},
                    annotations=annotations,
                )
                pod = self.pods[number] = Pod(number, info, parse_pod_rules(annotations))
            if name in pod.containers:
                return
            milli = size * 1000 if size % 2 else size * 300
            first = not pod.containers
            try:
                decision = self.pol.place(container_request(pod, name, milli))
            except PlacementError:
                if first:
                    del self.pods[number]
                return
            pod.containers[name] = decision.key
            pod.sizes[name] = milli
            # A new container while others of the pod are exited: kubelet runs init
            # containers to completion first, so those were completed init
            # containers, and their places went back (lifetime.completed_inits).
            for done in pod.exited:
                del pod.containers[done]
            pod.exited.clear()
            if first:
                self.first_placed(pod)
        elif pod is None or name not in pod.containers:
            return
        elif kind == "exit" and name not in pod.exited:
            self.pol.exited(pod.containers[name])
            pod.exited.add(name)
        elif kind == "recreate" and name in pod.exited:
            pod.attempts[name] = pod.attempts.get(name, 0) + 1
            old = pod.containers[name]
            decision = self.pol.place(container_request(pod, name, pod.sizes[name]))
            assert decision.replaced == old
            pod.containers[name] = decision.key
            pod.exited.discard(name)
        elif kind == "resize" and name not in pod.exited:
            key = pod.containers[name]
            old = pod.sizes[name]
            # Smaller, of the same kind (exclusive stays whole CPUs): it fits where it is.
            milli = min(old, size * 1000) if old % 1000 == 0 else min(old, size * 300)
            request = replace(container_request(pod, name, milli), key=key)
            self.pol.resize(request)  # never grows here: never refused
            pod.sizes[name] = milli
        elif kind == "stop":
            self.pol.release_sandbox(pod.info.id)
            del self.pods[number]


@pytest.mark.parametrize("shape", ["xeon-2s-2numa", "epyc-2s-nps4", "server-4s"])
@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops=OPS)
def test_random_pod_lives_keep_the_pod_rules(
    machines: Machines, shape: str, ops: list[tuple[str, int, int, int, int, int]]
) -> None:
    machine = machines(shape)
    world = World(machine, policy(machine))
    for op in ops:
        world.play(op)
        world.check()
