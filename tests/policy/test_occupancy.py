"""The occupancy index: what it finds through its indexes is exactly what looking at
every placed container finds (agent/policy/occupancy.py)."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from agent.affinity import ANNOTATION_AFFINITY, Expression, crm_term
from agent.affinity.keys import compile_key
from agent.policy.occupancy import Occupancy, attributes
from agent.rules import (
    NO_RULES,
    LabelSelector,
    Level,
    NamespaceScope,
    PodRules,
    TermKind,
    pod_term,
    selectable_labels,
)
from agent.rules.selector import Requirement
from agent.terms.operator import Operator
from agent.terms.term import INDEXED_ATTRIBUTES, POD_LABELS, Term
from agent.workload import ContainerInfo, PodInfo, QoSClass

APPS = st.sampled_from(["db", "web", "cache"])
NAMES = st.sampled_from(["main", "side", "db"])


def pod_info(pod: int) -> PodInfo:
    """Pod `pod`: the same labels and namespace for all its containers."""
    labels = {"app": ("db", "web", "cache")[pod % 3]} if pod < 5 else {}
    labels["io.kubernetes.pod.name"] = f"p{pod}"
    namespace = ("shop", "batch")[pod % 2]
    return PodInfo(f"uid-{pod}", f"p{pod}", namespace, QoSClass.BURSTABLE, f"s{pod}", labels)


@st.composite
def containers(draw: st.DrawFn, number: int) -> ContainerInfo:
    info = pod_info(draw(st.integers(0, 6)))
    name = draw(NAMES)
    return ContainerInfo(
        name,
        info,
        id=f"c{number}" if draw(st.booleans()) else "",
        labels={"io.kubernetes.container.name": name},
    )


@st.composite
def pod_terms(draw: st.DrawFn) -> Term:
    kind = draw(st.sampled_from(list(TermKind)))
    op = draw(st.sampled_from([Operator.IN, Operator.NOT_IN, Operator.EXISTS]))
    values = frozenset({draw(APPS)}) if op is not Operator.EXISTS else frozenset()
    pairs = (("app", draw(APPS)),) if draw(st.booleans()) else ()
    selector = LabelSelector(pairs, (Requirement("app", op, values),))
    scope = draw(
        st.sampled_from(
            [
                NamespaceScope(),
                NamespaceScope(all_namespaces=True),
                NamespaceScope(frozenset({"batch"})),
            ]
        )
    )
    return pod_term(kind, draw(st.booleans()), 10, selector, scope, Level.NUMA, "t")


@st.composite
def container_terms(draw: st.DrawFn) -> Term:
    key = draw(st.sampled_from(["name", "pod/labels/app", "namespace", "labels/x"]))
    op = draw(st.sampled_from([Operator.EQUALS, Operator.IN, Operator.EXISTS, Operator.NOT_EQUAL]))
    value = draw(st.sampled_from(["db", "main", "shop", "web"]))
    values = () if op is Operator.EXISTS else (value,)
    scope = draw(
        st.sampled_from(
            [
                None,
                Expression("", Operator.ALWAYS_TRUE),
                Expression("namespace", Operator.EQUALS, ("shop",)),
                Expression("pod/name", Operator.MATCHES, ("p1*",)),
            ]
        )
    )
    return crm_term(
        ANNOTATION_AFFINITY, Expression(key, op, values), scope, draw(st.integers(-5, 5))
    )


@st.composite
def worlds(draw: st.DrawFn) -> list[tuple[ContainerInfo, tuple[Term, ...], tuple[Term, ...]]]:
    out = []
    for number in range(draw(st.integers(0, 12))):
        info = draw(containers(number))
        kube = tuple(draw(st.lists(pod_terms(), max_size=2)))
        crm = tuple(draw(st.lists(container_terms(), max_size=2)))
        out.append((info, kube, crm))
    return out


def build(world: list[tuple[ContainerInfo, tuple[Term, ...], tuple[Term, ...]]]) -> Occupancy:
    occupancy = Occupancy(symmetric=True)
    for number, (info, kube, crm) in enumerate(world):
        rules = PodRules(kube) if kube else NO_RULES
        occupancy.add(f"k{number}", info, rules, crm, number % 3, 1 << number)
    return occupancy


@settings(max_examples=150)
@given(world=worlds(), owner=containers(99), term=st.one_of(pod_terms(), container_terms()))
def test_the_index_finds_what_a_scan_finds(
    world: list[tuple[ContainerInfo, tuple[Term, ...], tuple[Term, ...]]],
    owner: ContainerInfo,
    term: Term,
) -> None:
    occupancy = build(world)
    found = [c.key for c in occupancy.selected(term.selector, owner)]
    scanned = [
        c.key
        for c in sorted(occupancy.containers(), key=lambda c: c.key)
        if term.selector.selects(owner, c.info, selectable_labels(c.info.pod.labels))
    ]
    assert sorted(found) == scanned and len(set(found)) == len(found)
    pods = [p.uid for p in occupancy.selected_pods(term.selector, owner)]
    by_key = {c.key: c for c in occupancy.containers()}
    assert sorted(pods) == sorted({by_key[key].info.pod.uid for key in found})
    assert len(set(pods)) == len(pods)


@settings(max_examples=150)
@given(world=worlds(), newcomer=containers(99))
def test_the_terms_about_a_newcomer_are_those_that_select_it(
    world: list[tuple[ContainerInfo, tuple[Term, ...], tuple[Term, ...]]],
    newcomer: ContainerInfo,
) -> None:
    occupancy = build(world)
    labels = selectable_labels(newcomer.pod.labels)
    about = {
        (h.pod.uid, h.container.key if h.container else "", h.term)
        for h in occupancy.terms_about(newcomer, labels)
    }
    expected = set()
    for pod in occupancy.pods():
        for term in pod.rules.pod_terms:
            if term.selector.selects(pod.owner, newcomer, labels):
                expected.add((pod.uid, "", term))
    for container in occupancy.containers():
        for term in container.terms:
            if term.selector.selects(container.info, newcomer, labels):
                expected.add((container.info.pod.uid, container.key, term))
    assert about == expected


@settings(max_examples=100)
@given(world=worlds(), gone=st.lists(st.integers(0, 11), max_size=6), renamed=st.integers(0, 11))
def test_removing_and_renaming_leave_the_index_a_rebuild_would_make(
    world: list[tuple[ContainerInfo, tuple[Term, ...], tuple[Term, ...]]],
    gone: list[int],
    renamed: int,
) -> None:
    occupancy = build(world)
    kept = dict(enumerate(world))
    for number in gone:
        occupancy.remove(f"k{number}")
        kept.pop(number, None)
    if renamed in kept:
        info = kept[renamed][0]
        occupancy.rekey(f"k{renamed}", f"r{renamed}", replace(info, id=f"new{renamed}"))
    rebuilt = Occupancy(symmetric=True)
    for container in sorted(occupancy.containers(), key=lambda c: c.key):
        pod = occupancy.pod(container.info.pod.uid)
        assert pod is not None
        rebuilt.add(
            container.key,
            container.info,
            pod.rules,
            container.terms,
            container.home,
            container.occupied,
        )
    assert rebuilt.shape() == occupancy.shape()


@given(info=containers(1))
def test_a_container_is_indexed_by_what_the_keys_read(info: ContainerInfo) -> None:
    """The index reads the attributes directly; cri-resource-manager's key accessors
    must read the same values."""
    pairs = dict(attributes(info))
    for name in INDEXED_ATTRIBUTES:
        assert pairs.get(name) == compile_key(name)(info)
    for label, value in info.pod.labels.items():
        assert pairs[POD_LABELS + label] == compile_key(POD_LABELS + label)(info) == value
