"""The placement quality suite: scenarios generated in code from fixed seeds.

A scenario is a machine, a policy config and a sequence of add / remove events;
pods carry real affinity annotations, parsed by agent.affinity, so the weights
the benchmarks score are the ones the agent sees.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from agent.affinity import (
    ANNOTATION_AFFINITY,
    ANNOTATION_ANTI_AFFINITY,
    effective_affinity,
    parse_pod_affinities,
)
from agent.policy.config import PolicyConfig
from agent.policy.request import ContainerRequest, Resources
from agent.workload import ContainerInfo, PodInfo, QoSClass
from topology.cpuset import CPUSet
from topology.shapes import GI, MachineSpec

# 32 CPUs: 2 sockets x 2 NUMA nodes x 4 cores x 2 threads (the pool tree has 7 pools).
SMALL = "2s-4numa-32cpu"
# 16 CPUs: 4 sockets of one node each, 2 cores x 2 threads.
FOUR_SOCKET = "4s-4numa-16cpu"
# 48 CPUs: 2 sockets x 2 dies (one node each) x 6 cores x 2 threads.
DIES = "2s-2die-48cpu"

MACHINE_SPECS: dict[str, MachineSpec] = {
    SMALL: MachineSpec(sockets=2, numa_per_die=2, cores_per_numa=4, memory_per_numa=16 * GI),
    FOUR_SOCKET: MachineSpec(sockets=4, cores_per_numa=2, memory_per_numa=16 * GI),
    DIES: MachineSpec(
        sockets=2,
        dies_per_socket=2,
        cores_per_numa=6,
        distance_same_socket=12,
        memory_per_numa=16 * GI,
    ),
}

MEMORY = 256 * 1024**2  # what each Guaranteed container's memory limit is


@dataclass(frozen=True, slots=True)
class Add:
    request: ContainerRequest


@dataclass(frozen=True, slots=True)
class Remove:
    key: str


Event = Add | Remove


@dataclass(frozen=True, slots=True)
class Scenario:
    name: str
    family: str
    machine: str  # a key of MACHINE_SPECS
    events: tuple[Event, ...]
    config: PolicyConfig = field(default_factory=PolicyConfig)

    def live(self) -> dict[str, ContainerRequest]:
        """The containers present after the last event, in the order they were added."""
        out: dict[str, ContainerRequest] = {}
        for event in self.events:
            if isinstance(event, Add):
                out[event.request.key] = event.request
            else:
                out.pop(event.key, None)
        return out

    def weights(self) -> dict[tuple[str, str], int]:
        """A(c, d) for every ordered pair of live containers with a nonzero weight."""
        return pair_weights(list(self.live().values()))

    @property
    def has_affinities(self) -> bool:
        return bool(self.weights())


def pair_weights(requests: Sequence[ContainerRequest]) -> dict[tuple[str, str], int]:
    out: dict[tuple[str, str], int] = {}
    for c in requests:
        if not c.terms:
            continue
        for d in requests:
            if d.key != c.key:
                weight = effective_affinity(c.container, c.terms, d.container)
                if weight:
                    out[c.key, d.key] = weight
    return out


def resources(qos: QoSClass, milli: int) -> Resources:
    """As kubelet encodes them (shares = milli * 1024 / 1000, quota over a 100 ms period)."""
    if qos is QoSClass.BESTEFFORT:
        return Resources(cpu_shares=2)
    if qos is QoSClass.GUARANTEED:
        return Resources(max(milli * 1024 // 1000, 2), milli * 100, 100_000, MEMORY)
    return Resources(max(milli * 1024 // 1000, 2))


def pod(
    name: str,
    containers: Sequence[tuple[str, int]],
    *,
    qos: QoSClass = QoSClass.GUARANTEED,
    namespace: str = "default",
    labels: Mapping[str, str] | None = None,
    affinity: str = "",
    anti_affinity: str = "",
) -> list[ContainerRequest]:
    """A pod's containers as requests keyed `pod/container`, with the pod's annotations
    parsed into each container's affinity function."""
    annotations: dict[str, str] = {}
    if affinity:
        annotations[ANNOTATION_AFFINITY] = affinity
    if anti_affinity:
        annotations[ANNOTATION_ANTI_AFFINITY] = anti_affinity
    info = PodInfo(
        uid=f"uid-{namespace}-{name}",
        name=name,
        namespace=namespace,
        qosclass=qos,
        labels=dict(labels or {}),
        annotations=annotations,
    )
    parsed = parse_pod_affinities(annotations)
    out = []
    for cname, milli in containers:
        container = ContainerInfo(
            name=cname,
            pod=info,
            labels={
                "io.kubernetes.container.name": cname,
                "io.kubernetes.pod.name": name,
                "io.kubernetes.pod.namespace": namespace,
                "io.kubernetes.pod.uid": info.uid,
            },
        )
        rules = parsed.rules_for(cname)
        out.append(ContainerRequest(f"{name}/{cname}", container, resources(qos, milli), rules))
    return out


