"""A pod's rules against what is placed: which CPUs a new container may occupy, and
what each candidate place scores.

Everything is computed once per decision, as CPU masks over the machine's
domains (domains.py), from the placed pods (occupancy.py):

- every required rule becomes a mask of the CPUs a place may touch (a domain is
  in or out as a whole), plus, for required affinity, "within one domain";
- every preferred rule becomes a mask and a weight a place earns by lying inside
  it (and, for affinity, within one domain);
- spread constraints keep their per-domain counts, so a place's skew is a max
  over the domains it touches.

A place is the CPUs a container would occupy: a shared container its whole pool,
an exclusive one the CPUs picked for it. The semantics are in docs/pod-rules.md.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from agent.policy.config import PolicyConfig
from agent.policy.domains import Domains, Topology
from agent.policy.errors import InvalidRequest
from agent.policy.occupancy import Occupancy, PlacedPod
from agent.policy.parts import LEVEL_WORDS
from agent.policy.request import ContainerRequest
from agent.rules import (
    ANNOTATION_AFFINITY,
    ANNOTATION_SPREAD,
    Level,
    NodeAffinity,
    PodTerm,
    SpreadConstraint,
    TermKind,
    core_problems,
    reach_problems,
    selectable_labels,
)

REQUIRED_NODE_TERMS = "requiredDuringSchedulingIgnoredDuringExecution"

# The rule a pod's later containers, re-created containers and resizes keep.
POD_PLACE_RULE = "the pod's place"

# A placed pod's *required* affinity to the newcomer counts as a preference of this
# weight (Kubernetes' hardPodAffinityWeight, whose default is 1).
HARD_AFFINITY_WEIGHT = 1


@dataclass(frozen=True, slots=True)
class Required:
    """A rule a place must satisfy: lie inside `allowed` (and within one domain of
    `single`, when set). `why` says, for a refusal, why places fail it."""

    rule: str  # "numa-agent.io/affinity: podAntiAffinity....[0] (required anti-affinity at ...)"
    allowed: int
    single: Level | None
    why: Callable[[], str]

    def fails(self, cpus: int, topology: Topology) -> bool:
        if cpus & ~self.allowed:
            return True
        return self.single is not None and topology[self.single].single(cpus) is None


@dataclass(frozen=True, slots=True)
class Preferred:
    """A preference: an affinity earns a place `weight` when the place lies inside
    `mask` and within one domain of `single`; an anti-affinity costs it `weight`
    when the place touches `mask` (the same ranking as earning the weight where it
    holds, but an empty machine scores 0, and only places it concerns are noted)."""

    rule: str
    weight: int
    mask: int
    single: Level | None
    anti: bool = False
    owner: str = ""  # a placed pod's key when it is that pod's term (symmetry)
    term: PodTerm | None = None  # ... and the term, for `rule` built only when shown
    others: int = 0  # placed pods besides `owner` whose like terms are summed in here

    @property
    def text(self) -> str:
        if self.term is None:
            return self.rule
        term = self.term
        owner = (
            f"pod {self.owner}'s"
            if not self.others
            else (f"pods {self.owner} and {self.others} more with like terms:")
        )
        return f"{owner} {ANNOTATION_AFFINITY}: {term.path} ({_kind(term)} at {term.level})"

    def score(self, cpus: int, topology: Topology) -> int:
        if self.anti:
            return -self.weight if cpus & self.mask else 0
        if cpus & ~self.mask:
            return 0
        if self.single is not None and topology[self.single].single(cpus) is None:
            return 0
        return self.weight


class Note(NamedTuple):
    """What a preference gave a place; its text is built only if an explanation shows it.
    (A tuple: one is made per preference and candidate, so it must be cheap.)"""

    got: int
    pref: Preferred

    def __str__(self) -> str:
        return f"{self.got:+d} {self.pref.text}"


@dataclass(frozen=True, slots=True)
class Spread:
    """A ScheduleAnyway constraint: its counts per domain, ready for a skew."""

    constraint: SpreadConstraint
    counts: tuple[int, ...]  # matching pods per domain of the level
    mine: int  # CPUs of the domains where the pod itself is counted already
    counts_self: bool  # the pod matches its own selector (the KEP's selfMatch)

    def added(self, mask: int) -> int:
        """What placing the pod in the domain `mask` adds to that domain's count."""
        return 1 if self.counts_self and not mask & self.mine else 0


