"""`numa-agent check` and the numa-agent.io annotations: the agent's own refusal for
each container, a summary of what the rules ask, and warnings where the pod spec's
own scheduling rules name numa-agent.io keys the cluster scheduler does not know."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from agent.cli import main
from agent.manifest import load_manifests, node_local_keys
from agent.rules import ANNOTATION_AFFINITY, ANNOTATION_SPREAD, RuleError, parse_pod_rules

REQ = "requiredDuringSchedulingIgnoredDuringExecution"
PREF = "preferredDuringSchedulingIgnoredDuringExecution"

POD = """\
apiVersion: v1
kind: Pod
metadata:
  name: app
  namespace: shop
  annotations: {annotations}
spec:
  initContainers:
    - name: setup
  containers:
    - name: main
      resources: {{limits: {{cpu: "2", memory: 1Gi}}}}
    - name: side
{spec}
"""

ANTI = (
    "podAntiAffinity: {" + REQ + ": [{labelSelector: {matchLabels: {app: db}}, "
    "topologyKey: numa-agent.io/socket}]}"
)
PULL = (
    "podAffinity: {" + PREF + ": [{weight: 5, podAffinityTerm: {labelSelector: {}, "
    "topologyKey: numa-agent.io/numa}}]}"
)
NODE = (
    "nodeAffinity: {" + REQ + ": {nodeSelectorTerms: [{matchExpressions: "
    "[{key: numa-agent.io/net.eth1, operator: Exists}]}]}}"
)
SPREAD = "[{maxSkew: 1, topologyKey: numa-agent.io/numa, labelSelector: {matchLabels: {app: web}}}]"


def write(tmp_path: Path, annotations: dict[str, str], spec: str = "") -> Path:
    lines = "".join(f"\n    {key}: {value!r}" for key, value in annotations.items())
    text = POD.format(annotations=lines or "{}", spec=textwrap.indent(textwrap.dedent(spec), "  "))
    path = tmp_path / "pod.yaml"
    path.write_text(text)
    return path


def run(path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(["check", str(path)])
    return code, capsys.readouterr().out


@pytest.mark.parametrize(
    ("annotations", "summary"),
    [
        ({ANNOTATION_AFFINITY: "{" + ANTI + "}"}, "1 required anti-affinity term"),
        (
            {ANNOTATION_AFFINITY: "{" + ANTI + ", " + PULL + ", " + NODE + "}"},
            "1 required anti-affinity term, 1 preferred affinity term; "
            "node affinity (1 required term)",
        ),
        ({ANNOTATION_SPREAD: SPREAD}, "1 spread constraint"),
        (
            {ANNOTATION_AFFINITY: "{" + PULL + "}", ANNOTATION_SPREAD: SPREAD},
            "1 preferred affinity term; 1 spread constraint",
        ),
    ],
)
def test_valid_rules_pass_with_a_summary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], annotations: dict[str, str], summary: str
) -> None:
    code, out = run(write(tmp_path, annotations), capsys)
    assert code == 0
    assert f"  numa-agent.io rules: {summary}\n" in out
    assert "ok: the agent accepts the annotations for every container" in out
    assert "no affinity annotations" not in out and "warning" not in out


@pytest.mark.parametrize(
    "annotations",
    [
        {
            ANNOTATION_AFFINITY: "{podAntiAffinity: {"
            + REQ
            + ": [{topologyKey: numa-agent.io/rack}]}}"
        },
        {ANNOTATION_AFFINITY: "{" + ANTI + "}", ANNOTATION_SPREAD: "[{maxSkew: 0}]"},
        {
            ANNOTATION_SPREAD: "[{maxSkew: 1, topologyKey: numa-agent.io/numa, "
            "labelSelector: {}, nodeTaintsPolicy: Honor}]"
        },
        {ANNOTATION_AFFINITY: "podAffinity: ["},
    ],
)
def test_bad_rules_fail_every_container_with_the_agents_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], annotations: dict[str, str]
) -> None:
    path = write(tmp_path, annotations)
    code, out = run(path, capsys)
    assert code == 1
    (workload,) = load_manifests(path)
    with pytest.raises(RuleError) as caught:
        parse_pod_rules(workload.pod.annotations)
    for container in ("setup", "main", "side"):  # init containers too
        # The agent's refusal: "cannot place container 'x' of pod ns/name: <error>".
        expected = f"cannot place container {container!r} of pod shop/app: {caught.value}"
        assert f"  error: {expected}\n" in out
    assert "ok:" not in out


def test_both_languages_are_reported_together(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    annotations = {
        "cri-resource-manager.intel.com/affinity": "main: [side]",
        ANNOTATION_AFFINITY: "{podAfinity: {}}",
    }
    code, out = run(write(tmp_path, annotations), capsys)
    assert code == 1
    assert "affinity annotations name: main" in out
    assert (
        "error: cannot place container 'main' of pod shop/app: numa-agent.io/affinity: "
        "podAfinity: is not a field of Affinity (did you mean podAffinity?)"
    ) in out


SPEC_AFFINITY = f"""\
affinity:
  podAntiAffinity:
    {REQ}:
    - labelSelector: {{matchLabels: {{app: db}}}}
      topologyKey: numa-agent.io/socket
    - labelSelector: {{matchLabels: {{app: db}}}}
      topologyKey: kubernetes.io/hostname
    {PREF}:
    - weight: 10
      podAffinityTerm: {{topologyKey: numa-agent.io/numa}}
  nodeAffinity:
    {REQ}:
      nodeSelectorTerms:
      - matchExpressions:
        - {{key: numa-agent.io/net.eth1, operator: Exists}}
        - {{key: topology.kubernetes.io/zone, operator: In, values: [a]}}
    {PREF}:
    - weight: 1
      preference:
        matchExpressions: [{{key: numa-agent.io/memory-mib, operator: Gt, values: ["1"]}}]
