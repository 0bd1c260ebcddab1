"""The one evaluator: a container's terms and its pod's rules against what is placed.

Once per decision it turns every rule that can concern the container into values
the chooser ranks places with (rulings.py), reading the occupancy index
(occupancy.py) for the containers each term selects:

- its own terms, whichever annotation wrote them, and the colocate options
  (which are terms by closeness the configuration gives every container);
- the terms of placed pods and containers that select it (Kubernetes' always,
  cri-resource-manager's with `symmetric_affinity`);
- its pod's node affinity and spread constraints, and the domains its pod's
  required rules chose before (`confine`).

A term at a level becomes a mask of CPUs (required: where a place may lie;
preferred: where it earns or loses the weight); a term by closeness adds its
weight, times closeness, to every pool around each container it selects. The
semantics are in docs/pod-rules.md and docs/placement.md.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from agent.affinity.expression import Expression
from agent.affinity.rule import ContainerSelector
from agent.policy.config import PolicyConfig
from agent.policy.domains import Domains, Topology
from agent.policy.errors import InvalidRequest
from agent.policy.occupancy import HeldTerm, Occupancy, PlacedPod
from agent.policy.request import ContainerRequest
from agent.policy.rulings import (
    SCORE_DIGITS,
    Note,
    Preferred,
    Pulls,
    Required,
    Source,
    Spread,
)
from agent.rules import (
    ANNOTATION_AFFINITY,
    ANNOTATION_SPREAD,
    Level,
    NodeAffinity,
    PodSelector,
    SpreadConstraint,
    core_problems,
    pod_selector,
    reach_problems,
    selectable_labels,
)
from agent.terms.operator import Operator
from agent.terms.term import CLOSENESS, Term, TermKind

REQUIRED_NODE_TERMS = "requiredDuringSchedulingIgnoredDuringExecution"

# The rule a pod's later containers, re-created containers and resizes keep.
POD_PLACE_RULE = "the pod's place"

# A placed pod's *required* affinity to the newcomer counts as a preference of this
# weight (Kubernetes' hardPodAffinityWeight, whose default is 1).
HARD_AFFINITY_WEIGHT = 1

COLOCATE_PODS = "colocate_pods"
COLOCATE_NAMESPACES = "colocate_namespaces"
_EVERY = Expression("", Operator.ALWAYS_TRUE)


def colocate_terms(config: PolicyConfig, namespace: str) -> tuple[Term, ...]:
    """The colocate options as the terms by closeness they give every container:
    `colocate_weight` towards each container of its pod, or of its namespace."""
    out = []
    if config.colocate_pods:
        out.append(_colocate(COLOCATE_PODS, None, config.colocate_weight))
    if config.colocate_namespaces:
        out.append(_colocate(COLOCATE_NAMESPACES, namespace, config.colocate_weight))
    return tuple(out)


@functools.lru_cache(maxsize=256)
def _colocate(option: str, namespace: str | None, weight: int) -> Term:
    scope = None if namespace is None else Expression("namespace", Operator.EQUALS, (namespace,))
    selector = ContainerSelector(_EVERY, scope)
    return Term(TermKind.AFFINITY, False, weight, selector, CLOSENESS, option, option)


def _dot(close: Sequence[Sequence[float]], weights: Sequence[tuple[int, float]]) -> list[float]:
    """Every pool's closeness-weighted sum of `weights` (partner pool, weight)."""
    return [round(sum(w * row[q] for q, w in weights), SCORE_DIGITS) for row in close]


def _add(partners: dict[str, list[Any]], key: str, home: int, weight: int) -> None:
    found = partners.get(key)
    if found is None:
        partners[key] = [home, weight]
    else:
        found[1] += weight


def _source(term: Term, own: bool) -> Source:
    if term.source == COLOCATE_PODS:
        return Source.COLOCATE_PODS
    if term.source == COLOCATE_NAMESPACES:
        return Source.COLOCATE_NAMESPACES
    return Source.AFFINITY if own else Source.SYMMETRIC


