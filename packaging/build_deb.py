"""Build the numa-agent Debian package: a staged tree turned into a .deb by dpkg-deb.

The agent gets its own virtual environment at /opt/numa-agent, built here at
build time (see `stage_venv` for why) so installing is offline and every file
belongs to dpkg. Run by `make deb`; `--help` lists the knobs.
"""

from __future__ import annotations

import argparse
import gzip
import os
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

PACKAGE = "numa-agent"
PREFIX = Path("/opt/numa-agent")
CONFIG_PATH = Path("/etc/numa-agent/config.yaml")
UNIT_DIR = Path("/lib/systemd/system")
DOC_DIR = Path("/usr/share/doc/numa-agent")
# The venv's python is a symlink to this interpreter, so the package depends on it.
DEFAULT_PYTHON = "/usr/bin/python3.11"
MAINTAINER = "numa-agent maintainers <numa-agent@localhost>"
DESCRIPTION = """NUMA-aware container placement agent for Kubernetes nodes
 numa-agent is a proxy on the CRI socket between kubelet and the container
 runtime (containerd or CRI-O). It writes cpusets into CreateContainer requests
 according to pod affinity annotations and the machine's NUMA topology.
 .
 The agent lives in its own Python virtual environment in /opt/numa-agent;
 point kubelet's --container-runtime-endpoint at its socket to use it
 (see /usr/share/doc/numa-agent/examples/kubelet-numa-agent.conf)."""


# pip of the interpreter running this (make deb: the project's .venv) builds and installs.
PIP = (sys.executable, "-m", "pip")
# Bytecode checked against the source's hash, not its mtime, so it stays valid
# whatever dates the files get; /opt is read-only to the service, nothing is rewritten.
COMPILE_MODE = ("--invalidation-mode", "checked-hash")


class BuildError(Exception):
    """The package cannot be built; the message names the step and what failed."""


@dataclass(frozen=True, slots=True)
class BuildResult:
    deb: Path
    version: str
    seconds: float


