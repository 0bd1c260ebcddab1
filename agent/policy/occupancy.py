"""Which pods occupy which CPUs: what the pod rules look at, kept as placements change.

A pod occupies the CPUs of its running containers: an exclusive container its
own CPUs, a shared container its whole pool (its cpuset may grow to all of it),
a reserved container the reserved CPUs. Rules ask which domains of a level hold
a pod their selector matches; with these masks that is one expansion per pod.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from agent.rules import NO_RULES, LabelSelector, Operator, PodRules, PodTerm, selectable_labels
from agent.workload import ContainerInfo

LabelPair = tuple[str, str]


@dataclass(slots=True, eq=False)
class PlacedPod:
    """A pod with at least one placed container."""

    uid: str
    namespace: str
    name: str
    labels: Mapping[str, str]
    rules: PodRules
    containers: dict[str, int] = field(default_factory=dict)  # record key -> CPUs occupied
    occupied: int = 0  # all its containers' CPUs

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def anchors(selector: LabelSelector) -> tuple[LabelPair, ...] | None:
    """Label pairs of which a pod matching `selector` must have at least one, or
    None when no such short list exists (then every pod is a candidate)."""
    if selector.match_labels:
        return selector.match_labels[:1]
    for req in selector.requirements:
        if req.operator is Operator.IN:
            return tuple((req.key, value) for value in sorted(req.values))
    return None


class Occupancy:
    """The placed pods, indexed two ways so that a decision looks only at the pods a
    rule can concern: by label (which pods can a selector match) and by the label
    pairs other pods' terms anchor on (whose terms can match a newcomer)."""

    def __init__(self) -> None:
        self._pods: dict[str, PlacedPod] = {}
        self._by_label: dict[LabelPair, set[str]] = {}
        # Terms of placed pods, by the label pair a pod must have to match them.
        self._terms_by_anchor: dict[LabelPair, dict[tuple[str, int], PodTerm]] = {}
        self._unanchored_terms: dict[tuple[str, int], PodTerm] = {}

    def add(self, key: str, container: ContainerInfo, rules: PodRules, cpus: int) -> None:
        pod = container.pod
        placed = self._pods.get(pod.uid)
        if placed is None:
            labels = selectable_labels(pod.labels)
            placed = PlacedPod(pod.uid, pod.namespace, pod.name, labels, NO_RULES)
            self._pods[pod.uid] = placed
            for pair in labels.items():
                self._by_label.setdefault(pair, set()).add(pod.uid)
        if rules is not NO_RULES and placed.rules is NO_RULES:
            placed.rules = rules
            self._index_terms(placed, add=True)
        placed.containers[key] = cpus
        placed.occupied |= cpus

    def remove(self, key: str, container: ContainerInfo) -> None:
        uid = container.pod.uid
        placed = self._pods.get(uid)
        if placed is None or placed.containers.pop(key, None) is None:
            return
        if not placed.containers:
            del self._pods[uid]
            for pair in placed.labels.items():
                holders = self._by_label.get(pair)
                if holders is not None:
                    holders.discard(uid)
                    if not holders:
                        del self._by_label[pair]
            self._index_terms(placed, add=False)
            return
        occupied = 0
        for cpus in placed.containers.values():
            occupied |= cpus
        placed.occupied = occupied

    def rekey(self, old: str, new: str, container: ContainerInfo) -> None:
        placed = self._pods.get(container.pod.uid)
        if placed is not None and old in placed.containers:
            placed.containers[new] = placed.containers.pop(old)

    def _index_terms(self, placed: PlacedPod, *, add: bool) -> None:
        for number, term in enumerate(placed.rules.pod_terms):
            if term.selector is None:
                continue  # matches no pod
            handle = (placed.uid, number)
            pairs = anchors(term.selector)
            if pairs is None:
                if add:
                    self._unanchored_terms[handle] = term
                else:
                    self._unanchored_terms.pop(handle, None)
                continue
            for pair in pairs:
                if add:
                    self._terms_by_anchor.setdefault(pair, {})[handle] = term
                    continue
                bucket = self._terms_by_anchor.get(pair)
                if bucket is not None:
                    bucket.pop(handle, None)
                    if not bucket:
                        del self._terms_by_anchor[pair]

    def pods(self) -> Iterator[PlacedPod]:
        return iter(self._pods.values())

    def pod(self, uid: str) -> PlacedPod | None:
        return self._pods.get(uid)

    def selected(self, selector: LabelSelector) -> Iterator[PlacedPod]:
        """Placed pods `selector` matches (namespaces not yet considered)."""
        pairs = anchors(selector)
        if pairs is None:
            candidates: Iterator[PlacedPod] = iter(list(self._pods.values()))
        else:
            uids: set[str] = set()
            for pair in pairs:
                uids |= self._by_label.get(pair, set())
            candidates = (self._pods[uid] for uid in sorted(uids))
        for placed in candidates:
            if selector.matches(placed.labels):
                yield placed

    def terms_about(self, labels: Mapping[str, str]) -> Iterator[tuple[PlacedPod, PodTerm]]:
        """Terms of placed pods whose selector matches a pod with `labels` (their
        namespace scope not yet considered), each once, in a stable order."""
        found: dict[tuple[str, int], PodTerm] = dict(self._unanchored_terms)
        for pair in labels.items():
            bucket = self._terms_by_anchor.get(pair)
            if bucket:
                found.update(bucket)
        for (uid, _), term in sorted(found.items()):
            assert term.selector is not None
            if term.selector.matches(labels):
                yield self._pods[uid], term

    @property
    def any_terms(self) -> bool:
        return bool(self._terms_by_anchor) or bool(self._unanchored_terms)