topologySpreadConstraints:
- {{maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule}}
- {{maxSkew: 1, topologyKey: numa-agent.io/numa, whenUnsatisfiable: DoNotSchedule}}
"""


def test_spec_rules_with_node_local_keys_are_warned_about(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = run(write(tmp_path, {}, SPEC_AFFINITY), capsys)
    assert code == 0  # a warning: the manifest is the cluster's business
    warnings = [line for line in out.splitlines() if line.startswith("  warning: ")]
    assert [w.split(" is ")[0] for w in warnings] == [
        f"  warning: spec.affinity.podAntiAffinity.{REQ}[0].topologyKey",
        f"  warning: spec.affinity.podAntiAffinity.{PREF}[0].podAffinityTerm.topologyKey",
        f"  warning: spec.affinity.nodeAffinity.{REQ}.nodeSelectorTerms[0].matchExpressions[0].key",
        f"  warning: spec.affinity.nodeAffinity.{PREF}[0].preference.matchExpressions[0].key",
        "  warning: spec.topologySpreadConstraints[1].topologyKey",
    ]
    assert warnings[0] == (
        f"  warning: spec.affinity.podAntiAffinity.{REQ}[0].topologyKey is "
        "'numa-agent.io/socket', a key of the machine's parts that no node carries, so the "
        "cluster scheduler cannot apply this rule as meant (required pod or node affinity and "
        "DoNotSchedule spreading leave the pod Pending; anti-affinity does nothing); rules "
        f"inside the node go in the {ANNOTATION_AFFINITY} annotation"
    )
    assert warnings[-1].endswith(f"go in the {ANNOTATION_SPREAD} annotation")
    assert "no affinity annotations" in out and "ok:" in out


def test_workload_templates_are_warned_about_with_their_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "deploy.yaml"
    path.write_text(
        textwrap.dedent(
            """\
            kind: Deployment
            metadata: {name: web}
            spec:
              replicas: 2
              template:
                metadata: {labels: {app: web}}
                spec:
                  containers: [{name: web}]
                  topologySpreadConstraints:
                  - maxSkew: 1
                    topologyKey: numa-agent.io/socket
                    whenUnsatisfiable: ScheduleAnyway
            """
        )
    )
    code, out = run(path, capsys)
    assert code == 0
    assert (
        "warning: spec.template.spec.topologySpreadConstraints[0].topologyKey is "
        "'numa-agent.io/socket'" in out
    )


@pytest.mark.parametrize(
    ("spec", "found"),
    [
        ({}, ()),
        ({"affinity": None, "topologySpreadConstraints": None}, ()),
        ({"affinity": [], "topologySpreadConstraints": {"a": 1}}, ()),  # malformed: no crash
        ({"affinity": {"podAffinity": {REQ: [1, {"topologyKey": 5}]}}}, ()),
        ({"affinity": {"podAffinity": {REQ: [{"topologyKey": "kubernetes.io/hostname"}]}}}, ()),
        (
            {
                "affinity": {
                    "podAffinity": {
                        "requiredDuringSchedulingRequiredDuringExecution": [
                            {"topologyKey": "numa-agent.io/die"}
                        ]
                    }
                }
            },
            (
                (
                    "s.affinity.podAffinity.requiredDuringSchedulingRequiredDuringExecution[0].topologyKey",
                    "numa-agent.io/die",
                ),
            ),
        ),
        (
            {
                "affinity": {
                    "nodeAffinity": {
                        REQ: {
                            "nodeSelectorTerms": [
                                {},
                                {"matchExpressions": [{"key": "numa-agent.io/numa"}]},
                            ]
                        }
                    }
                }
            },
            (
                (
                    f"s.affinity.nodeAffinity.{REQ}.nodeSelectorTerms[1].matchExpressions[0].key",
                    "numa-agent.io/numa",
                ),
            ),
        ),
        (
            {
                "affinity": {
                    "nodeAffinity": {
                        REQ: {"nodeSelectorTerms": [{"matchFields": [{"key": "numa-agent.io/x"}]}]}
                    }
                }
            },
            (),
        ),
    ],
)
def test_node_local_keys(spec: dict[str, object], found: tuple[tuple[str, str], ...]) -> None:
    assert node_local_keys(spec, "s") == found


REACHING = (
    "podAntiAffinity: {" + REQ + ": [{labelSelector: {matchExpressions: [{key: app, "
    "operator: NotIn, values: [zz]}]}, namespaceSelector: {}, topologyKey: numa-agent.io/socket}]}"
)


def test_a_term_that_could_close_the_node_is_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No tenant can close the node: check says what CreateContainer would refuse."""
    code, out = run(write(tmp_path, {ANNOTATION_AFFINITY: "{" + REACHING + "}"}), capsys)
    assert code == 1
    assert "error: cannot place container 'main' of pod shop/app: numa-agent.io/affinity: " in out
    assert "exclusive_domain_namespaces" in out
    assert "ok:" not in out