class Evaluation:
    """One container's rules, evaluated against the placed pods."""

    def __init__(
        self,
        request: ContainerRequest,
        topology: Topology,
        occupancy: Occupancy,
        config: PolicyConfig,
        numa: Mapping[int, tuple[int, Mapping[str, str]]],
        reserved: int,
        *,
        exclusive: bool = True,
        confine: int | None = None,
    ) -> None:
        """`confine` is None for a pod's first container; for its later containers,
        its re-created ones and resizes it is the CPUs of the domains the pod's
        required rules chose then: the place must stay inside them, and required
        rules are not checked again (docs/pod-rules.md, "The pod is the unit")."""
        self.topology = topology
        self.required: list[Required] = []
        self.preferred: list[Preferred] = []
        self.spread: list[Spread] = []
        container = request.container
        pod = container.pod
        self._uid = pod.uid
        self._namespace = pod.namespace
        self._labels = selectable_labels(pod.labels)
        self._occupancy = occupancy
        self._config = config
        online = topology[Level.HOST].masks[0]
        self._online = online
        self._placed = confine is not None
        rules = request.rules
        problems = reach_problems(rules, pod.namespace, config.exclusive_domain_namespaces)
        if not exclusive:
            problems += core_problems(rules)
        if problems:
            raise InvalidRequest("; ".join(problems))
        system = pod.namespace in config.system_namespaces
        node_allowed = self._node_affinity(rules.node_affinity, numa)
        for term in rules.pod_terms:
            self._own_term(term, system)
        self._symmetric(system)
        for constraint in rules.spread:
            self._spread(constraint, node_allowed & ~reserved if reserved else node_allowed)
        if confine is not None and confine & online != online:
            where = {level: topology[level].describe(confine) for level in (Level.NUMA,)}

            def why(where: str = where[Level.NUMA]) -> str:
                return (
                    f"the pod's required rules chose its domains when its first container "
                    f"was placed (within {where}), and they have no room for this"
                )

            self.required.append(Required(POD_PLACE_RULE, confine, None, why))

    @property
    def empty(self) -> bool:
        return not self.required and not self.preferred and not self.spread

    # -- building -------------------------------------------------------------

    def _matching(self, term: PodTerm, *, skip_own: bool, skip_system: bool) -> list[PlacedPod]:
        if term.selector is None:
            return []
        out = []
        for placed in self._occupancy.selected(term.selector):
            if skip_own and placed.uid == self._uid:
                continue
            if skip_system and placed.namespace in self._config.system_namespaces:
                continue
            if term.namespaces.matches(self._namespace, placed.namespace):
                out.append(placed)
        return out

    def _own_term(self, term: PodTerm, system: bool) -> None:
        level = term.level
        domains = self.topology[level]
        rule = f"{ANNOTATION_AFFINITY}: {term.path} ({_kind(term)} at {level})"
        if term.required and self._placed:
            return  # decided when the pod's first container was placed
        if term.kind is TermKind.ANTI_AFFINITY:
            if term.required and system:
                return  # daemons are invisible to required anti-affinity, both ways
            # A pod never repels itself.
            pods = self._matching(term, skip_own=True, skip_system=term.required)
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
        pods = self._matching(term, skip_own=False, skip_system=False)
        good = 0
        for placed in pods:
            good |= domains.expand(placed.occupied)
        if term.required:
            if not pods and term.matches_pod(self._namespace, self._namespace, self._labels):
                return  # the first pod of its kind: the term holds anywhere
            self.required.append(Required(rule, good, level, _affinity_why(term, pods, domains)))
        elif good:
            self.preferred.append(Preferred(rule, term.weight, good, level))

    def _symmetric(self, system: bool) -> None:
        """Placed pods' terms that select this pod count for it too. Required
        anti-affinity terms alike (same place in their pods' annotations, level and
        selector, as replicas of one workload have) keep out of their pods' domains
        together, as one rule naming all of them."""
        keep_out: dict[tuple[str, Level, str], list[PlacedPod]] = {}
        like: dict[tuple[bool, Level | None, int], list[Any]] = {}
        for placed, term in self._occupancy.terms_about(self._labels):
            if placed.uid == self._uid:
                continue  # a pod's own terms are its own rules
            if not term.namespaces.matches(placed.namespace, self._namespace):
                continue
            domains = self.topology[term.level]
            theirs = domains.expand(placed.occupied)
            if term.kind is TermKind.ANTI_AFFINITY and term.required:
                if self._placed:
                    continue  # decided when the pod's first container was placed
                if system or placed.namespace in self._config.system_namespaces:
                    continue  # daemons: invisible both ways
                selector = term.selector.describe() if term.selector is not None else ""
                keep_out.setdefault((term.path, term.level, selector), []).append(placed)
                continue
            # Like terms of many pods over the same domains are summed into one
            # preference: a decision costs the distinct places, not the pods.
            anti = term.kind is TermKind.ANTI_AFFINITY
            weight = HARD_AFFINITY_WEIGHT if term.required and not anti else term.weight
            group = (anti, None if anti else term.level, theirs)
            found = like.get(group)
            if found is None:
                like[group] = [weight, placed.key, term, 0]
            else:
                found[0] += weight
                found[3] += 1
        for (anti, level, theirs), (weight, owner, first, others) in like.items():
            # The rule's text is built only if a note shows it (symmetry makes many).
            self.preferred.append(Preferred("", weight, theirs, level, anti, owner, first, others))
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
        for placed in self._occupancy.selected(constraint.selector):
            if not constraint.matches_pod(self._namespace, placed.namespace, placed.labels):
                continue
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


