"""`numa-agent check` on numa-agent.io/cpu-class and memory-tiers: the agent's own
refusal text for a bad value, a warning for a container the pod lacks, and with
--simulate, the machine's verdict (no efficiency cores on a uniform machine)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from agent.cli import main
from devtools.fakesysfs import write_shape

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


def check(tmp_path: Path, annotations: str, *extra: str) -> int:
    path = tmp_path / "pod.yaml"
    path.write_text(textwrap.dedent(POD.format(annotations=annotations)))
    return main(["check", str(path), *extra])


def test_a_valid_mapping_passes_and_is_summed_up(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = check(
        tmp_path,
        'numa-agent.io/cpu-class: "{main: efficiency}"\n    numa-agent.io/memory-tiers: dram',
    )
    out = capsys.readouterr().out
    assert code == 0, out
    assert (
        "kinds of core and memory: main: cpu-class efficiency, dram; side: cpu-class default, dram"
        in out
    )
    assert "ok: the agent accepts" in out


def test_a_bad_value_fails_with_the_agents_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = check(tmp_path, "numa-agent.io/cpu-class: turbo")
    out = capsys.readouterr().out
    assert code == 1
    for name in ("main", "side"):
        assert (
            f"error: cannot place container {name!r} of pod default/app: annotation "
            f"numa-agent.io/cpu-class on container {name!r}: 'turbo' is not one of "
            "performance, efficiency, any"
        ) in out
    assert "ok: the agent accepts" not in out


def test_a_container_the_pod_lacks_is_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = check(tmp_path, 'numa-agent.io/memory-tiers: "{mian: dram}"')
    out = capsys.readouterr().out
    assert code == 0
    assert (
        "warning: numa-agent.io/memory-tiers names container 'mian', which this pod does not "
        "have (containers: main, side); it applies to nothing"
    ) in out


@pytest.mark.parametrize(("shape", "code"), [("desktop-favoured", 1), ("hybrid-desktop", 0)])
def test_simulate_knows_whether_the_machine_has_the_class(
    shape: str, code: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = write_shape(shape, tmp_path / "sys")
    got = check(
        tmp_path, "numa-agent.io/cpu-class: efficiency", "--simulate", "--sysfs-root", str(root)
    )
    out = capsys.readouterr().out
    assert got == code, out
    # Refused through the node agent's handlers, with the gRPC code kubelet would get.
    refused = (
        "INVALID_ARGUMENT: cannot place container 'main' of pod default/app: annotation "
        "numa-agent.io/cpu-class asks efficiency cores for container 'main' of pod "
        "default/app, but this machine has one kind of core (no efficiency cores)"
    ) in out
    assert refused == (code == 1)