def adds(requests: Sequence[ContainerRequest]) -> list[Event]:
    return [Add(r) for r in requests]


def noise(rng: random.Random, prefix: str, count: int, exclusive_share: float = 0.5) -> list[Event]:
    """Unrelated pods: Guaranteed with 1-2 exclusive CPUs, Burstable, BestEffort."""
    events: list[Event] = []
    for i in range(count):
        roll = rng.random()
        if roll < exclusive_share:
            events += adds(pod(f"{prefix}{i}", [("app", rng.choice((1, 2)) * 1000)]))
        elif roll < exclusive_share + (1 - exclusive_share) * 0.7:
            qos = QoSClass.BURSTABLE
            events += adds(pod(f"{prefix}{i}", [("app", rng.choice((100, 250, 500)))], qos=qos))
        else:
            events += adds(pod(f"{prefix}{i}", [("app", 0)], qos=QoSClass.BESTEFFORT))
    return events


def near(app: str, container: str, weight: int) -> str:
    """An affinity rule: pull towards containers named `container` of pods labelled app=`app`."""
    return (
        f"- scope: {{key: pod/labels/app, operator: Equals, values: [{app}]}}\n"
        f"  match: {{key: name, operator: Equals, values: [{container}]}}\n"
        f"  weight: {weight}\n"
    )


# -- families -----------------------------------------------------------------


def pairs(seed: int, machine: str = SMALL, shuffled: bool = False) -> Scenario:
    """web/cache pod pairs across pods: web pulls its own app's cache (cross-pod scope)."""
    rng = random.Random(seed)
    events = noise(rng, "bg", rng.randrange(2, 5))
    pairs_events: list[list[Event]] = []
    for i in range(rng.randrange(2, 4)):
        app = f"shop{i}"
        cache_qos = rng.choice((QoSClass.GUARANTEED, QoSClass.BURSTABLE))
        cache_milli = rng.choice((1, 2)) * 1000 if cache_qos is QoSClass.GUARANTEED else 500
        cache = pod(f"cache-{i}", [("cache", cache_milli)], qos=cache_qos, labels={"app": app})
        web_qos = rng.choice((QoSClass.GUARANTEED, QoSClass.BURSTABLE))
        web_milli = rng.choice((1, 2)) * 1000 if web_qos is QoSClass.GUARANTEED else 250
        web = pod(
            f"web-{i}",
            [("web", web_milli)],
            qos=web_qos,
            labels={"app": app},
            affinity="web:\n" + near(app, "cache", 5),
        )
        pairs_events.append(adds(cache + web))
    ordered = [e for group in pairs_events for e in group]
    if shuffled:
        rng.shuffle(ordered)
    kind = "pairs-any-order" if shuffled else "pairs"
    return Scenario(f"{kind}-{machine}-s{seed}", kind, machine, tuple(events + ordered))