class Evaluation:
    """One container's rules, evaluated against the placed pods and containers."""

    def __init__(
        self,
        request: ContainerRequest,
        topology: Topology,
        occupancy: Occupancy,
        config: PolicyConfig,
        numa: Mapping[int, tuple[int, Mapping[str, str]]],
        reserved: int,
        close: Sequence[Sequence[float]],
        *,
        exclusive: bool = True,
        confine: int | None = None,
    ) -> None:
        """`close` is the pool x pool closeness table. `confine` is None for a pod's
        first container; for its later containers, its re-created ones and resizes
        it is the CPUs of the domains the pod's required rules chose then: the
        place must stay inside them, and required rules are not checked again
        (docs/pod-rules.md, "The pod is the unit")."""
        self.topology = topology
        self.required: list[Required] = []
        self.preferred: list[Preferred] = []
        self.spread: list[Spread] = []
        self.pulls: Pulls | None = None
        container = request.container
        pod = container.pod
        self._container = container
        self._uid = pod.uid
        self._namespace = pod.namespace
        self._labels = selectable_labels(pod.labels)
        self._occupancy = occupancy
        self._config = config
        online = topology[Level.HOST].masks[0]
        self._online = online
        self._placed = confine is not None
        # Terms by closeness, per source: partner container -> [its home pool, the
        # summed weight of the terms between the two].
        self._partners: dict[Source, dict[str, list[Any]]] = {}
        rules = request.rules
        problems = reach_problems(rules, pod.namespace, config.exclusive_domain_namespaces)
        if not exclusive:
            problems += core_problems(rules)
        if problems:
            raise InvalidRequest("; ".join(problems))
        system = pod.namespace in config.system_namespaces
        node_allowed = self._node_affinity(rules.node_affinity, numa)
        for term in (*rules.pod_terms, *request.terms, *colocate_terms(config, pod.namespace)):
            if term.level is None:
                self._own_pull(term)
            else:
                self._own_term(term, term.level, system)
        self._theirs(system)
        for constraint in rules.spread:
            self._spread(constraint, node_allowed & ~reserved if reserved else node_allowed)
        if confine is not None and confine & online != online:
            where = topology[Level.NUMA].describe(confine)

            def why(where: str = where) -> str:
                return (
                    f"the pod's required rules chose its domains when its first container "
                    f"was placed (within {where}), and they have no room for this"
                )

            self.required.append(Required(POD_PLACE_RULE, confine, None, why))
        self.pulls = self._sum_pulls(close)

    @property
    def empty(self) -> bool:
        return not self.required and not self.preferred and not self.spread and not self.pulls

    def pull(self, pool: int) -> float:
        """The score by closeness of a place in `pool`."""
        return self.pulls.total[pool] if self.pulls is not None else 0.0

    # -- building -------------------------------------------------------------

    def _pods(self, term: Term, *, skip_own: bool, skip_system: bool) -> list[PlacedPod]:
        out = []
        for placed in self._occupancy.selected_pods(term.selector, self._container):
            if skip_own and placed.uid == self._uid:
                continue
            if skip_system and placed.namespace in self._config.system_namespaces:
                continue
            out.append(placed)
        return out

    def _own_pull(self, term: Term) -> None:
        """A term by closeness: its weight towards (or away from) the home pool of
        every placed container it selects."""
        partners = self._partners.setdefault(_source(term, own=True), {})
        for placed in self._occupancy.selected(term.selector, self._container):
            if placed.home >= 0:  # a reserved container lives in no pool
                _add(partners, placed.key, placed.home, term.signed)

    def _own_term(self, term: Term, level: Level, system: bool) -> None:
        domains = self.topology[level]
        rule = f"{term.source}: {term.path} ({term.strength()} at {level})"
        if term.required and self._placed:
            return  # decided when the pod's first container was placed
        if term.anti:
            if term.required and system:
                return  # daemons are invisible to required anti-affinity, both ways
            # A pod never repels itself.
            pods = self._pods(term, skip_own=True, skip_system=term.required)
            forbidden = 0
            for placed in pods:
                forbidden |= domains.expand(placed.occupied)
            if term.required:
                self.required.append(
                    Required(rule, self._online & ~forbidden, None, _anti_why(term, pods, domains))
                )
            else:
                self.preferred.append(Preferred(rule, term.weight, forbidden, None, anti=True))
            return
        # Affinity: the pod's own containers placed already count.
        pods = self._pods(term, skip_own=False, skip_system=False)
        good = 0
        for placed in pods:
            good |= domains.expand(placed.occupied)
        if term.required:
            if not pods and term.selector.selects(self._container, self._container, self._labels):
                return  # the first pod of its kind: the term holds anywhere
            self.required.append(Required(rule, good, level, _affinity_why(term, pods, domains)))
        elif good:
            self.preferred.append(Preferred(rule, term.weight, good, level))

    def _theirs(self, system: bool) -> None:
        """Placed pods' and containers' terms that select this container count for it
        too. Required anti-affinity terms alike (same place in their pods'
        annotations, level and selector, as replicas of one workload have) keep out
        of their pods' domains together, as one rule naming all of them."""
        keep_out: dict[tuple[str, Level, str], list[PlacedPod]] = {}
        like: dict[tuple[bool, Level | None, int], list[Any]] = {}
        for held in self._occupancy.terms_about(self._container, self._labels):
            term, placed = held.term, held.pod
            level = term.level
            if level is None:
                self._their_pull(held)
                continue
            if placed.uid == self._uid:
                continue  # a pod's own terms are its own rules
            domains = self.topology[level]
            theirs = domains.expand(placed.occupied)
            if term.anti and term.required:
                if self._placed:
                    continue  # decided when the pod's first container was placed
                if system or placed.namespace in self._config.system_namespaces:
                    continue  # daemons: invisible both ways
                selector = _matching(term)
                keep_out.setdefault((term.path, level, selector), []).append(placed)
                continue
            # Like terms of many pods over the same domains are summed into one
            # preference: a decision costs the distinct places, not the pods.
            weight = HARD_AFFINITY_WEIGHT if term.required and not term.anti else term.weight
            group = (term.anti, None if term.anti else level, theirs)
            found = like.get(group)
            if found is None:
                like[group] = [weight, placed.key, term, 0]
            else:
                found[0] += weight
                found[3] += 1
        for (anti, single, theirs), (weight, owner, first, others) in like.items():
            # The rule's text is built only if a note shows it (symmetry makes many).
            self.preferred.append(Preferred("", weight, theirs, single, anti, owner, first, others))
        for (path, level, selector), pods in keep_out.items():
            domains = self.topology[level]
            theirs = 0
            for placed in pods:
                theirs |= domains.expand(placed.occupied)
            owners = ", ".join(p.key for p in pods[:4]) + (
                f" and {len(pods) - 4} more" if len(pods) > 4 else ""
            )
            rule = (
                f"the {ANNOTATION_AFFINITY} of pod{'s' if len(pods) > 1 else ''} {owners}: "
                f"{path} (required anti-affinity at {level})"
            )
            why = _symmetric_why(selector, theirs, domains)
            self.required.append(Required(rule, self._online & ~theirs, None, why))

    def _their_pull(self, held: HeldTerm) -> None:
        """A placed container's term by closeness selecting this one: its weight
        counts from that container's home pool (symmetric_affinity)."""
        partners = self._partners.setdefault(_source(held.term, own=False), {})
        if held.container is not None:
            homes = [(held.container.key, held.container.home)]
        else:  # a pod-wide term: from each of the pod's containers
            homes = [(c.key, c.home) for c in self._occupancy.containers_of(held.pod)]
        for key, home in homes:
            if home >= 0:
                _add(partners, key, home, held.term.signed)

    def _sum_pulls(self, close: Sequence[Sequence[float]]) -> Pulls | None:
        """Every pool's score by closeness, and each source's part for explanations;
        None when it is zero everywhere."""
        if not self._partners:
            return None
        total: dict[int, float] = {}
        shown: list[tuple[Source, int, dict[int, float]]] = []
        for source in Source:  # in the order explanations show them
            weights: dict[int, float] = {}
            count = 0
            for home, weight in self._partners.get(source, {}).values():
                if weight:
                    weights[home] = weights.get(home, 0.0) + weight
                    total[home] = total.get(home, 0.0) + weight
                    count += 1
            if any(weights.values()):
                shown.append((source, count, weights))
        nonzero = [(q, w) for q, w in total.items() if w]
        if not nonzero:
            return None
        scores = _dot(close, nonzero)
        if len(shown) == 1:
            return Pulls(scores, ((shown[0][0], shown[0][1], scores),))
        return Pulls(scores, tuple((s, n, _dot(close, list(w.items()))) for s, n, w in shown))

    def _node_affinity(
        self, affinity: NodeAffinity | None, numa: Mapping[int, tuple[int, Mapping[str, str]]]
    ) -> int:
        """Adds the node affinity rules; returns the CPUs of the NUMA nodes allowed."""
        if affinity is None:
            return self._online
        allowed = 0
        lacking: list[str] = []
        for node_id, (cpus, labels) in sorted(numa.items()):
            if affinity.allows(labels):
                allowed |= cpus
            else:
                missing = "; ".join(
                    f"{term.path}: {', '.join(r.describe() for r in failed)}"
                    for term, failed in affinity.failing(labels)
                )
                lacking.append(f"numa{node_id} fails {missing}")
        if affinity.required is not None:
            rule = f"{ANNOTATION_AFFINITY}: nodeAffinity.{REQUIRED_NODE_TERMS}"
            text = "; ".join(lacking) or "every NUMA node qualifies"

            def why(text: str = text, allowed: int = allowed) -> str:
                if not allowed:
                    return f"no NUMA node has the labels it requires ({text})"
                return f"the NUMA nodes it allows have no room ({text})"

            self.required.append(Required(rule, allowed, None, why))
        for preference in affinity.preferred:
            mask = 0
            for cpus, labels in numa.values():
                if preference.matches(labels):
                    mask |= cpus
            if mask:
                rule = f"{ANNOTATION_AFFINITY}: {preference.path} (preferred node affinity)"
                self.preferred.append(Preferred(rule, preference.weight, mask, None))
        return allowed

    def _spread(self, constraint: SpreadConstraint, eligible_cpus: int) -> None:
        domains = self.topology[constraint.level]
        counts = [0] * len(domains.masks)
        mine = 0  # where the pod itself is counted already (its other containers)
        counted = PodSelector(constraint.selector)  # pods of its own namespace
        for placed in self._occupancy.selected_pods(counted, self._container):
            for index in domains.indices(placed.occupied):
                counts[index] += 1
            if placed.uid == self._uid:
                mine = domains.expand(placed.occupied)
        eligible = [i for i, m in enumerate(domains.masks) if m & eligible_cpus]
        rule = f"{ANNOTATION_SPREAD}: {constraint.describe()}"
        counts_self = constraint.matches_pod(self._namespace, self._namespace, self._labels)
        if not constraint.required:
            self.spread.append(Spread(constraint, tuple(counts), mine, counts_self))
            return
        if self._placed:
            return  # decided when the pod's first container was placed
        if constraint.min_domains is not None and len(eligible) < constraint.min_domains:
            low = 0
        else:
            low = min((counts[i] for i in eligible), default=0)
        allowed = 0
        for index, mask in enumerate(domains.masks):
            after = counts[index] + (1 if counts_self and not mask & mine else 0)
            if after - low <= constraint.max_skew:
                allowed |= mask
        shown = ", ".join(f"{domains.names[i]} {counts[i]}" for i in eligible)

        def why(low: int = low, shown: str = shown) -> str:
            return (
                f"placing it would make the skew more than {constraint.max_skew} "
                f"(matching pods per domain: {shown}; minimum {low})"
            )

        self.required.append(Required(rule, allowed, None, why))

    # -- evaluating places ----------------------------------------------------

    def allowed(self) -> int:
        """The CPUs every required rule allows (for choosing exclusive CPUs)."""
        mask = self._online
        for rule in self.required:
            mask &= rule.allowed
        return mask

    def finest_single(self) -> Level | None:
        """The finest level a required rule wants a place to sit within one domain of."""
        levels = [r.single for r in self.required if r.single is not None]
        return min(levels, key=list(Level).index) if levels else None

    def finer_regions(self, region: int) -> list[int]:
        """Parts of `region` the preferences single out (their domains cover some of
        it but not all: core and l3 inside a NUMA pool): away from what the
        anti-affinities avoid, and inside each affinity's domains (away too)."""
        away = 0
        toward: list[int] = []
        for pref in self.preferred:
            inside = pref.mask & region
            if not inside or inside == region:
                continue
            if pref.anti:
                away |= pref.mask
            else:
                toward.append(inside)
        out = [region & ~away] if away and region & ~away else []
        out.extend(part & ~away or part for part in toward)
        return out

    def failing(self, cpus: int) -> list[Required]:
        return [r for r in self.required if r.fails(cpus, self.topology)]

    def score(self, cpus: int) -> tuple[float, tuple[Note, ...]]:
        """The weights this place earns, and a note per preference that holds."""
        total = 0
        notes: list[Note] = []
        for pref in self.preferred:
            got = pref.score(cpus, self.topology)
            if got:
                total += got
                notes.append(Note(got, pref))
        return float(total), tuple(notes)

    def skews(self, places: Sequence[int]) -> list[tuple[int, tuple[str, ...]]]:
        """ScheduleAnyway: each place's total skew (and notes), the minimum taken over
        the domains some place touches (those that could still take the container)."""
        out: list[tuple[int, list[str]]] = [(0, []) for _ in places]
        for spread in self.spread:
            domains = self.topology[spread.constraint.level]
            reachable: set[int] = set()
            for cpus in places:
                reachable.update(domains.indices(cpus))
            low = min((spread.counts[i] for i in reachable), default=0)
            for number, cpus in enumerate(places):
                skew = max(
                    (
                        spread.counts[i] + spread.added(domains.masks[i]) - low
                        for i in domains.indices(cpus)
                    ),
                    default=0,
                )
                total, notes = out[number]
                notes.append(f"skew {skew} for {spread.constraint.path}")
                out[number] = (total + skew, notes)
        return [(total, tuple(notes)) for total, notes in out]


