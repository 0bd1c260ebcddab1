"""parse_pod_rules: a table of annotations and the rules they compile to, and a
table of bad ones with the exact path and reason of each refusal."""

from __future__ import annotations

import json
import textwrap

import pytest

from agent.rules import (
    ANNOTATION_AFFINITY,
    ANNOTATION_SPREAD,
    EVERYTHING,
    NO_RULES,
    OWN_NAMESPACE,
    LabelSelector,
    Level,
    NamespaceScope,
    NodeAffinity,
    NodeSelectorTerm,
    Operator,
    PodRules,
    PreferredNodeTerm,
    Requirement,
    RuleError,
    SpreadConstraint,
    Term,
    TermKind,
    WhenUnsatisfiable,
    parse_pod_rules,
    pod_term,
)

AFF = ANNOTATION_AFFINITY
SPREAD = ANNOTATION_SPREAD
REQ = "requiredDuringSchedulingIgnoredDuringExecution"
PREF = "preferredDuringSchedulingIgnoredDuringExecution"
ALL = NamespaceScope(all_namespaces=True)


def yaml(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def labels(**pairs: str) -> LabelSelector:
    return LabelSelector(tuple(pairs.items()))


def expr(key: str, op: Operator, *values: str) -> Requirement:
    bound = int(values[0]) if op in (Operator.GT, Operator.LT) else None
    return Requirement(key, op, frozenset(values), bound)


def anti(path: str, selector: LabelSelector | None, level: Level, **kw: object) -> Term:
    return pod_term(
        kind=TermKind.ANTI_AFFINITY,
        required=bool(kw.get("required", True)),
        weight=int(kw.get("weight", 0)),  # type: ignore[call-overload]
        selector=selector,
        namespaces=kw.get("namespaces", OWN_NAMESPACE),  # type: ignore[arg-type]
        level=level,
        path=path,
    )


def affinity(path: str, selector: LabelSelector | None, level: Level, **kw: object) -> Term:
    return pod_term(
        kind=TermKind.AFFINITY,
        required=bool(kw.get("required", True)),
        weight=int(kw.get("weight", 0)),  # type: ignore[call-overload]
        selector=selector,
        namespaces=kw.get("namespaces", OWN_NAMESPACE),  # type: ignore[arg-type]
        level=level,
        path=path,
    )


ISSUE_14 = yaml(
    """
    podAntiAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
      - labelSelector: {matchLabels: {app: db}}
        topologyKey: numa-agent.io/socket
    podAffinity:
      preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 50
        podAffinityTerm:
          labelSelector:
            matchExpressions: [{key: app, operator: In, values: [cache]}]
          topologyKey: numa-agent.io/numa
          namespaces: [shop]
    """
)
ISSUE_14_RULES = PodRules(
    pod_terms=(
        affinity(
            f"podAffinity.{PREF}[0].podAffinityTerm",
            LabelSelector((), (expr("app", Operator.IN, "cache"),)),
            Level.NUMA,
            required=False,
            weight=50,
            namespaces=NamespaceScope(frozenset({"shop"})),
        ),
        anti(f"podAntiAffinity.{REQ}[0]", labels(app="db"), Level.SOCKET),
    )
)
ISSUE_15 = yaml(
    """
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms:
        - matchExpressions:
          - {key: numa-agent.io/net.eth1, operator: Exists}
        - matchExpressions:
          - {key: example.com/storage, operator: In, values: [nvme]}
      preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 20
        preference:
          matchExpressions: [{key: numa-agent.io/memory-mib, operator: Gt, values: ["65536"]}]
    """
)
TERMS = f"nodeAffinity.{REQ}.nodeSelectorTerms"
ISSUE_15_RULES = PodRules(
    node_affinity=NodeAffinity(
        required=(
            NodeSelectorTerm((expr("numa-agent.io/net.eth1", Operator.EXISTS),), f"{TERMS}[0]"),
            NodeSelectorTerm((expr("example.com/storage", Operator.IN, "nvme"),), f"{TERMS}[1]"),
        ),
        preferred=(
            PreferredNodeTerm(
                20,
                NodeSelectorTerm(
                    (expr("numa-agent.io/memory-mib", Operator.GT, "65536"),),
                    f"nodeAffinity.{PREF}[0].preference",
                ),
                f"nodeAffinity.{PREF}[0]",
            ),
        ),
    )
)
ISSUE_16 = yaml(
    """
    - maxSkew: 1
      topologyKey: numa-agent.io/numa
      whenUnsatisfiable: DoNotSchedule
      labelSelector: {matchLabels: {app: web}}
    """
)
WEB_SPREAD = SpreadConstraint(
    1, Level.NUMA, WhenUnsatisfiable.DO_NOT_SCHEDULE, labels(app="web"), None, "[0]"
)


def as_json(text: str, *, indent: str | None = None) -> str:
    import yaml as pyyaml

    return json.dumps(pyyaml.safe_load(text), indent=indent)


VALID: list[tuple[str, dict[str, str], PodRules]] = [
    ("issue 14 example", {AFF: ISSUE_14}, ISSUE_14_RULES),
    ("issue 14 as JSON", {AFF: as_json(ISSUE_14)}, ISSUE_14_RULES),
    ("JSON indented with tabs (not YAML)", {AFF: as_json(ISSUE_14, indent="\t")}, ISSUE_14_RULES),
    ("issue 15 example", {AFF: ISSUE_15}, ISSUE_15_RULES),
    ("issue 16 example", {SPREAD: ISSUE_16}, PodRules(spread=(WEB_SPREAD,))),
    ("issue 16 as JSON", {SPREAD: as_json(ISSUE_16)}, PodRules(spread=(WEB_SPREAD,))),
    (
        "both annotations",
        {AFF: ISSUE_14 + ISSUE_15, SPREAD: ISSUE_16},
        PodRules(ISSUE_14_RULES.pod_terms, ISSUE_15_RULES.node_affinity, (WEB_SPREAD,)),
    ),
    ("no annotations", {}, NO_RULES),
    ("empty", {AFF: "", SPREAD: ""}, NO_RULES),
    ("comments only", {AFF: "# nothing yet\n", SPREAD: "  \n"}, NO_RULES),
    ("null", {AFF: "null", SPREAD: "~"}, NO_RULES),
    ("empty mapping and list", {AFF: "{}", SPREAD: "[]"}, NO_RULES),
    ("empty parts", {AFF: "podAffinity: {}\nnodeAffinity: {}\npodAntiAffinity:\n"}, NO_RULES),
    ("empty term lists", {AFF: f"podAffinity: {{{REQ}: [], {PREF}: []}}"}, NO_RULES),
    ("YAML flow that looks like JSON", {AFF: "{podAffinity: {}}"}, NO_RULES),
    (
        "required during execution counts as required",
        {
            AFF: yaml(
                """
                podAntiAffinity:
                  requiredDuringSchedulingRequiredDuringExecution:
                  - {labelSelector: {matchLabels: {app: db}}, topologyKey: numa-agent.io/die}
                """
            )
        },
        PodRules(
            (
                anti(
                    "podAntiAffinity.requiredDuringSchedulingRequiredDuringExecution[0]",
                    labels(app="db"),
                    Level.DIE,
                ),
            )
        ),
    ),
    (
        "every pod of every namespace, at each level",
        {
            AFF: yaml(
                """
                podAntiAffinity:
                  requiredDuringSchedulingIgnoredDuringExecution:
                  - {labelSelector: {}, namespaceSelector: {}, topologyKey: numa-agent.io/core}
                  - {labelSelector: {}, namespaceSelector: {}, topologyKey: numa-agent.io/l3}
                  - {labelSelector: {}, namespaceSelector: {}, topologyKey: kubernetes.io/hostname}
                """
            )
        },
        PodRules(
            (
                anti(f"podAntiAffinity.{REQ}[0]", EVERYTHING, Level.CORE, namespaces=ALL),
                anti(f"podAntiAffinity.{REQ}[1]", EVERYTHING, Level.L3, namespaces=ALL),
                anti(f"podAntiAffinity.{REQ}[2]", EVERYTHING, Level.HOST, namespaces=ALL),
            )
        ),
    ),
    (
        "namespaces with an empty namespaceSelector: all namespaces",
        {
            AFF: "podAffinity: {"
            + REQ
            + ": [{labelSelector: {matchLabels: {app: x}}, namespaces: [a, b], "
            "namespaceSelector: {matchLabels: {}, matchExpressions: []}, "
            "topologyKey: numa-agent.io/numa}]}"
        },
        PodRules(
            (
                affinity(
                    f"podAffinity.{REQ}[0]",
                    labels(app="x"),
                    Level.NUMA,
                    namespaces=NamespaceScope(frozenset({"a", "b"}), all_namespaces=True),
                ),
            )
        ),
    ),
    (
        "no labelSelector, empty namespaces: no pod, own namespace",
        {AFF: f"podAffinity: {{{REQ}: [{{topologyKey: numa-agent.io/numa, namespaces: []}}]}}"},
        PodRules((affinity(f"podAffinity.{REQ}[0]", None, Level.NUMA),)),
    ),
    (
        "every label operator; values null, empty or left out for Exists",
        {
            AFF: yaml(
                """
                podAntiAffinity:
                  preferredDuringSchedulingIgnoredDuringExecution:
                  - weight: 1
                    podAffinityTerm:
                      topologyKey: numa-agent.io/core
                      labelSelector:
                        matchLabels: {app.kubernetes.io/name: "", tier: !!str 1}
                        matchExpressions:
                        - {key: a, operator: In, values: [x, y, x]}
                        - {key: example.com/b, operator: NotIn, values: ["on"]}
                        - {key: c, operator: Exists, values: []}
                        - {key: d, operator: DoesNotExist, values: null}
                        - {key: e, operator: Exists}
                  - weight: 100
                    podAffinityTerm: {topologyKey: numa-agent.io/core}
                """
            )
        },
        PodRules(
            (
                anti(
                    f"podAntiAffinity.{PREF}[0].podAffinityTerm",
                    LabelSelector(
                        (("app.kubernetes.io/name", ""), ("tier", "1")),
                        (
                            expr("a", Operator.IN, "x", "y"),
                            expr("example.com/b", Operator.NOT_IN, "on"),
                            expr("c", Operator.EXISTS),
                            expr("d", Operator.NOT_EXISTS),
                            expr("e", Operator.EXISTS),
                        ),
                    ),
                    Level.CORE,
                    required=False,
                    weight=1,
                ),
                anti(
                    f"podAntiAffinity.{PREF}[1].podAffinityTerm",
                    None,
                    Level.CORE,
                    required=False,
                    weight=100,
                ),
            )
        ),
    ),
    (
        "every node operator, Gt/Lt with signs",
        {
            AFF: yaml(
                """
                nodeAffinity:
                  requiredDuringSchedulingIgnoredDuringExecution:
                    nodeSelectorTerms:
                    - matchExpressions:
                      - {key: numa-agent.io/memory-mib, operator: Gt, values: ["+1024"]}
                      - {key: numa-agent.io/cpus, operator: Lt, values: ["-1"]}
                      - {key: x, operator: NotIn, values: [a]}
                      - {key: y, operator: DoesNotExist}
                """
            )
        },
        PodRules(
            node_affinity=NodeAffinity(
                (
                    NodeSelectorTerm(
                        (
                            Requirement(
                                "numa-agent.io/memory-mib",
                                Operator.GT,
                                frozenset({"+1024"}),
                                1024,
                            ),
                            expr("numa-agent.io/cpus", Operator.LT, "-1"),
                            expr("x", Operator.NOT_IN, "a"),
                            expr("y", Operator.NOT_EXISTS),
                        ),
                        f"{TERMS}[0]",
                    ),
                )
            )
        ),
    ),
    (
        "spread: ScheduleAnyway, minDomains with DoNotSchedule, default whenUnsatisfiable",
        {
            SPREAD: yaml(
                """
                - {maxSkew: 2, topologyKey: numa-agent.io/socket, whenUnsatisfiable: ScheduleAnyway,
                   labelSelector: {matchExpressions: [{key: app, operator: Exists}]}}
                - {maxSkew: 1, topologyKey: numa-agent.io/socket, minDomains: 2,
                   labelSelector: {}}
                - {maxSkew: 2147483647, topologyKey: numa-agent.io/numa, minDomains: null,
                   labelSelector: {matchLabels: {app: web}}, whenUnsatisfiable: null}
                """
            )
        },
        PodRules(
            spread=(
                SpreadConstraint(
                    2,
                    Level.SOCKET,
                    WhenUnsatisfiable.SCHEDULE_ANYWAY,
                    LabelSelector((), (expr("app", Operator.EXISTS),)),
                    None,
                    "[0]",
                ),
                SpreadConstraint(
                    1, Level.SOCKET, WhenUnsatisfiable.DO_NOT_SCHEDULE, EVERYTHING, 2, "[1]"
                ),
                SpreadConstraint(
                    2147483647,
                    Level.NUMA,
                    WhenUnsatisfiable.DO_NOT_SCHEDULE,
                    labels(app="web"),
                    None,
                    "[2]",
                ),
            )
        ),
    ),
]


@pytest.mark.parametrize(
    ("annotations", "expected"), [c[1:] for c in VALID], ids=[c[0] for c in VALID]
)
def test_valid_annotations_compile(annotations: dict[str, str], expected: PodRules) -> None:
    assert parse_pod_rules({"other": "x", **annotations}) == expected


def term_yaml(fields: str, where: str = f"podAffinity: {{{REQ}: [{{%s}}]}}") -> str:
    """A one-term podAffinity annotation whose term has `fields` (flow YAML)."""
    return where % fields


T0 = f"podAffinity.{REQ}[0]"
E0 = f"{T0}.labelSelector.matchExpressions[0]"


def expr_yaml(expression: str) -> str:
    """A one-term podAffinity annotation whose selector has this one expression."""
    return term_yaml(f"{OK_TERM}, labelSelector: {{matchExpressions: [{expression}]}}")


LEVELS = (
    "numa-agent.io/core, numa-agent.io/l3, numa-agent.io/numa, numa-agent.io/die, "
    "numa-agent.io/socket, kubernetes.io/hostname"
)
OK_TERM = "topologyKey: numa-agent.io/numa"
LABEL_OPS = "In, NotIn, Exists, DoesNotExist"
NODE_TERM = "nodeAffinity: {" + REQ + ": {nodeSelectorTerms: [%s]}}"
N0 = f"{TERMS}[0]"
SPREAD_OK = "maxSkew: 1, topologyKey: numa-agent.io/numa, labelSelector: {}"

INVALID: list[tuple[str, str, str, str, str]] = [
    # (id, annotation, text, path, reason)
    ("not a mapping", AFF, "[1]", "", "must be a mapping (Affinity), not a list"),
    (
        "a bare string",
        AFF,
        "podAffinity",
        "",
        'must be a mapping (Affinity), not the string "podAffinity"',
    ),
    (
        "unknown top field",
        AFF,
        "podAfinity: {}",
        "podAfinity",
        "is not a field of Affinity (did you mean podAffinity?); its fields are nodeAffinity, "
        "podAffinity, podAntiAffinity",
    ),
    (
        "unknown field in a term",
        AFF,
        term_yaml("topologyKy: numa-agent.io/numa"),
        f"{T0}.topologyKy",
        "is not a field of PodAffinityTerm (did you mean topologyKey?); its fields are "
        "labelSelector, namespaces, topologyKey, namespaceSelector, matchLabelKeys, "
        "mismatchLabelKeys",
    ),
    (
        "unknown field in an expression",
        AFF,
        expr_yaml("{key: a, operator: Exists, value: x}"),
        f"{E0}.value",
        "is not a field of LabelSelectorRequirement (did you mean values?); its fields are key, "
        "operator, values",
    ),
    (
        "missing topologyKey",
        AFF,
        term_yaml("labelSelector: {}"),
        f"{T0}.topologyKey",
        "is required",
    ),
    (
        "missing operator",
        AFF,
        expr_yaml("{key: a}"),
        f"{E0}.operator",
        "is required",
    ),
    (
        "a mapping where a list of terms goes",
        AFF,
        f"podAffinity: {{{REQ}: {{labelSelector: {{}}}}}}",
        f"podAffinity.{REQ}",
        "must be a list of PodAffinityTerm, not a mapping",
    ),
    (
        "a list where a selector goes",
        AFF,
        term_yaml(f"{OK_TERM}, labelSelector: []"),
        f"{T0}.labelSelector",
        "must be a mapping (LabelSelector), not a list",
    ),
    (
        "an int topology key",
        AFF,
        term_yaml("topologyKey: 1"),
        f"{T0}.topologyKey",
        'must be a string, not 1, a YAML int; quote it: "1"',
    ),
    (
        "a YAML bool as a value",
        AFF,
        expr_yaml("{key: a, operator: In, values: [yes]}"),
        f"{E0}.values[0]",
        'must be a string, not yes, a YAML bool; quote it: "yes"',
    ),
    (
        "a JSON number as a value",
        AFF,
        json.dumps(
            {
                "podAffinity": {
                    REQ: [
                        {
                            "topologyKey": "numa-agent.io/numa",
                            "labelSelector": {
                                "matchExpressions": [{"key": "a", "operator": "In", "values": [1]}]
                            },
                        }
                    ]
                }
            }
        ),
        f"{E0}.values[0]",
        'must be a string, not the number 1; quote it: "1"',
    ),
    (
        "a YAML int as a matchLabels value",
        AFF,
        term_yaml(f"{OK_TERM}, labelSelector: {{matchLabels: {{app.kubernetes.io/part: 0x10}}}}"),
        f"{T0}.labelSelector.matchLabels[app.kubernetes.io/part]",
        'must be a string, not 0x10, a YAML int; quote it: "0x10"',
    ),
    (
        "a list as a matchLabels value",
        AFF,
        term_yaml(f"{OK_TERM}, labelSelector: {{matchLabels: {{app: [a]}}}}"),
        f"{T0}.labelSelector.matchLabels[app]",
        "must be a string, not a list",
    ),
    (
        "a YAML int as a matchLabels key",
        AFF,
        term_yaml(f"{OK_TERM}, labelSelector: {{matchLabels: {{1: a}}}}"),
        f"{T0}.labelSelector.matchLabels",
        'has the key 1, a YAML int, not a string; quote it: "1"',
    ),
    (
        "unknown topology key",
        AFF,
        term_yaml("topologyKey: numa-agent.io/sockt"),
        f"{T0}.topologyKey",
        f'"numa-agent.io/sockt" is not a level; use one of {LEVELS}',
    ),
    (
        "a cluster topology key",
        AFF,
        term_yaml("topologyKey: topology.kubernetes.io/zone"),
        f"{T0}.topologyKey",
        '"topology.kubernetes.io/zone" is not a level (a cluster topology key; inside the node '
        f"the levels are the machine's parts); use one of {LEVELS}",
    ),
    (
        "empty topology key",
        AFF,
        term_yaml("topologyKey: ''"),
        f"{T0}.topologyKey",
        f"is empty; it is one of {LEVELS}",
    ),
    (
        "unknown operator",
        AFF,
        expr_yaml("{key: a, operator: Equals, values: [x]}"),
        f"{E0}.operator",
        f'"Equals" is not one of {LABEL_OPS}',
    ),
    (
        "operator in the wrong case",
        AFF,
        expr_yaml("{key: a, operator: notin, values: [x]}"),
        f"{E0}.operator",
        f'"notin" is not one of {LABEL_OPS} (did you mean NotIn?)',
    ),
    (
        "Gt in a pod selector",
        AFF,
        expr_yaml("{key: a, operator: Gt, values: ['1']}"),
        f"{E0}.operator",
        f'"Gt" is not one of {LABEL_OPS} '
        "(Gt and Lt compare NUMA-node labels, in nodeAffinity only)",
    ),
    (
        "values given to Exists",
        AFF,
        expr_yaml("{key: a, operator: Exists, values: [x]}"),
        f"{E0}.values",
        "must be empty or left out for operator Exists",
    ),
    (
        "no values for In",
        AFF,
        expr_yaml("{key: a, operator: In}"),
        f"{E0}.values",
        "must list at least one value for operator In",
    ),
    (
        "a bad label key",
        AFF,
        expr_yaml("{key: 'Example.com/a', operator: Exists}"),
        f"{E0}.key",
        '"Example.com/a" is not a valid label key: the prefix must be a lowercase DNS subdomain '
        "(such as example.com)",
    ),
    (
        "a bad label value",
        AFF,
        expr_yaml("{key: a, operator: In, values: [ok, 'no way']}"),
        f"{E0}.values[1]",
        "\"no way\" is not a valid label value: must be empty or consist of letters, digits, '-', "
        "'_' or '.', and start and end with a letter or digit",
    ),
    (
        "a bad matchLabels key",
        AFF,
        term_yaml(f"{OK_TERM}, labelSelector: {{matchLabels: {{'a/': b}}}}"),
        f"{T0}.labelSelector.matchLabels[a/]",
        '"a/" is not a valid label key: the name part must not be empty',
    ),
    (
        "a too long matchLabels value",
        AFF,
        term_yaml(f"{OK_TERM}, labelSelector: {{matchLabels: {{a: {'x' * 64}}}}}"),
        f"{T0}.labelSelector.matchLabels[a]",
        f'"{"x" * 64}" is not a valid label value: must be at most 63 characters (has 64)',
    ),
    (
        "a bad namespace",
        AFF,
        term_yaml(f"{OK_TERM}, namespaces: [shop, Web]"),
        f"{T0}.namespaces[1]",
        "\"Web\" is not a namespace name: must consist of lowercase letters, digits or '-', and "
        "start and end with one",
    ),
    (
        "a non-empty namespaceSelector",
        AFF,
        term_yaml(f"{OK_TERM}, namespaceSelector: {{matchLabels: {{team: a}}}}"),
        f"{T0}.namespaceSelector",
        "must be empty ({}, every namespace) or left out: the node does not know namespaces' "
        "labels; list the namespaces in namespaces instead",
    ),
    (
        "matchLabelKeys on a pod term",
        AFF,
        term_yaml(f"{OK_TERM}, matchLabelKeys: [pod-template-hash]"),
        f"{T0}.matchLabelKeys",
        "is not supported: it copies label values of the pod being placed into the selector; "
        "write those labels into labelSelector",
    ),
    (
        "mismatchLabelKeys on a pod term, even empty",
        AFF,
        term_yaml(f"{OK_TERM}, mismatchLabelKeys: []"),
        f"{T0}.mismatchLabelKeys",
        "is not supported: it copies label values of the pod being placed into the selector; "
        "write those labels into labelSelector (with NotIn)",
    ),
    (
        "weight 0",
        AFF,
        f"podAntiAffinity: {{{PREF}: [{{weight: 0, podAffinityTerm: {{{OK_TERM}}}}}]}}",
        f"podAntiAffinity.{PREF}[0].weight",
        "0 is out of range: a weight is 1-100",
    ),
    (
        "weight 101",
        AFF,
        f"podAffinity: {{{PREF}: [{{weight: 101, podAffinityTerm: {{{OK_TERM}}}}}]}}",
        f"podAffinity.{PREF}[0].weight",
        "101 is out of range: a weight is 1-100",
    ),
    (
        "weight as a string",
        AFF,
        f"podAffinity: {{{PREF}: [{{weight: '5', podAffinityTerm: {{{OK_TERM}}}}}]}}",
        f"podAffinity.{PREF}[0].weight",
        'must be an integer, not the string "5"',
    ),
    (
        "weight as a float",
        AFF,
        f"podAffinity: {{{PREF}: [{{weight: 5.0, podAffinityTerm: {{{OK_TERM}}}}}]}}",
        f"podAffinity.{PREF}[0].weight",
        "must be an integer, not 5.0, a YAML float",
    ),
    (
        "weight as a JSON bool",
        AFF,
        json.dumps({"podAffinity": {PREF: [{"weight": True, "podAffinityTerm": {}}]}}),
        f"podAffinity.{PREF}[0].weight",
        "must be an integer, not the boolean true",
    ),
    (
        "weight missing",
        AFF,
        f"podAffinity: {{{PREF}: [{{podAffinityTerm: {{{OK_TERM}}}}}]}}",
        f"podAffinity.{PREF}[0].weight",
        "is required",
    ),
    (
        "an empty nodeSelectorTerms list",
        AFF,
        NODE_TERM % "",
        TERMS,
        f"is empty, so no NUMA node could match; leave {REQ} out to allow every NUMA node",
    ),
    (
        "nodeSelectorTerms missing",
        AFF,
        "nodeAffinity: {" + REQ + ": {}}",
        f"nodeAffinity.{REQ}.nodeSelectorTerms",
        "is required",
    ),
    (
        "an empty node selector term",
        AFF,
        NODE_TERM % "{}",
        N0,
        "has no matchExpressions: Kubernetes reads an empty node selector term as matching no "
        "node; give it expressions, or leave the term out",
    ),
    (
        "an empty preference",
        AFF,
        "nodeAffinity: {" + PREF + ": [{weight: 1, preference: {matchExpressions: []}}]}",
        f"nodeAffinity.{PREF}[0].preference",
        "has no matchExpressions: Kubernetes reads an empty node selector term as matching no "
        "node; give it expressions, or leave the term out",
    ),
    (
        "matchFields",
        AFF,
        NODE_TERM % "{matchFields: [{key: metadata.name, operator: In, values: [n1]}]}",
        f"{N0}.matchFields",
        "is not supported: NUMA nodes have no fields (it selects Kubernetes nodes by "
        "metadata.name); select by label with matchExpressions, such as numa-agent.io/numa",
    ),
    (
        "Gt with a non-integer",
        AFF,
        NODE_TERM % "{matchExpressions: [{key: m, operator: Gt, values: ['1.5']}]}",
        f"{N0}.matchExpressions[0].values[0]",
        '"1.5" is not a 64-bit integer (operator Gt compares integers)',
    ),
    (
        "Lt beyond int64",
        AFF,
        NODE_TERM % "{matchExpressions: [{key: m, operator: Lt, values: ['9223372036854775808']}]}",
        f"{N0}.matchExpressions[0].values[0]",
        '"9223372036854775808" is not a 64-bit integer (operator Lt compares integers)',
    ),
    (
        "Gt with two values",
        AFF,
        NODE_TERM % "{matchExpressions: [{key: m, operator: Gt, values: ['1', '2']}]}",
        f"{N0}.matchExpressions[0].values",
        "must be exactly one integer for operator Gt, not 2 values",
    ),
    (
        "Lt with no value",
        AFF,
        NODE_TERM % "{matchExpressions: [{key: m, operator: Lt}]}",
        f"{N0}.matchExpressions[0].values",
        "must be exactly one integer for operator Lt, not 0 values",
    ),
    (
        "unknown node operator",
        AFF,
        NODE_TERM % "{matchExpressions: [{key: m, operator: Gte, values: ['1']}]}",
        f"{N0}.matchExpressions[0].operator",
        '"Gte" is not one of In, NotIn, Exists, DoesNotExist, Gt, Lt (did you mean Gt?)',
    ),
    (
        "values given to DoesNotExist in a node term",
        AFF,
        NODE_TERM % "{matchExpressions: [{key: m, operator: DoesNotExist, values: [a]}]}",
        f"{N0}.matchExpressions[0].values",
        "must be empty or left out for operator DoesNotExist",
    ),
    (
        "a bad node label key",
        AFF,
        NODE_TERM % "{matchExpressions: [{key: '-m', operator: Exists}]}",
        f"{N0}.matchExpressions[0].key",
        "\"-m\" is not a valid label key: the name part must consist of letters, digits, '-', '_' "
        "or '.', and start and end with a letter or digit",
    ),
    (
        "requiredDuringSchedulingRequiredDuringExecution in nodeAffinity",
        AFF,
        "nodeAffinity: {requiredDuringSchedulingRequiredDuringExecution: {}}",
        "nodeAffinity.requiredDuringSchedulingRequiredDuringExecution",
        f"is not a field of NodeAffinity (did you mean {REQ}?); its fields are {REQ}, {PREF}",
    ),
    # numa-agent.io/topology-spread-constraints
    (
        "spread: not a list",
        SPREAD,
        "{maxSkew: 1}",
        "",
        "must be a list of TopologySpreadConstraint, not a mapping",
    ),
    (
        "spread: maxSkew 0",
        SPREAD,
        "[{maxSkew: 0, topologyKey: numa-agent.io/numa, labelSelector: {}}]",
        "[0].maxSkew",
        "0 is too small: it must be at least 1",
    ),
    (
        "spread: maxSkew beyond int32",
        SPREAD,
        "[{maxSkew: 2147483648, topologyKey: numa-agent.io/numa, labelSelector: {}}]",
        "[0].maxSkew",
        "2147483648 is too large: it must be at most 2147483647",
    ),
    (
        "spread: maxSkew missing",
        SPREAD,
        "[{topologyKey: numa-agent.io/numa, labelSelector: {}}]",
        "[0].maxSkew",
        "is required",
    ),
    (
        "spread: labelSelector missing",
        SPREAD,
        "[{maxSkew: 1, topologyKey: numa-agent.io/numa}]",
        "[0].labelSelector",
        "is required",
    ),
    (
        "spread: topologyKey missing",
        SPREAD,
        "[{maxSkew: 1, labelSelector: {}}]",
        "[0].topologyKey",
        "is required",
    ),
    (
        "spread: unknown topology key",
        SPREAD,
        "[{maxSkew: 1, topologyKey: kubernetes.io/zone, labelSelector: {}}]",
        "[0].topologyKey",
        f'"kubernetes.io/zone" is not a level; use one of {LEVELS}',
    ),
    (
        "spread: unknown whenUnsatisfiable",
        SPREAD,
        f"[{{{SPREAD_OK}, whenUnsatisfiable: DoNotScheduled}}]",
        "[0].whenUnsatisfiable",
        '"DoNotScheduled" is not one of DoNotSchedule, ScheduleAnyway',
    ),
    (
        "spread: minDomains with ScheduleAnyway",
        SPREAD,
        f"[{{{SPREAD_OK}, whenUnsatisfiable: ScheduleAnyway, minDomains: 2}}]",
        "[0].minDomains",
        "can only be used with whenUnsatisfiable: DoNotSchedule",
    ),
    (
        "spread: minDomains 0",
        SPREAD,
        f"[{{{SPREAD_OK}, minDomains: 0}}]",
        "[0].minDomains",
        "0 is too small: it must be at least 1",
    ),
    (
        "spread: nodeAffinityPolicy",
        SPREAD,
        f"[{{{SPREAD_OK}, nodeAffinityPolicy: Honor}}]",
        "[0].nodeAffinityPolicy",
        "is not supported: spreading always counts only the domains the pod's required node "
        "affinity allows (as Honor)",
    ),
    (
        "spread: nodeTaintsPolicy",
        SPREAD,
        f"[{{{SPREAD_OK}, nodeTaintsPolicy: Ignore}}]",
        "[0].nodeTaintsPolicy",
        "is not supported: NUMA nodes have no taints",
    ),
    (
        "spread: matchLabelKeys",
        SPREAD,
        f"[{{{SPREAD_OK}, matchLabelKeys: [pod-template-hash]}}]",
        "[0].matchLabelKeys",
        "is not supported: write the labels into labelSelector instead",
    ),
    (
        "spread: unknown field",
        SPREAD,
        f"[{{{SPREAD_OK}}}, {{{SPREAD_OK}, maxskew: 1}}]",
        "[1].maxskew",
        "is not a field of TopologySpreadConstraint (did you mean maxSkew?); its fields are "
        "maxSkew, topologyKey, whenUnsatisfiable, labelSelector, minDomains, nodeAffinityPolicy, "
        "nodeTaintsPolicy, matchLabelKeys",
    ),
    (
        "spread: a repeated pair",
        SPREAD,
        f"[{{{SPREAD_OK}}}, {{{SPREAD_OK}, whenUnsatisfiable: ScheduleAnyway}}, "
        f"{{{SPREAD_OK}, whenUnsatisfiable: DoNotSchedule}}]",
        "[2]",
        "has the topologyKey and whenUnsatisfiable of [0] (numa-agent.io/numa, DoNotSchedule); "
        "one constraint per pair, as in Kubernetes",
    ),
    (
        "spread: a bad selector",
        SPREAD,
        "[{maxSkew: 1, topologyKey: numa-agent.io/numa, "
        "labelSelector: {matchExpressions: [{key: a, operator: Exists, values: [b]}]}}]",
        "[0].labelSelector.matchExpressions[0].values",
        "must be empty or left out for operator Exists",
    ),
    (
        "an explicit int tag with no digits",
        AFF,
        f"podAffinity: {{{PREF}: [{{weight: !!int , podAffinityTerm: {{{OK_TERM}}}}}]}}",
        f"podAffinity.{PREF}[0].weight",
        "must be an integer, not an empty YAML int",
    ),
    # whole-value problems
    (
        "not YAML",
        AFF,
        "podAffinity: [",
        "",
        "is not valid YAML: expected the node content, but found '<stream end>' at line 1, "
        "column 15 (while parsing a flow node)",
    ),
    (
        "a YAML anchor",
        AFF,
        "podAffinity: &a {}",
        "",
        "YAML anchor &a at line 1, column 14: anchors are not allowed",
    ),
    (
        "a duplicate YAML key",
        AFF,
        "podAffinity: {}\npodAffinity: {}\n",
        "",
        'has the key "podAffinity" twice in one mapping (lines 1 and 2)',
    ),
    (
        "a duplicate JSON key",
        AFF,
        '{"podAffinity": {}, "podAffinity": {}}',
        "",
        'has the key "podAffinity" twice in one mapping',
    ),
    (
        "two documents",
        SPREAD,
        "[]\n---\n[]\n",
        "",
        "is not valid YAML: but found another document at line 2, column 1 (expected a single "
        "document in the stream)",
    ),
]


@pytest.mark.parametrize(
    ("annotation", "text", "path", "reason"), [c[1:] for c in INVALID], ids=[c[0] for c in INVALID]
)
def test_invalid_annotations_name_path_and_reason(
    annotation: str, text: str, path: str, reason: str
) -> None:
    with pytest.raises(RuleError) as caught:
        parse_pod_rules({annotation: text})
    err = caught.value
    assert (err.annotation, err.path, err.reason) == (annotation, path, reason)
    assert str(err) == (f"{annotation}: {path}: {reason}" if path else f"{annotation}: {reason}")