def group(seed: int, machine: str = SMALL) -> Scenario:
    """One pod of 3-4 containers chained by the shorthand affinity (pod scope)."""
    rng = random.Random(seed)
    events = noise(rng, "bg", rng.randrange(3, 7))
    size = rng.randrange(3, 5)
    names = [f"c{i}" for i in range(size)]
    rules = "\n".join(f"c{i}: [{', '.join(names[:i])}]" for i in range(1, size))
    containers = [(n, rng.choice((1, 2)) * 1000) for n in names]
    events += adds(pod("group", containers, affinity=rules))
    return Scenario(f"group-{machine}-s{seed}", "group", machine, tuple(events))


def replicas(seed: int, machine: str = SMALL) -> Scenario:
    """Database replicas pushing each other apart across all pods (AlwaysTrue scope)."""
    rng = random.Random(seed)
    events = noise(rng, "bg", rng.randrange(1, 4))
    anti = (
        "db:\n- scope: {operator: AlwaysTrue}\n"
        "  match: {key: pod/labels/app, operator: Equals, values: [db]}\n  weight: 10\n"
    )
    for i in range(rng.randrange(2, 5)):
        milli = rng.choice((1, 2)) * 1000
        events += adds(pod(f"db-{i}", [("db", milli)], labels={"app": "db"}, anti_affinity=anti))
    return Scenario(f"replicas-{machine}-s{seed}", "replicas", machine, tuple(events))


def namespaces(seed: int, machine: str = SMALL) -> Scenario:
    """Namespace scope: frontends pull backends of their own namespace only; a look-alike
    backend in another namespace must not attract them."""
    rng = random.Random(seed)
    events = noise(rng, "bg", rng.randrange(1, 4))
    for ns in ("shop", "other"):
        events += adds(
            pod(
                f"backend-{ns}",
                [("api", rng.choice((1, 2)) * 1000)],
                namespace=ns,
                labels={"tier": "backend"},
            )
        )
    rule = (
        "front:\n- scope: {key: namespace, operator: Equals, values: [shop]}\n"
        "  match: {key: pod/labels/tier, operator: Equals, values: [backend]}\n  weight: 3\n"
    )
    for i in range(rng.randrange(1, 3)):
        qos = rng.choice((QoSClass.GUARANTEED, QoSClass.BURSTABLE))
        milli = 1000 if qos is QoSClass.GUARANTEED else 200
        events += adds(
            pod(f"front-{i}", [("front", milli)], qos=qos, namespace="shop", affinity=rule)
        )
    return Scenario(f"namespace-{machine}-s{seed}", "namespace", machine, tuple(events))


def mixed(seed: int, machine: str = SMALL) -> Scenario:
    """Exclusive engines with shared sidecars pulled to them, engines pushing apart."""
    rng = random.Random(seed)
    events = noise(rng, "bg", rng.randrange(2, 5), exclusive_share=0.3)
    for i in range(2):
        app = f"engine{i}"
        events += adds(
            pod(
                f"engine-{i}",
                [("engine", rng.choice((2, 4)) * 1000)],
                labels={"app": app, "role": "engine"},
                anti_affinity=(
                    "engine:\n- scope: {operator: AlwaysTrue}\n"
                    "  match: {key: pod/labels/role, operator: Equals, values: [engine]}\n"
                    "  weight: 4\n"
                ),
            )
        )
        events += adds(
            pod(
                f"sidecar-{i}",
                [("side", rng.choice((100, 300)))],
                qos=QoSClass.BURSTABLE,
                labels={"app": app},
                affinity="side:\n" + near(app, "engine", 6),
            )
        )
    return Scenario(f"mixed-{machine}-s{seed}", "mixed", machine, tuple(events))