def _matching(term: Term) -> str:
    """What a term selects, short: `app=db` for a pod term (`nothing` without a
    label selector), the selector's own words for any other."""
    if term.selector.pod_wide:
        labels = pod_selector(term).labels
        return labels.describe() if labels is not None else "nothing"
    return term.selector.describe()


def _scope(term: Term) -> str:
    return pod_selector(term).namespaces.describe() if term.selector.pod_wide else "its scope"


def _pods(pods: Sequence[PlacedPod], domains: Domains) -> str:
    shown = [f"{p.key} on {domains.describe(p.occupied)}" for p in pods[:6]]
    more = f" and {len(pods) - 6} more" if len(pods) > 6 else ""
    return "; ".join(shown) + more


def _anti_why(term: Term, pods: Sequence[PlacedPod], domains: Domains) -> Callable[[], str]:
    selector = _matching(term)

    def why() -> str:
        taken = 0
        for p in pods:
            taken |= domains.expand(p.occupied)
        word = domains.level.word
        if all(m & taken for m in domains.masks):
            return f"every {word} already runs a pod matching {selector} ({_pods(pods, domains)})"
        return (
            f"{domains.describe(taken)} run a pod matching {selector} ({_pods(pods, domains)}), "
            f"and no other {word} has room"
        )

    return why


def _affinity_why(term: Term, pods: Sequence[PlacedPod], domains: Domains) -> Callable[[], str]:
    selector = _matching(term)

    def why() -> str:
        if not pods:
            return (
                f"no running pod matches {selector} ({_scope(term)}), and the "
                "pod itself does not match it (so it is not the first of its kind)"
            )
        return (
            f"no place with room lies within one {domains.level.word} running a pod "
            f"matching {selector} ({_pods(pods, domains)})"
        )

    return why


def _symmetric_why(selector: str, theirs: int, domains: Domains) -> Callable[[], str]:
    def why() -> str:
        return (
            f"it keeps pods matching {selector} out of {domains.describe(theirs)}, "
            f"and no other {domains.level.word} has room"
        )

    return why
