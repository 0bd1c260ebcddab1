"""The chooser: a request and a read-only view of the ledger in, a ranking of places out.

It changes nothing. For every pool it builds the candidate place (the pool for a
shared container, the CPUs it would pick for an exclusive one), filters by
capacity and by the required rules, scores what remains with the evaluated terms
(evaluation.py: terms by closeness and preferred terms at a level, all in weight
points) and sorts by one comparator (`rank`'s docstring; docs/placement.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from agent.policy.accounting import PoolState
from agent.policy.classes import EVERYWHERE, shared_class_short, word
from agent.policy.cpus import pick_exclusive
from agent.policy.evaluation import Evaluation
from agent.policy.explain import MAX_NOTED, Candidate
from agent.policy.ledger import Ledger
from agent.policy.pools import Pool
from agent.policy.request import ContainerRequest, CpuKind, Need
from agent.policy.rulings import SCORE_DIGITS, Required

Ranking = tuple[list[Candidate], list[tuple[Pool, str]], list[tuple[Pool, list[Required]]]]


class Chooser:
    def __init__(
        self,
        ledger: Ledger,
        close: tuple[tuple[float, ...], ...],
        numa: Mapping[int, tuple[int, Mapping[str, str]]],
    ) -> None:
        self.ledger = ledger  # read only
        self.machine = ledger.machine
        self.config = ledger.config
        self.tree = ledger.tree
        self.close = close  # pool x pool closeness (closeness.py)
        self.numa = numa  # NUMA node -> (its CPUs, its labels), for node affinity

    def rank(
        self,
        request: ContainerRequest,
        need: Need,
        confine: int | None = None,
        forced: int | None = None,
    ) -> Ranking:
        """Every pool with capacity that the pod rules allow, best first; the pools
        without capacity with the reason; the pools the rules rule out with the rules.

        The rank tuple is the comparator, rule by rule:
        1. higher score: the weighted pull and push of the container's affinities
           (cri-resource-manager's annotations, by hardware closeness), plus the
           weight of every preferred pod rule (numa-agent.io) the place satisfies;
        2. lower spread skew (ScheduleAnyway constraints, summed);
        3. deeper pool: threads and memory stay close when nothing says otherwise;
        4. shared: less loaded after placement (spreads shared work);
           exclusive: isolated CPUs when the container prefers them, then fewer newly
           split cores, then fewer free CPUs left over (best fit keeps large holes
           for large requests);
        5. lower pool id: deterministic.

        `forced` (place_in) keeps only that pool among the candidates. The winner and
        the runner-up carry a note per rule that scored them (explain.py).
        """
        rules = self.evaluation(request, need, confine)
        shared = self.ledger.shared_mask()
        ranked: list[Candidate] = []
        rejected: list[tuple[Pool, str]] = []
        ruled_out: list[tuple[Pool, list[Required]]] = []
        exclusive = need.kind is CpuKind.EXCLUSIVE
        for state in self.ledger.states:
            if exclusive:
                found = self.exclusive_candidate(state, need, rules)
            else:
                found = self.shared_candidate(state, need, shared, rules)
            if isinstance(found, str):
                rejected.append((state.pool, found))
            elif isinstance(found, list):
                ruled_out.append((state.pool, found))
            else:
                ranked.append(found)
        if rules is not None and rules.spread and ranked:
            skews = rules.skews([c.occupied for c in ranked])
            ranked = [
                replace(c, rank=(c.rank[0], skew, *c.rank[2:]), notes=c.notes + notes)
                for c, (skew, notes) in zip(ranked, skews, strict=True)
            ]
        ranked.sort(key=lambda c: c.rank)
        if forced is not None:  # place_in: only the pool named is a candidate
            ranked = [c for c in ranked if c.pool.index == forced]
        if rules is not None and rules.pulls is not None:
            # The parts by closeness, noted only where an explanation shows notes.
            pulls = rules.pulls
            ranked[:MAX_NOTED] = [
                replace(c, notes=pulls.notes(c.home) + c.notes) for c in ranked[:MAX_NOTED]
            ]
        return ranked, rejected, ruled_out

    def evaluation(
        self, request: ContainerRequest, need: Need, confine: int | None
    ) -> Evaluation | None:
        """Every rule that concerns this container, evaluated; None when none can."""
        config = self.config
        if (
            request.rules.is_empty
            and not request.terms
            and not self.ledger.occupancy.any_terms
            and confine is None
            and not (config.colocate_pods or config.colocate_namespaces)
        ):
            return None
        rules = Evaluation(
            request,
            self.ledger.topology,
            self.ledger.occupancy,
            config,
            self.numa,
            self.ledger.reserved,
            self.close,
            exclusive=need.kind is CpuKind.EXCLUSIVE,
            confine=confine,
        )
        return None if rules.empty else rules

    def shared_candidate(
        self,
        state: PoolState,
        need: Need,
        shared: int,
        rules: Evaluation | None,
    ) -> Candidate | str | list[Required]:
        pool = state.pool
        reason = self.memory_short(state, need) or state.short_of_milli(need.milli_cpu, shared)
        if reason is None and self.ledger.classes.required(need.cpu_class) != EVERYWHERE:
            reason = self.class_short(state, need, shared)
        if reason is not None:
            return reason
        occupied = pool.cpus.mask
        score = 0.0
        notes: tuple[object, ...] = ()
        if rules is not None:
            failing = rules.failing(occupied)
            if failing:
                return failing
            extra, notes = rules.score(occupied)
            score = round(rules.pull(pool.index) + extra, SCORE_DIGITS)
        load = state.load(need.milli_cpu, shared)
        rank = (-score, 0, -pool.depth, (round(load, SCORE_DIGITS),), pool.index)
        return Candidate(pool, score, rank, f"load {load:.0%}", 0, pool.index, notes, occupied)

    def exclusive_candidate(
        self, state: PoolState, need: Need, rules: Evaluation | None
    ) -> Candidate | str | list[Required]:
        pool = state.pool
        reason = self.exclusive_short(pool, need)
        if reason is not None:
            return reason
        if rules is None:
            found = self.pick(pool, need)
            if isinstance(found, str):
                return found
        else:
            within = self.pick_within_rules(pool, need, rules)
            if isinstance(within, list):
                # No pick the rules allow: for lack of room, or because of the rules?
                plain = self.pick(pool, need)
                return plain if isinstance(plain, str) else within
            found = within
        pick, isolated, split, left = found
        # The container lives where its CPUs are: a socket pool's pick may sit in
        # one node, and is scored (and its memory accounted) as that node.
        home = self.home(pool.index, pick)
        reason = self.memory_short(self.ledger.states[home], need)
        if reason is not None:
            return reason
        score = 0.0
        notes: tuple[object, ...] = ()
        if rules is not None:
            extra, notes = rules.score(pick)
            score = round(rules.pull(home) + extra, SCORE_DIGITS)
        # Preferring isolated CPUs and not getting them here ranks after every
        # pool where it would get them.
        missed = int(need.isolated and not isolated)
        # Off the preferred kind of core (hybrid, performance by default): after every
        # pool where it stays on them.
        off_class = self.ledger.classes.missed(need.cpu_class, pick)
        rank = (-score, 0, -pool.depth, (off_class, missed, split, left), pool.index)
        kind = "isolated, " if isolated else ""
        kind += "off its preferred kind of core, " if off_class else ""
        where = "" if home == pool.index else f"in {self.ledger.pools[home].name}, "
        detail = f"{where}{kind}splits {split} cores, leaves {left} free"
        return Candidate(pool, score, rank, detail, pick, home, notes, pick)

    def pick_within_rules(
        self, pool: Pool, need: Need, rules: Evaluation
    ) -> tuple[int, bool, int, int] | list[Required]:
        """The pick of `_pick` restricted to the CPUs the required rules allow, and,
        when one wants the place within one domain of a level, within one such
        domain (each domain of the pool tried, the best kept); or the rules that
        leave no pick."""
        allowed = rules.allowed() & pool.cpus.mask
        level = rules.finest_single()
        regions = [allowed]
        if level is not None:
            domains = self.ledger.topology[level]
            if domains.single(pool.cpus.mask) is None:
                regions = [domains.masks[i] & allowed for i in domains.indices(allowed)]
        # Preferences finer than the pool (core, l3) rank the CPUs picked inside it.
        finer = [part for region in regions for part in rules.finer_regions(region)]
        best: tuple[int, bool, int, int] | None = None
        best_rank: tuple[float, int, int] | None = None
        for region in regions + finer:
            found = self.pick(pool, need, region)
            if isinstance(found, str) or rules.failing(found[0]):
                continue
            score = rules.score(found[0])[0] if finer else 0.0
            rank = (-score, found[2], found[3])
            if best_rank is None or rank < best_rank:
                best, best_rank = found, rank
        if best is None:
            return rules.failing(pool.cpus.mask) or list(rules.required)
        return best

    def home(self, pool: int, cpus: int) -> int:
        """The deepest pool under `pool` holding all of `cpus`."""
        while True:
            for child in self.tree.children[pool]:
                if not cpus & ~self.ledger.pools[child].cpus.mask:
                    pool = child
                    break
            else:
                return pool

    def memory_short(self, state: PoolState, need: Need) -> str | None:
        if not need.memory_bytes or not self.ledger.memory_known:
            return None
        return state.short_of_memory(need.memory_bytes)

    def exclusive_free(self, need: Need) -> tuple[int, int]:
        """(ordinary, isolated) CPUs free for an exclusive container, as masks."""
        free = self.ledger.online & ~(self.ledger.taken | self.ledger.reserved)
        isolated = free & self.ledger.isolated if need.isolated else 0
        return free & ~self.ledger.isolated, isolated

    def exclusive_short(self, pool: Pool, need: Need) -> str | None:
        ordinary, isolated = self.exclusive_free(need)
        mask = pool.cpus.mask & self.ledger.classes.required(need.cpu_class)
        count = (mask & ordinary).bit_count()
        if count >= need.exclusive_cpus or (mask & isolated).bit_count() >= need.exclusive_cpus:
            return None
        return f"{count} free exclusive{word(need.cpu_class)} CPUs"

    def pick(self, pool: Pool, need: Need, within: int = -1) -> tuple[int, bool, int, int] | str:
        """Exclusive CPUs in the pool (and `within`) and what taking them costs, or why
        it is not allowed."""
        ordinary, isolated = self.exclusive_free(need)
        mask = pool.cpus.mask & within
        mask &= self.ledger.classes.for_pick(need.cpu_class, need.exclusive_cpus, mask & ordinary)
        # Isolated CPUs when the container wants them and the pool has enough;
        # never a mix, which would put part of it under the scheduler and part not.
        use_isolated = (mask & isolated).bit_count() >= need.exclusive_cpus
        free = isolated if use_isolated else ordinary
        pick = pick_exclusive(pool.layout, free & mask, need.exclusive_cpus, self.distance)
        if pick is None:
            return f"{(free & mask).bit_count()} free exclusive{word(need.cpu_class)} CPUs"
        reason = self.starves_shared(pick.mask)
        if reason is not None:
            return reason
        left = (mask & free).bit_count() - need.exclusive_cpus
        return pick.mask, use_isolated, pick.split_cores, left

    def starves_shared(self, taking: int) -> str | None:
        """Why taking `taking` exclusively would leave shared containers without room."""
        shared = self.ledger.online & ~(
            self.ledger.taken | taking | self.ledger.reserved | self.ledger.isolated
        )
        if shared == 0:
            return "would take the machine's last shared CPU (one always stays shared)"
        # Shared containers that asked a kind of core keep one of its CPUs (hybrid only).
        classes = self.ledger.classes
        for key, record in self.ledger.records.items() if classes.hybrid else ():
            needs_class = classes.required(record.need.cpu_class)
            if record.pool is None or record.exclusive or needs_class == EVERYWHERE:
                continue
            if key in self.ledger.held:
                continue  # exited: nothing runs there
            if record.pool.cpus.mask & taking and not record.pool.cpus.mask & shared & needs_class:
                return (
                    f"would leave {record.key} (shared, {record.need.cpu_class} cores) "
                    f"no shared {record.need.cpu_class} CPU in {record.pool.name}"
                )
        for state in self.ledger.states:
            if not state.pool.cpus.mask & taking:
                continue
            left = state.usable(shared)
            if state.shared_milli > left * 1000 or (state.members and left == 0):
                return (
                    f"would leave {state.pool.name} {left} shared CPUs for "
                    f"{state.shared_milli}m of shared containers"
                )
        return None

    def class_short(self, state: PoolState, need: Need, shared: int) -> str | None:
        """Why a shared container asking for a kind of core has no room for it here."""
        wanted = self.ledger.classes.required(need.cpu_class)
        used: dict[int, int] = {}
        for record in self.ledger.records.values():
            if record.pool is None or record.exclusive or record.need.cpu_class != need.cpu_class:
                continue
            for index in (record.pool.index, *record.pool.ancestors):
                used[index] = used.get(index, 0) + record.need.milli_cpu
        lineage = [
            (q.pool.index, (q.pool.cpus.mask & shared & wanted).bit_count()) for q in state.lineage
        ]
        return shared_class_short(lineage, used, need.milli_cpu, str(need.cpu_class))

    def distance(self, a: int, b: int) -> float:
        return (self.machine.distance(a, b) + self.machine.distance(b, a)) / 2