def pressure(seed: int, machine: str = SMALL) -> Scenario:
    """The machine filled with 1-3 CPU exclusive containers until only the affine pairs
    that come last (and one shared CPU) still fit: they must use what holes are left."""
    rng = random.Random(seed)
    spec = MACHINE_SPECS[machine]
    total = spec.cores_per_numa * spec.threads_per_core * _nodes(machine)
    late: list[ContainerRequest] = []
    for j in range(2):
        app = f"tight{j}"
        late += pod(f"db-{j}", [("db", 2000)], labels={"app": app})
        late += pod(
            f"api-{j}",
            [("api", rng.choice((1, 2)) * 1000)],
            labels={"app": app},
            affinity="api:\n" + near(app, "db", 5),
        )
    room = sum(r.resources.cpu_quota // 100_000 for r in late) + 1
    events: list[Event] = []
    used = 0
    i = 0
    while used < total - room:
        size = min(rng.choice((1, 2, 3)), total - room - used)
        events += adds(pod(f"fill{i}", [("app", size * 1000)]))
        used += size
        i += 1
    return Scenario(f"pressure-{machine}-s{seed}", "pressure", machine, tuple(events + adds(late)))


def churn(seed: int, machine: str = SMALL) -> Scenario:
    """Pods come and go: half the first wave leaves before affine pairs arrive."""
    rng = random.Random(seed)
    first = noise(rng, "wave", 8, exclusive_share=0.6)
    keys = [e.request.key for e in first if isinstance(e, Add)]
    leaving = rng.sample(keys, len(keys) // 2)
    events = first + [Remove(k) for k in leaving]
    for j in range(2):
        app = f"late{j}"
        events += adds(pod(f"store-{j}", [("store", 2000)], labels={"app": app}))
        events += noise(rng, f"mid{j}-", 1)
        events += adds(
            pod(
                f"reader-{j}",
                [("reader", rng.choice((1000, 2000)))],
                labels={"app": app},
                affinity="reader:\n" + near(app, "store", 5),
            )
        )
    return Scenario(f"churn-{machine}-s{seed}", "churn", machine, tuple(events))


def reserved(seed: int) -> Scenario:
    """Reserved CPUs and kube-system pods next to affine pairs on the small machine."""
    rng = random.Random(seed)
    events = adds(
        pod("proxy", [("kube-proxy", 100)], qos=QoSClass.BURSTABLE, namespace="kube-system")
    )
    base = pairs(seed, SMALL)
    events += list(base.events)
    events += noise(rng, "late", 2)
    config = PolicyConfig(reserved_cpus=CPUSet.parse("0,16"))
    return Scenario(f"reserved-{SMALL}-s{seed}", "reserved", SMALL, tuple(events), config)


def _nodes(machine: str) -> int:
    spec = MACHINE_SPECS[machine]
    return spec.sockets * spec.dies_per_socket * spec.numa_per_die


Family = Callable[[int], Scenario]


def suite() -> list[Scenario]:
    """The whole suite, always the same (fixed seeds)."""
    out: list[Scenario] = []
    for seed in (1, 2, 3, 4):
        out.append(pairs(seed))
    out.append(pairs(5, FOUR_SOCKET))
    out.append(pairs(6, DIES))
    for seed in (1, 2, 3):
        out.append(pairs(seed, shuffled=True))
    for seed in (1, 2, 3):
        out.append(group(seed))
    out.append(group(4, DIES))
    for seed in (1, 2, 3):
        out.append(replicas(seed))
    out.append(replicas(4, FOUR_SOCKET))
    out.append(replicas(5, DIES))
    for seed in (1, 2, 3):
        out.append(namespaces(seed))
    for seed in (1, 2, 3):
        out.append(mixed(seed))
    out.append(mixed(4, DIES))
    for seed in (1, 2, 3):
        out.append(pressure(seed))
    out.append(pressure(4, FOUR_SOCKET))
    for seed in (1, 2, 3):
        out.append(churn(seed))
    for seed in (1, 2):
        out.append(reserved(seed))
    return out
