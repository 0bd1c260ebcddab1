"""What the node agent shows of its books: each live container's placement (for
`status`, metrics and `simulate`) and the cpusets it wants (for the reconcile).
Pure functions over the books, called with the decision lock held."""

from __future__ import annotations

from dataclasses import dataclass

from agent.node.books import Books
from topology.cpuset import CPUSet


@dataclass(frozen=True, slots=True)
class Wanted:
    """What the agent wants a created container's cpusets to be (for reconciling)."""

    container_id: str
    who: str  # container 'x' of pod ns/p
    cpus: CPUSet  # empty: the agent does not pin (pin_cpus off)
    mems: CPUSet


@dataclass(frozen=True, slots=True)
class Placement:
    """One live container as `status`, metrics and `simulate` show it."""

    namespace: str
    pod: str
    name: str
    container_id: str
    pod_uid: str
    cpuset_cpus: str
    cpuset_mems: str
    exclusive: bool
    pool: str
    score: float = 0.0  # the placement's affinity score when it was placed


def placements_of(books: Books) -> list[Placement]:
    items = []
    for cid in books.sent:
        record = books.record(cid)
        if record is None or books.policy.held(cid):
            continue  # exited: its place is kept, but nothing runs there
        info = record.request.container
        items.append(
            Placement(
                namespace=info.namespace,
                pod=info.pod.name,
                name=info.name,
                container_id=cid,
                pod_uid=info.pod.uid,
                cpuset_cpus=str(record.cpus),
                cpuset_mems=str(record.mems),
                exclusive=record.is_exclusive,
                pool=record.pool_name,
                score=record.score,
            )
        )
    return sorted(items, key=lambda p: (p.namespace, p.pod, p.name, p.container_id))


def wanted_of(books: Books) -> list[Wanted]:
    out = []
    for cid in books.sent:
        record = books.record(cid)
        if record is not None and not books.policy.held(cid):
            out.append(Wanted(cid, record.request.container.who, record.cpus, record.mems))
    return out
