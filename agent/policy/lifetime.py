"""A pod's life in the ledger (docs/pod-rules.md, "A pod's life"): which exited
container a re-create takes the place of (and taking it), which exited containers
were completed init containers, and the domains a placed pod's required rules chose."""

from __future__ import annotations

from agent.policy.ledger import Ledger, new_record
from agent.policy.record import PlacementRecord
from agent.policy.request import ContainerRequest, Need


def held_for(ledger: Ledger, request: ContainerRequest) -> str | None:
    """The exited container `request` re-creates (same pod, sandbox and name)."""
    container = request.container
    wanted = (container.name, container.pod.id, container.pod.uid)
    for key in ledger.held:
        other = ledger.records[key].request.container
        if (other.name, other.pod.id, other.pod.uid) == wanted:
            return key
    return None


def take_place(
    ledger: Ledger, request: ContainerRequest, need: Need, old_key: str
) -> tuple[PlacementRecord, str] | None:
    """kubelet re-creates an exited container: asking for what it had, it gets its
    place back (its exclusive CPUs too, as kubelet's CPU manager keeps them by pod
    and name), its rules not checked again; installed, with its note. None,
    changing nothing, when it asks for other resources: it is placed again as a
    resize would be, inside its pod's domains."""
    old = ledger.records[old_key]
    if need != old.need:
        return None
    ledger.remove(old_key)
    where = old.pool_name + (f", cpus {old.exclusive}" if old.exclusive else "")
    note = (
        f"{request.key}: re-created in the place of {old_key} ({where}); the pod "
        "rules are not checked again"
    )
    record = new_record(request, need, old.pool, old.exclusive.mask, old.score, note)
    return ledger.install(record), note


def completed_inits(ledger: Ledger, request: ContainerRequest) -> list[str]:
    """kubelet runs init containers one at a time, each to completion, before the
    next container of the pod: exited containers of the sandbox with other names
    are completed init containers, whose places go back now."""
    container = request.container
    return [
        key
        for key in ledger.held
        if (c := ledger.records[key].request.container).pod.id == container.pod.id
        and c.pod.uid == container.pod.uid
        and c.name != container.name
    ]


def confine(ledger: Ledger, pod_uid: str) -> int | None:
    """The CPUs of the domains a placed pod's required rules chose (None: the pod
    has no placed container). At every level its required terms, its
    DoNotSchedule spread and other pods' required anti-affinity toward it name,
    the domains its containers occupy; the whole machine when none does."""
    placed = ledger.occupancy.pod(pod_uid)
    if placed is None:
        return None
    levels = {t.level for t in placed.rules.pod_terms if t.required and t.level is not None}
    levels.update(c.level for c in placed.rules.spread if c.required)
    for held in ledger.occupancy.terms_about(placed.owner, placed.labels):
        term = held.term
        if held.pod.uid != pod_uid and term.required and term.anti and term.level is not None:
            levels.add(term.level)
    mask = ledger.online
    for level in levels:
        mask &= ledger.topology[level].expand(placed.occupied)
    return mask