def run(cmd: Sequence[str | Path], step: str, **kwargs: object) -> str:
    """Run a build step; BuildError with its output when it fails."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    proc = subprocess.run(
        [str(c) for c in cmd],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        **kwargs,  # type: ignore[call-overload]
    )
    if proc.returncode != 0:
        raise BuildError(
            f"{step}: `{' '.join(map(str, cmd))}` exited {proc.returncode}:\n"
            f"{proc.stdout}{proc.stderr}"
        )
    out: str = proc.stdout
    return out


def copy_sources(source: Path, dest: Path) -> None:
    """Copy what the wheel is built from, so no build/ directory lands in the checkout."""
    pyproject = source / "pyproject.toml"
    with pyproject.open("rb") as f:
        meta = tomllib.load(f)
    includes = meta["tool"]["setuptools"]["packages"]["find"]["include"]
    dest.mkdir(parents=True)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(source / name, dest / name)
    for pattern in includes:
        top = pattern.rstrip("*").rstrip(".")
        shutil.copytree(
            source / top, dest / top, ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
        )


def stage_venv(work: Path, stage: Path, python: str) -> Path:
    """Build the venv inside `stage` at stage/opt/numa-agent and make it valid at /opt/numa-agent.

    Why here and not in postinst: installing stays offline and fast, and dpkg owns
    every file, so removal is exact. A venv only records its own path in script
    shebangs and pyvenv.cfg (its python finds site-packages relative to itself),
    so those are rewritten; bytecode is compiled with the final paths.
    """
    venv = stage / PREFIX.relative_to("/")
    run([python, "-m", "venv", "--without-pip", venv], "create the venv")
    wheels = work / "wheels"
    run(
        [*PIP, "wheel", "--quiet", "--no-deps", "--no-build-isolation", "-w", wheels, work / "src"],
        "build the numa-agent wheel",
    )
    (wheel,) = wheels.glob("numa_agent-*.whl")
    run(
        [*PIP, "--python", venv / "bin/python", "install", "--quiet", "--no-compile", wheel],
        "install numa-agent and its dependencies into the venv",
    )
    for script in venv.glob("bin/[Aa]ctivate*"):
        script.unlink()  # they hard-code the venv's path and nobody sources them here
    relocate(venv, PREFIX)
    final_paths = ("-s", stage, "-p", "/", venv / "lib")  # tracebacks name /opt/..., not stage
    run(
        [venv / "bin/python", "-I", "-m", "compileall", "-q", "-j0", *COMPILE_MODE, *final_paths],
        "compile bytecode",
    )
    return venv


def relocate(venv: Path, final: Path) -> None:
    """Rewrite the staged path to the final one in shebangs and pyvenv.cfg; fail if any is left."""
    old, new = str(venv).encode(), str(final).encode()
    for path in [*venv.glob("bin/*"), venv / "pyvenv.cfg"]:
        if path.is_symlink() or not path.is_file():
            continue
        data = path.read_bytes()
        if old in data:
            path.write_bytes(data.replace(old, new))
    leftovers = [
        p
        for p in venv.rglob("*")
        if p.is_file() and not p.is_symlink() and p.suffix != ".pyc" and old in p.read_bytes()
    ]
    if leftovers:
        raise BuildError(f"the staged path {venv} is still named in {leftovers[:5]}")


def normalise_modes(root: Path) -> None:
    """0755 for directories and executables, 0644 for the rest, whatever the umask was."""
    for path in [root, *root.rglob("*")]:
        if path.is_symlink():
            continue
        if path.is_dir() or path.stat().st_mode & 0o111:
            path.chmod(0o755)
        else:
            path.chmod(0o644)


def write_file(path: Path, data: str | bytes, mode: int = 0o644) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    path.write_bytes(data)
    path.chmod(mode)


def control(version: str, arch: str, python: str, installed_kib: int) -> str:
    python_pkg = Path(python).name  # python3.11: the venv links to its interpreter
    return (
        f"Package: {PACKAGE}\n"
        f"Version: {version}\n"
        f"Architecture: {arch}\n"
        f"Maintainer: {MAINTAINER}\n"
        f"Installed-Size: {installed_kib}\n"
        f"Depends: {python_pkg}, libc6 (>= 2.17)\n"
        "Section: admin\n"
        "Priority: optional\n"
        f"Description: {DESCRIPTION}\n"
    )


def build(
    source: Path, out_dir: Path, python: str = DEFAULT_PYTHON, xz_level: int = 6
) -> BuildResult:
    """Build the package from the checkout `source` into `out_dir`; returns the .deb.

    xz level 6 makes the smallest file but takes most of the build's time;
    level 1 is about ten times faster for 15% more bytes (what the tests use).
    """
    started = time.monotonic()
    if not Path(python).is_file():
        raise BuildError(f"interpreter {python} not found: the venv's python links to it")
    packaging = source / "packaging"
    with tempfile.TemporaryDirectory(prefix="numa-agent-deb.") as tmp:
        work = Path(tmp)
        stage = work / "root"
        copy_sources(source, work / "src")
        venv = stage_venv(work, stage, python)
        py: list[str | Path] = [venv / "bin/python", "-I"]
        version = run([*py, "-c", "import agent; print(agent.__version__)"], "version").strip()

        usr_bin = stage / "usr/bin"
        usr_bin.mkdir(parents=True)
        (usr_bin / PACKAGE).symlink_to(PREFIX / "bin" / PACKAGE)
        unit = (source / "systemd/numa-agent.service").read_text()
        write_file(stage / UNIT_DIR.relative_to("/") / "numa-agent.service", unit)
        defaults = run([*py, "-m", "agent.cli", "config", "--defaults"], "default config")
        write_file(stage / CONFIG_PATH.relative_to("/"), defaults)
        page = run([*py, packaging / "manpage.py"], "man page")
        write_file(
            stage / "usr/share/man/man8/numa-agent.8.gz",
            gzip.compress(page.encode(), compresslevel=9, mtime=0),
        )
        doc = stage / DOC_DIR.relative_to("/")
        write_file(doc / "copyright", (packaging / "debian/copyright").read_text())
        write_file(doc / "README.md", (source / "README.md").read_text())
        # How Node Feature Discovery picks the agent's feature file up.
        write_file(doc / "cluster-labels.md", (source / "docs/cluster-labels.md").read_text())
        dropin = (source / "systemd/kubelet-numa-agent.conf").read_text()
        write_file(doc / "examples/kubelet-numa-agent.conf", dropin)
        write_file(
            doc / "examples/daemonset.yaml",
            (packaging / "kubernetes/daemonset.yaml").read_text(),
        )

        normalise_modes(stage)
        installed_kib = (
            sum(p.lstat().st_size for p in stage.rglob("*") if not p.is_dir()) // 1024 + 1
        )
        debian = stage / "DEBIAN"
        arch = run(["dpkg", "--print-architecture"], "architecture").strip()
        write_file(debian / "control", control(version, arch, python, installed_kib))
        write_file(debian / "conffiles", f"{CONFIG_PATH}\n")
        for script in ("postinst", "prerm", "postrm"):
            write_file(debian / script, (packaging / "debian" / script).read_text(), 0o755)

        out_dir.mkdir(parents=True, exist_ok=True)
        deb = out_dir / f"{PACKAGE}_{version}_{arch}.deb"
        run(
            ["dpkg-deb", "--root-owner-group", "-Zxz", f"-z{xz_level}", "--build", stage, deb],
            "dpkg-deb",
        )
    return BuildResult(deb, version, time.monotonic() - started)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Build the numa-agent .deb.")
    parser.add_argument("--out", default="dist", help="directory for the .deb (default dist)")
    parser.add_argument(
        "--python",
        default=DEFAULT_PYTHON,
        help=f"the target's system interpreter the venv links to (default {DEFAULT_PYTHON})",
    )
    parser.add_argument(
        "--source", default=str(Path(__file__).resolve().parent.parent), help="the checkout"
    )
    parser.add_argument(
        "--xz-level", type=int, default=6, choices=range(10), help="compression (default 6)"
    )
    args = parser.parse_args(argv)
    try:
        result = build(Path(args.source), Path(args.out), args.python, args.xz_level)
    except BuildError as err:
        print(f"build_deb: {err}", file=sys.stderr)
        return 1
    size_mib = result.deb.stat().st_size / 2**20
    print(f"{result.deb} ({size_mib:.1f} MiB, built in {result.seconds:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
