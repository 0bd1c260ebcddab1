"""`numa-agent check`: manifests read as Kubernetes reads them, the agent's own annotation
errors, warnings for containers the pod lacks, and --simulate on a fake machine."""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.affinity import ANNOTATION_AFFINITY, parse_pod_affinities
from agent.cli import main
from agent.manifest import ManifestError, load_manifests
from agent.workload import QoSClass
from devtools.fakesysfs import write_shape
from topology.cpuset import CPUSet

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "pods"


@pytest.fixture(scope="module")
def sysfs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    yield write_shape("xeon-2s-2numa", tmp_path_factory.mktemp("check") / "sysfs")


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "pod.yaml"
    path.write_text(textwrap.dedent(text))
    return path


POD = """\
apiVersion: v1
kind: Pod
metadata:
  name: app
  annotations:
    {annotations}
spec:
  containers:
    - name: main
      resources: {{limits: {{cpu: "2", memory: 1Gi}}}}
    - name: side
      resources: {{requests: {{cpu: 250m}}}}
"""


def test_valid_example_passes(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", str(EXAMPLES / "web.yaml")]) == 0
    out = capsys.readouterr().out
    assert "Deployment shop/web (2 replicas)" in out and "ok: the agent accepts" in out


def test_invalid_example_fails_with_the_agents_message(capsys: pytest.CaptureFixture[str]) -> None:
    path = EXAMPLES / "bad-annotations.yaml"
    assert main(["check", str(path)]) == 1
    out = capsys.readouterr().out
    # The agent's refusal text: its prefix and the AnnotationError's own message.
    (workload,) = load_manifests(path)
    annotations = workload.pod.annotations
    with pytest.raises(ValueError) as err:
        parse_pod_affinities(annotations).rules_for("worker")
    expected = f"cannot place container 'worker' of pod default/batch: {err.value}"
    assert f"error: {expected}" in out
    assert "warning: the annotations name container 'feedr'" in out
    assert "'feeder'" not in out.split("warning")[0]  # feeder itself is fine


@pytest.mark.parametrize(
    ("annotation", "code", "needle"),
    [
        ("main: [side]", 0, "ok: the agent accepts"),
        ("main: [[side]]", 1, "error: cannot place container 'main' of pod default/app"),
        ("ghost: [main]", 0, "warning: the annotations name container 'ghost'"),
        ("'main: [side'", 1, "error: cannot place container 'side' of pod default/app"),
    ],
)
def test_annotation_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], annotation: str, code: int, needle: str
) -> None:
    value = annotation if annotation.startswith("'") else f"'{annotation}'"
    path = write(tmp_path, POD.format(annotations=f"{ANNOTATION_AFFINITY}: {value}"))
    assert main(["check", str(path)]) == code
    assert needle in capsys.readouterr().out


def test_resources_follow_kubernetes_defaults(tmp_path: Path) -> None:
    path = write(tmp_path, POD.format(annotations="{}"))
    (workload,) = load_manifests(path)
    main_c, side = workload.pod.containers
    # A limit alone sets the request; a request alone has no limit.
    assert (main_c.cpu_milli, main_c.cpu_limit_milli, main_c.memory_bytes) == (2000, 2000, 1 << 30)
    assert (side.cpu_milli, side.cpu_limit_milli) == (250, 0)
    assert workload.pod.qos is QoSClass.BURSTABLE


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("kind: Service\nmetadata: {name: s}\n", "no pod in it"),
        ("kind: Pod\nmetadata: {}\nspec: {containers: [{name: a}]}\n", "metadata.name: missing"),
        ("kind: Pod\nmetadata: {name: p}\nspec: {containers: []}\n", "expected a list"),
        (
            "kind: Pod\nmetadata: {name: p}\nspec: {containers: "
            "[{name: a, resources: {requests: {cpu: 2x}}}]}\n",
            "requests.cpu",
        ),
        (
            "kind: Pod\nmetadata: {name: p}\nspec: {containers: "
            "[{name: a, resources: {requests: {cpu: 2}, limits: {cpu: 1}}}]}\n",
            "above its limit",
        ),
    ],
)
def test_unreadable_manifests_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, message: str
) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ManifestError, match=message):
        load_manifests(path)
    assert main(["check", str(path)]) == 2
    assert message in capsys.readouterr().err


def test_simulate_places_every_replica(sysfs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["check", str(EXAMPLES / "web.yaml"), "--simulate", "--sysfs-root", str(sysfs)]
    assert main([*args, "--reserved-cpus", "0,40"]) == 0
    out = capsys.readouterr().out
    rows = {
        (line.split()[1], line.split()[2]): line.split()
        for line in out.splitlines()
        if line.startswith("shop ")
    }
    assert set(rows) == {(f"web-{i}", c) for i in (0, 1) for c in ("server", "cache")}
    cpus = {key: CPUSet.parse(row[3]) for key, row in rows.items()}
    assert len(cpus["web-0", "server"]) == 4 and len(cpus["web-0", "cache"]) == 2
    for i in (0, 1):  # cache next to its server: same NUMA node (the MEMS column)
        assert rows[f"web-{i}", "cache"][4] == rows[f"web-{i}", "server"][4]
    # Anti-affinity: the two servers on different sockets (0-19,40-59 is socket 0).
    socket0 = CPUSet.parse("0-19,40-59")
    assert cpus["web-0", "server"].is_subset(socket0) != cpus["web-1", "server"].is_subset(socket0)
    assert not CPUSet.parse("0,40") & (cpus["web-0", "server"] | cpus["web-1", "server"])


def test_simulate_reports_a_pod_that_cannot_fit(
    tmp_path: Path, sysfs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(
        tmp_path,
        "kind: Pod\nmetadata: {name: big}\nspec: {containers: "
        "[{name: a, resources: {limits: {cpu: 90, memory: 1Gi}}}]}\n",
    )
    assert main(["check", str(path), "--simulate", "--sysfs-root", str(sysfs)]) == 1
    assert "RESOURCE_EXHAUSTED" in capsys.readouterr().out