def _kind(term: PodTerm) -> str:
    strength = "required" if term.required else "preferred"
    return f"{strength} {term.kind}"


def _pods(pods: Sequence[PlacedPod], domains: Domains) -> str:
    shown = [f"{p.key} on {domains.describe(p.occupied)}" for p in pods[:6]]
    more = f" and {len(pods) - 6} more" if len(pods) > 6 else ""
    return "; ".join(shown) + more


def _anti_why(term: PodTerm, pods: Sequence[PlacedPod], domains: Domains) -> Callable[[], str]:
    selector = term.selector.describe() if term.selector is not None else "nothing"

    def why() -> str:
        taken = 0
        for p in pods:
            taken |= domains.expand(p.occupied)
        word = LEVEL_WORDS[domains.level]
        if all(m & taken for m in domains.masks):
            return f"every {word} already runs a pod matching {selector} ({_pods(pods, domains)})"
        return (
            f"{domains.describe(taken)} run a pod matching {selector} ({_pods(pods, domains)}), "
            f"and no other {word} has room"
        )

    return why


def _affinity_why(term: PodTerm, pods: Sequence[PlacedPod], domains: Domains) -> Callable[[], str]:
    selector = term.selector.describe() if term.selector is not None else "nothing"

    def why() -> str:
        if not pods:
            return (
                f"no running pod matches {selector} ({term.namespaces.describe()}), and the "
                "pod itself does not match it (so it is not the first of its kind)"
            )
        return (
            f"no place with room lies within one {LEVEL_WORDS[term.level]} running a pod "
            f"matching {selector} ({_pods(pods, domains)})"
        )

    return why


def _symmetric_why(selector: str, theirs: int, domains: Domains) -> Callable[[], str]:
    def why() -> str:
        return (
            f"it keeps pods matching {selector} out of {domains.describe(theirs)}, "
            f"and no other {LEVEL_WORDS[domains.level]} has room"
        )

    return why
