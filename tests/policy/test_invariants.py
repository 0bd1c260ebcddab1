"""Random sequences of place / release / resize / rekey keep the policy's promises.

After every step, checked from the outside: no CPU is exclusive to two containers, no
exclusive CPU is in anyone else's cpuset, reserved and isolated CPUs are never misused,
and the cpusets a caller would hold (decisions plus the updates returned) are exactly
the policy's current ones - i.e. the updates are complete.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent.affinity import ANNOTATION_AFFINITY, Expression, Operator, crm_term
from agent.policy.errors import ResourceExhausted
from agent.policy.policy import CpusetUpdate, Decision, Policy
from agent.policy.request import ContainerRequest
from agent.workload import QoSClass
from tests.policy.helpers import policy, request
from topology.cpuset import CPUSet
from topology.tree import Machine

Machines = Callable[[str], Machine]

# kind, size (CPUs or tenths of a CPU), namespace index, affinity weight, target index
_place = st.tuples(
    st.just("place"),
    st.sampled_from(["exclusive", "burstable", "besteffort", "fraction"]),
    st.integers(1, 6),
    st.integers(0, 3),
    st.integers(-3, 3),
    st.integers(0, 20),
)
_other = st.tuples(
    st.sampled_from(["release", "release_pod", "resize", "rekey"]),
    st.integers(0, 40),
    st.integers(1, 6),
)
OPS = st.lists(st.one_of(_place, _place, _other), min_size=1, max_size=40)

CASES = [
    ("desktop-1s-4c-ht", {}),
    ("isolated-offline", {}),
    ("isolated-offline", {"isolated_for_exclusive": True, "reserved_cpus": "0"}),
    ("xeon-2s-2numa", {"reserved_cpus": "0,40", "colocate_pods": True}),
    ("epyc-2s-nps4", {}),
]

EVERY = Expression("", Operator.ALWAYS_TRUE)


class Caller:
    """What the relay would know: the cpusets it wrote, kept up to date by the updates."""

    def __init__(self, pol: Policy) -> None:
        self.pol = pol
        self.cpus: dict[str, CPUSet] = {}

    def apply(self, decision: Decision | None, ups: tuple[CpusetUpdate, ...]) -> None:
        if decision is not None:
            self.cpus[decision.key] = decision.cpus
            assert all(u.key != decision.key for u in ups)
        for update in ups:
            assert update.key in self.cpus, f"update for unknown {update.key}"
            self.cpus[update.key] = update.cpus

    def check(self, machine: Machine, reserved: CPUSet) -> None:
        self.pol.check_invariants()
        now = self.pol.assignments()
        assert set(now) == set(self.cpus)
        assert {k: d.cpus for k, d in now.items()} == self.cpus
        exclusive = CPUSet()
        for decision in now.values():
            if decision.exclusive:
                assert decision.cpus.isdisjoint(exclusive)
                assert decision.cpus.isdisjoint(reserved)
                exclusive |= decision.cpus
        for decision in now.values():
            if decision.exclusive:
                continue
            assert decision.cpus, f"{decision.key} has an empty cpuset"
            assert decision.cpus.isdisjoint(exclusive)
            assert decision.cpus.isdisjoint(machine.isolated)
            if decision.pool != "reserved":
                assert decision.cpus.isdisjoint(reserved)
            elif reserved:
                assert decision.cpus == reserved
        if not self.pol.config.isolated_for_exclusive:
            # Nobody asked for isolated CPUs in these runs.
            assert exclusive.isdisjoint(machine.isolated)


@pytest.mark.parametrize(("shape", "config"), CASES)
@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops=OPS)
def test_random_sequences_keep_invariants(
    machines: Machines, shape: str, config: dict[str, object], ops: list[tuple[object, ...]]
) -> None:
    machine = machines(shape)
    pol = policy(machine, **config)
    reserved = pol.config.reserved_cpus
    caller = Caller(pol)
    serial = 0
    requests: dict[str, ContainerRequest] = {}
    namespaces = ["default", "web", "kube-system", "batch"]
    for op in ops:
        keys = sorted(caller.cpus)
        if op[0] == "place":
            _, kind, size, ns, weight, target = op
            assert isinstance(kind, str) and isinstance(size, int)
            assert isinstance(ns, int) and isinstance(weight, int) and isinstance(target, int)
            serial += 1
            label = f"app{target % 4}"
            terms = ()
            if weight:
                match = Expression("pod/labels/app", Operator.EQUALS, (label,))
                terms = (crm_term(ANNOTATION_AFFINITY, match, EVERY, weight),)

            if kind == "exclusive":
                milli, qos, limit = size * 1000, QoSClass.GUARANTEED, None
            elif kind == "fraction":
                milli, qos, limit = size * 300, QoSClass.GUARANTEED, None
            elif kind == "burstable":
                milli, qos, limit = size * 400, QoSClass.BURSTABLE, 0
            else:
                milli, qos, limit = 0, QoSClass.BESTEFFORT, None
            req = request(
                f"c{serial}",
                milli,
                qos=qos,
                limit=limit,
                pod=f"p{serial % 5}",
                name=f"c{serial}",
                namespace=namespaces[ns],
                labels={"app": f"app{serial % 4}"},
                terms=terms,
            )
            try:
                decision = pol.place(req)
            except ResourceExhausted:
                continue
            requests[req.key] = req
            caller.apply(decision, decision.updates)
        elif keys:
            name, pick, size = op
            assert isinstance(pick, int) and isinstance(size, int)
            key = keys[pick % len(keys)]
            if name == "release":
                ups = pol.release(key)
                del caller.cpus[key]
                caller.apply(None, ups)
            elif name == "release_pod":
                ups = pol.release_pod(requests[key].container.pod.uid)
                for k in [k for k in caller.cpus if pol.current(k) is None]:
                    del caller.cpus[k]
                caller.apply(None, ups)
            elif name == "resize":
                old = requests[key]
                new = request(key, size * 1000, pod=old.container.pod.name, name=key)
                try:
                    decision = pol.resize(new)
                except ResourceExhausted:
                    pass
                else:
                    requests[key] = new
                    caller.apply(decision, decision.updates)
            else:
                new_key = f"id-{key}"
                pol.rekey(key, new_key)
                caller.cpus[new_key] = caller.cpus.pop(key)
                requests[new_key] = requests.pop(key)
        caller.check(machine, reserved)
