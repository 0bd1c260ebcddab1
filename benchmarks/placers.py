"""Who places containers in the quality benchmark: the agent's policy and two baselines.

FirstFit is kubelet's static CPU manager in spirit (affinities ignored; exclusive
containers get whole free cores lowest first, then the lowest free CPUs; everything
else shares what is left). Random pins to a seeded random NUMA node.
"""

from __future__ import annotations

import random
from typing import Protocol

from agent.policy.config import PolicyConfig
from agent.policy.errors import ResourceExhausted
from agent.policy.policy import Policy
from agent.policy.record import RESERVED_POOL_NAME
from agent.policy.request import ContainerRequest, CpuKind, classify
from benchmarks.metrics import Placed
from topology.cpuset import CPUSet
from topology.tree import Machine


class Placer(Protocol):
    name: str

    def place(self, request: ContainerRequest) -> CPUSet | None:
        """The container's CPUs, or None if it was refused."""

    def release(self, key: str) -> None: ...

    def snapshot(self) -> list[Placed]:
        """Every live container with its current CPUs."""


class AgentPlacer:
    name = "agent"

    def __init__(self, machine: Machine, config: PolicyConfig) -> None:
        self.policy = Policy(machine, config)

    def place(self, request: ContainerRequest) -> CPUSet | None:
        try:
            return self.policy.place(request).cpus
        except ResourceExhausted:
            return None

    def release(self, key: str) -> None:
        self.policy.release(key)

    def snapshot(self) -> list[Placed]:
        return [
            Placed(key, d.cpus, d.exclusive, d.pool == RESERVED_POOL_NAME)
            for key, d in self.policy.assignments().items()
        ]


class _Pinned:
    """Book-keeping both baselines share: exclusive masks, shared homes, reserved keys."""

    name = "?"

    def __init__(self, machine: Machine, config: PolicyConfig) -> None:
        self.machine = machine
        self.config = config
        self.online = machine.cpus.mask
        self.reserved = config.reserved_cpus.mask
        self.isolated = machine.isolated.mask
        self.exclusive: dict[str, int] = {}
        self.shared: dict[str, int] = {}  # key -> mask of the area it may use
        self.reserved_keys: set[str] = set()

    def taken(self) -> int:
        out = 0
        for mask in self.exclusive.values():
            out |= mask
        return out

    def shared_cpus(self) -> int:
        return self.online & ~(self.taken() | self.reserved | self.isolated)

    def place(self, request: ContainerRequest) -> CPUSet | None:
        need = classify(request, self.config)
        if need.kind is CpuKind.RESERVED:
            self.reserved_keys.add(request.key)
            return CPUSet(self.reserved or self.shared_cpus())
        if need.kind is CpuKind.SHARED:
            self.shared[request.key] = self.shared_area(request)
            return CPUSet(self.shared[request.key] & self.shared_cpus())
        free = self.shared_cpus()
        if free.bit_count() <= need.exclusive_cpus:  # keep one shared CPU, as kubelet does
            return None
        pick = self.pick(free, need.exclusive_cpus)
        if pick is None:
            return None
        self.exclusive[request.key] = pick
        return CPUSet(pick)

    def shared_area(self, request: ContainerRequest) -> int:
        return self.online

    def pick(self, free: int, count: int) -> int | None:
        raise NotImplementedError

    def release(self, key: str) -> None:
        self.exclusive.pop(key, None)
        self.shared.pop(key, None)
        self.reserved_keys.discard(key)

    def snapshot(self) -> list[Placed]:
        shared = self.shared_cpus()
        out = [Placed(k, CPUSet(m), True) for k, m in self.exclusive.items()]
        for key, area in self.shared.items():
            mine = area & shared
            out.append(Placed(key, CPUSet(mine or shared), False))
        reserved = CPUSet(self.reserved or shared)
        out += [Placed(k, reserved, False, True) for k in self.reserved_keys]
        return out


class FirstFitPlacer(_Pinned):
    """Whole free cores lowest first, then the lowest free CPUs; shared work everywhere."""

    name = "first-fit"

    def pick(self, free: int, count: int) -> int | None:
        chosen = 0
        left = count
        for core in sorted(self.machine.iter_cores(), key=lambda c: c.cpus.first()):
            threads = core.cpus.mask
            size = threads.bit_count()
            if left >= size and threads & free == threads:
                chosen |= threads
                left -= size
        rest = free & ~chosen
        while left and rest:
            low = rest & -rest
            chosen |= low
            rest &= ~low
            left -= 1
        return chosen if left == 0 else None


class RandomPlacer(_Pinned):
    """A seeded random NUMA node with room, random free CPUs in it; shared containers
    pinned to a random node's shared CPUs."""

    name = "random"

    def __init__(self, machine: Machine, config: PolicyConfig, seed: int = 0) -> None:
        super().__init__(machine, config)
        self.rng = random.Random(seed)
        self.nodes = [n.cpus.mask for n in machine.iter_numa_nodes()]

    def shared_area(self, request: ContainerRequest) -> int:
        return self.rng.choice(self.nodes)

    def pick(self, free: int, count: int) -> int | None:
        roomy = [m for m in self.nodes if (m & free).bit_count() >= count]
        area = self.rng.choice(roomy) if roomy else free
        ids = CPUSet(area & free).ids()
        if len(ids) < count:
            return None
        return CPUSet.of(self.rng.sample(list(ids), count)).mask
