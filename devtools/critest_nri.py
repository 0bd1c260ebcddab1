"""critest, the CRI conformance suite, on a private containerd 2 twice: without the
NRI plugin and with numa-agent plugged into its NRI socket; then which specs passed
in each run. The plugin must lose no spec that passes without it.

    python -m devtools.critest_nri --critest /path/to/critest [--focus REGEX]

Needs root and NUMA_AGENT_CONTAINERD2_DIR (devtools/containerd.py). No registry is
reachable on the project's VMs: a local one (devtools/registry.py) serves busybox
under every image name critest asks for, so specs that need another image's
contents fail in both runs; the comparison is over what passes.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

from agent.node.agent import NodeAgent
from agent.nri.plugin import NriPlugin
from agent.nri.runtime import NriRuntime
from agent.nri.session import NriSession
from agent.policy.config import PolicyConfig
from devtools.containerd import PrivateContainerd, containerd2_dir
from devtools.registry import LocalRegistry
from topology.sysfs import read_machine

# Where critest's images come from; all served by the local registry (one busybox).
REGISTRIES = ("registry.k8s.io", "gcr.io", "k8s.gcr.io", "docker.io")


# critest's pods use the pod network: a bridge of its own (name and subnet unlike
# any other containerd's here), from Debian's containernetworking-plugins.
CNI_CONFIG = """{
  "cniVersion": "1.0.0",
  "name": "numa-critest",
  "plugins": [
    {"type": "bridge", "bridge": "numacrit0", "isGateway": true, "ipMasq": true,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.251.0.0/24"}]],
              "routes": [{"dst": "0.0.0.0/0"}]}},
    {"type": "portmap", "capabilities": {"portMappings": true}},
    {"type": "loopback"}
  ]
}
"""


def passed_specs(report: Path) -> tuple[set[str], int]:
    """Names of the specs that passed in a ginkgo JUnit report, and how many ran."""
    passed, ran = set(), 0
    for case in ET.parse(report).getroot().iter("testcase"):
        if case.get("status") == "skipped" or case.find("skipped") is not None:
            continue
        ran += 1
        if case.find("failure") is None and case.find("error") is None:
            passed.add(case.get("name", ""))
    return passed, ran


def run_critest(critest: Path, ctrd: PrivateContainerd, report: Path, focus: str) -> None:
    command = [
        str(critest),
        f"--runtime-endpoint={ctrd.endpoint}",
        f"--image-endpoint={ctrd.endpoint}",
        f"--ginkgo.junit-report={report}",
        "--ginkgo.skip=AppArmor|SELinux",
        "--ginkgo.timeout=40m",
        "--ginkgo.seed=1",  # the same order in both runs
    ]
    if focus:
        command.append(f"--ginkgo.focus={focus}")
    subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)


def one_run(critest: Path, bin_dir: Path, out: Path, focus: str, plugged: bool) -> Path:
    """critest on a fresh containerd 2 (images, pods, containers: none left from the
    other run), with or without the plugin; returns the JUnit report."""
    report = out / ("with.xml" if plugged else "without.xml")
    base = Path(tempfile.mkdtemp(prefix="numa-critest-"))
    registry = LocalRegistry()
    registry.write_hosts(base / "certs.d", REGISTRIES)
    ctrd = PrivateContainerd(base, bin_dir=bin_dir, registry_config_path=base / "certs.d")
    ctrd.paths.cni_conf.mkdir(parents=True)
    (ctrd.paths.cni_conf / "10-critest.conflist").write_text(CNI_CONFIG)
    try:
        ctrd.start(timeout=60)
        if not plugged:
            run_critest(critest, ctrd, report, focus)
            return report
        machine = read_machine(Path("/sys"), cpu_info=False)
        runtime = NriRuntime(str(ctrd.paths.nri_socket))
        node = NodeAgent(machine, PolicyConfig(), runtime)
        plugin = NriPlugin(node, runtime)
        session = NriSession(str(ctrd.paths.nri_socket), "90", plugin, runtime)
        session.start()
        try:
            if not plugin.wait_synchronized(1, 30):
                raise RuntimeError("containerd did not synchronize the plugin")
            run_critest(critest, ctrd, report, focus)
        finally:
            session.stop()
            node.close()
        return report
    finally:
        ctrd.stop()
        registry.stop()
        shutil.rmtree(base, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--critest", type=Path, required=True)
    parser.add_argument("--focus", default="")
    parser.add_argument("--out", type=Path, default=Path("critest-results"))
    args = parser.parse_args(argv)
    bin_dir = containerd2_dir()
    if bin_dir is None:
        print("NUMA_AGENT_CONTAINERD2_DIR is not set", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    without, ran_without = passed_specs(one_run(args.critest, bin_dir, args.out, args.focus, False))
    with_, ran_with = passed_specs(one_run(args.critest, bin_dir, args.out, args.focus, True))
    print(f"without the plugin: {len(without)} of {ran_without} specs passed")
    print(f"with the plugin:    {len(with_)} of {ran_with} specs passed")
    lost = sorted(without - with_)
    for name in lost:
        print(f"LOST: {name}")
    for name in sorted(with_ - without):
        print(f"gained: {name}")
    return 1 if lost else 0


if __name__ == "__main__":
    sys.exit(main())
