"""Who occupies which CPUs, and whose terms may concern whom: the one index every
term is evaluated over (agent.policy.evaluation).

A placed container occupies CPUs: an exclusive container its own CPUs, a shared
one its whole pool (its cpuset may grow to all of it), a reserved one the reserved
CPUs. It lives in a home pool, from which terms by closeness measure. Containers
are grouped by pod, because Kubernetes' terms count pods. Two indexes let a
decision look only at the containers a term can concern:

- by attribute value (`pod/labels/app` = `db`, `pod/uid`, `name`, ...; the
  attributes of agent.terms.term.INDEXED_ATTRIBUTES): the containers a selector
  can select;
- the terms of placed containers that count for containers placed after them
  (every pod-wide Kubernetes term, and cri-resource-manager rules when
  `symmetric_affinity` is on), by the attribute value a newcomer must have for
  the term to select it.

Both are derived from the ledger's records; `rebuilt` makes a fresh copy from
them for the invariant check.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from agent.affinity.keys import Accessor, compile_key
from agent.rules import NO_RULES, PodRules, selectable_labels
from agent.terms.term import POD_LABELS, AttributePair, Selector, Term
from agent.workload import ContainerInfo

Handle = tuple[str, int]  # (pod UID or container key, term number)
CONTAINER_NAME_LABEL = "io.kubernetes.container.name"


@dataclass(slots=True, eq=False)
class PlacedContainer:
    key: str
    info: ContainerInfo
    home: int  # its pool's index, -1 for a reserved container
    occupied: int  # CPUs, as a mask
    terms: tuple[Term, ...]  # its own terms (cri-resource-manager's rules)
    pairs: tuple[AttributePair, ...] = ()  # its indexed attributes


@dataclass(slots=True, eq=False)
class PlacedPod:
    """A pod with at least one placed container."""

    uid: str
    namespace: str
    name: str
    labels: Mapping[str, str]  # what selectors see (kubelet's labels left out)
    owner: ContainerInfo  # a container of it: what its pod-wide terms are seen from
    rules: PodRules = NO_RULES  # its Kubernetes rules (pod-wide terms, spread)
    containers: dict[str, int] = field(default_factory=dict)  # record key -> CPUs occupied
    occupied: int = 0  # all its containers' CPUs

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class HeldTerm:
    """A placed pod's or container's term, as another container's placement sees it:
    `container` is None for a pod-wide term (it concerns where the whole pod is)."""

    term: Term
    pod: PlacedPod
    container: PlacedContainer | None


_ACCESSORS: dict[str, Accessor] = {}


def attribute(name: str, info: ContainerInfo) -> str | None:
    """The value of attribute `name` (a cri-resource-manager key) for a container."""
    if name.startswith(POD_LABELS):  # the most asked, read directly
        return info.pod.labels.get(name[len(POD_LABELS) :])
    get = _ACCESSORS.get(name)
    if get is None:
        get = _ACCESSORS[name] = compile_key(name)
    return get(info)


def attributes(info: ContainerInfo) -> tuple[AttributePair, ...]:
    """Every indexed attribute a container has, with its value (INDEXED_ATTRIBUTES,
    read directly: this runs for every container placed)."""
    pod = info.pod
    out = [("name", info.name), ("namespace", pod.namespace), ("pod/uid", pod.uid)]
    out.append(("pod/name", pod.name))
    container_name = info.labels.get(CONTAINER_NAME_LABEL)
    if container_name is not None:
        out.append((f"labels/{CONTAINER_NAME_LABEL}", container_name))
    out.extend((POD_LABELS + label, value) for label, value in pod.labels.items())
    return tuple(out)


class Occupancy:
    def __init__(self, *, symmetric: bool = False) -> None:
        # With `symmetric`, containers' own terms count for later containers too.
        self.symmetric = symmetric
        self._containers: dict[str, PlacedContainer] = {}
        self._pods: dict[str, PlacedPod] = {}
        self._by_value: dict[AttributePair, set[str]] = {}  # -> container keys
        self._terms_by_anchor: dict[AttributePair, dict[Handle, HeldTerm]] = {}
        self._anchor_names: dict[str, int] = {}  # attribute -> anchored terms on it
        self._unanchored: dict[Handle, HeldTerm] = {}

    # -- changes --------------------------------------------------------------

    def add(
        self,
        key: str,
        info: ContainerInfo,
        rules: PodRules,
        own: tuple[Term, ...],
        home: int,
        cpus: int,
    ) -> None:
        """A container placed: its pod's `rules` (counted from the pod's first
        container that has some) and its `own` terms."""
        pod = info.pod
        placed = self._pods.get(pod.uid)
        if placed is None:
            labels = selectable_labels(pod.labels)
            placed = PlacedPod(pod.uid, pod.namespace, pod.name, labels, info)
            self._pods[pod.uid] = placed
        if rules is not NO_RULES and placed.rules is NO_RULES:
            placed.rules = rules
            self._index_terms(pod.uid, placed, None, rules.pod_terms, add=True)
        container = PlacedContainer(key, info, home, cpus, own, attributes(info))
        self._containers[key] = container
        by_value = self._by_value
        for pair in container.pairs:
            holders = by_value.get(pair)
            if holders is None:
                by_value[pair] = {key}
            else:
                holders.add(key)
        if own and self.symmetric:
            self._index_terms(key, placed, container, own, add=True)
        placed.containers[key] = cpus
        placed.occupied |= cpus

    def remove(self, key: str) -> None:
        container = self._containers.pop(key, None)
        if container is None:
            return
        for pair in container.pairs:
            holders = self._by_value.get(pair)
            if holders is not None:
                holders.discard(key)
                if not holders:
                    del self._by_value[pair]
        uid = container.info.pod.uid
        placed = self._pods[uid]
        if container.terms and self.symmetric:
            self._index_terms(key, placed, container, container.terms, add=False)
        del placed.containers[key]
        if not placed.containers:
            del self._pods[uid]
            self._index_terms(uid, placed, None, placed.rules.pod_terms, add=False)
            return
        occupied = 0
        for cpus in placed.containers.values():
            occupied |= cpus
        placed.occupied = occupied
        if placed.owner is container.info:
            # Seen from (and labelled as) its first container still placed.
            placed.owner = self._containers[next(iter(placed.containers))].info
            placed.labels = selectable_labels(placed.owner.pod.labels)

    def rekey(self, old: str, new: str, info: ContainerInfo) -> None:
        """The container `old` is known as `new` now, with `info` (its runtime id)."""
        container = self._containers.get(old)
        if container is None:
            return
        rules = self._pods[container.info.pod.uid].rules
        self.remove(old)
        self.add(new, info, rules, container.terms, container.home, container.occupied)

    def _index_terms(
        self,
        owner: str,
        pod: PlacedPod,
        container: PlacedContainer | None,
        terms: tuple[Term, ...],
        *,
        add: bool,
    ) -> None:
        seen_from = pod.owner if container is None else container.info
        for number, term in enumerate(terms):
            handle = (owner, number)
            pairs = term.selector.anchors(seen_from)
            if pairs == ():
                continue  # selects nothing
            held = HeldTerm(term, pod, container)
            if pairs is None:
                if add:
                    self._unanchored[handle] = held
                else:
                    self._unanchored.pop(handle, None)
                continue
            for pair in pairs:
                bucket = self._terms_by_anchor.get(pair)
                if add:
                    if bucket is None:
                        bucket = self._terms_by_anchor[pair] = {}
                    if handle not in bucket:
                        self._anchor_names[pair[0]] = self._anchor_names.get(pair[0], 0) + 1
                    bucket[handle] = held
                elif bucket is not None and bucket.pop(handle, None) is not None:
                    count = self._anchor_names[pair[0]] - 1
                    if count:
                        self._anchor_names[pair[0]] = count
                    else:
                        del self._anchor_names[pair[0]]
                    if not bucket:
                        del self._terms_by_anchor[pair]

    # -- reading --------------------------------------------------------------

    def containers(self) -> Iterator[PlacedContainer]:
        return iter(self._containers.values())

    def pods(self) -> Iterator[PlacedPod]:
        return iter(self._pods.values())

    def containers_of(self, pod: PlacedPod) -> list[PlacedContainer]:
        return [self._containers[key] for key in pod.containers]

    def pod(self, uid: str) -> PlacedPod | None:
        return self._pods.get(uid)

    def _candidates(self, selector: Selector, owner: ContainerInfo) -> list[PlacedContainer]:
        """The containers the index says `selector` may select, in a stable order."""
        pairs = selector.anchors(owner)
        if pairs is None:
            return list(self._containers.values())
        if len(pairs) == 1:
            keys: Iterable[str] = self._by_value.get(pairs[0], ())
        else:
            union: set[str] = set()
            for pair in pairs:
                union |= self._by_value.get(pair, set())
            keys = union
        return [self._containers[key] for key in sorted(keys)]

    def selected(self, selector: Selector, owner: ContainerInfo) -> Iterator[PlacedContainer]:
        """The placed containers `selector`, of a term held by `owner`, selects."""
        for container in self._candidates(selector, owner):
            labels = self._pods[container.info.pod.uid].labels
            if selector.selects(owner, container.info, labels):
                yield container

    def selected_pods(self, selector: Selector, owner: ContainerInfo) -> list[PlacedPod]:
        """The placed pods with a container `selector` selects, each once. A pod-wide
        selector selects a pod's containers alike: each pod is tried once, as its
        first container (in order of pod UID)."""
        if not selector.pod_wide:
            uids = dict.fromkeys(c.info.pod.uid for c in self.selected(selector, owner))
            return [self._pods[uid] for uid in uids]
        pairs = selector.anchors(owner)
        if pairs is None:
            candidates = sorted(self._pods)
        else:
            containers = self._containers
            found: set[str] = set()
            for pair in pairs:
                found.update(containers[key].info.pod.uid for key in self._by_value.get(pair, ()))
            candidates = sorted(found)
        out = []
        for uid in candidates:
            pod = self._pods[uid]
            if selector.selects(owner, pod.owner, pod.labels):
                out.append(pod)
        return out

    def terms_about(self, info: ContainerInfo, labels: Mapping[str, str]) -> Iterator[HeldTerm]:
        """The terms of placed pods and containers that select a newcomer `info`
        (whose pod's selectable labels are `labels`), each once, in a stable order."""
        found: dict[Handle, HeldTerm] = dict(self._unanchored)
        for name in self._anchor_names:
            value = attribute(name, info)
            if value is None:
                continue
            bucket = self._terms_by_anchor.get((name, value))
            if bucket:
                found.update(bucket)
        for handle in sorted(found):
            held = found[handle]
            seen_from = held.pod.owner if held.container is None else held.container.info
            if held.term.selector.selects(seen_from, info, labels):
                yield held

    @property
    def any_terms(self) -> bool:
        return bool(self._terms_by_anchor) or bool(self._unanchored)

    def shape(self) -> tuple[object, ...]:
        """The indexes as plain values, for comparing with a rebuilt copy."""
        return (
            {k: (c.home, c.occupied, c.terms) for k, c in self._containers.items()},
            {u: (p.labels, p.rules, dict(p.containers), p.occupied) for u, p in self._pods.items()},
            self._by_value,
            {pair: set(bucket) for pair, bucket in self._terms_by_anchor.items()},
            self._anchor_names,
            set(self._unanchored),
        )
