"""`make demo` runs to the end and shows what it claims (real containerd when present)."""

from __future__ import annotations

import re
import subprocess
import sys

from topology.cpuset import CPUSet


def test_demo_moves_the_besteffort_container_off_the_exclusive_cpu() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "devtools.demo"], capture_output=True, text=True, timeout=240
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    steps = out.split("\n-- ")
    guaranteed = next(s for s in steps if s.startswith("a Guaranteed 1-CPU pod"))
    cpus = dict(re.findall(r"(\w+)/app\s+cpuset_cpus=(\S+)", guaranteed))
    batch, latency = CPUSet.parse(cpus["batch"]), CPUSet.parse(cpus["latency"])
    assert len(latency) == 1 and batch and batch.isdisjoint(latency)
    if "kernel:" in guaranteed:  # containerd: what the kernel enforces agrees
        kernel = dict(re.findall(r"(\w+)/app .*Cpus_allowed_list=(\S+)", guaranteed))
        assert kernel == cpus
    assert "INVALID_ARGUMENT" in out and 'container "app"' in out
    after = next(s for s in steps if s.startswith("the Guaranteed pod is removed"))
    assert CPUSet.parse(re.findall(r"cpuset_cpus=(\S+)", after)[0]) == batch | latency
    assert "all clean" in out
    # The affinity part, on a simulated 2-socket machine: four replicas of "web"
    # pushed apart by anti-affinity land in four different NUMA pools.
    simulated = out.split("affinity on a 2-socket machine", 1)[1]
    pools = re.findall(r"^default\s+web-\d\s+server\s+\S+\s+\S+\s+yes\s+(numa\d)$", simulated, re.M)
    assert len(pools) == 4 and len(set(pools)) == 4, simulated
