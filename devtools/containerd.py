"""A private containerd for end-to-end tests, `make demo` and the benchmarks: own root,
state and socket. Development only: the package does not install it.

Owns writing its config, starting it, waiting until CRI answers, importing the busybox image,
and stopping it without leaking containers, shims or mounts. Its only trace outside its base
dir: containerd 1.6 shims put their sockets in /run/containerd/s (hard-coded), removed on exit.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from agent.node.kernel import PROC, read_allowed
from agent.node.runtime_access import pid_from_info
from devtools.criclient import CRIClient, CRIError
from devtools.oci_image import BUSYBOX_IMAGE, ImageBuildError, build_busybox_image, find_busybox
from proto import cri_pb2

K8S_NAMESPACE = "k8s.io"  # the containerd namespace the CRI plugin works in
BINARIES = ("containerd", "containerd-shim-runc-v2", "ctr", "runc")
# containerd 2 (NRI on) is not packaged here: a directory holding the four binaries
# built from source (containerd, its runc shim, ctr, a current runc). Unset: the
# containerd 2 tests skip, saying so.
CONTAINERD2_ENV = "NUMA_AGENT_CONTAINERD2_DIR"


def containerd2_dir() -> Path | None:
    value = os.environ.get(CONTAINERD2_ENV, "")
    return Path(value) if value else None


class ContainerdError(RuntimeError):
    """Base for failures of the private containerd."""


class ContainerdUnavailable(ContainerdError):
    """This host cannot run containerd (not root, binaries missing)."""


class ContainerdStartError(ContainerdError):
    """containerd was started but did not become ready; the message holds its log tail."""


class CtrError(ContainerdError):
    """A `ctr` command failed."""


def missing_prerequisites(bin_dir: Path | None = None) -> list[str]:
    """What stops containerd from running pods here, as sentences a person can act on;
    `bin_dir`: containerd 2's binaries are there instead of on PATH."""
    missing = []
    if os.geteuid() != 0:
        missing.append("not running as root (containerd and runc need root)")
    if bin_dir is None:
        absent = [binary for binary in BINARIES if shutil.which(binary) is None]
        if absent:
            missing.append(f"{', '.join(absent)} not on PATH (apt-get install containerd runc)")
    else:
        absent = [b for b in BINARIES if not os.access(bin_dir / b, os.X_OK)]
        if absent:
            missing.append(f"{', '.join(absent)} not in {bin_dir} (build them: docs/install.md)")
    try:
        find_busybox()
    except ImageBuildError as err:
        missing.append(str(err))
    return missing


@dataclass(frozen=True, slots=True)
class ContainerdPaths:
    """Where one private containerd keeps everything; all under `base`."""

    base: Path

    @property
    def root(self) -> Path:
        return self.base / "root"

    @property
    def state(self) -> Path:
        return self.base / "state"

    @property
    def socket(self) -> Path:
        return self.base / "containerd.sock"

    @property
    def config(self) -> Path:
        return self.base / "config.toml"

    @property
    def log(self) -> Path:
        return self.base / "containerd.log"

    @property
    def cni_conf(self) -> Path:
        return self.base / "cni"

    @property
    def opt(self) -> Path:
        return self.base / "opt"

    @property
    def image_tar(self) -> Path:
        return self.base / "busybox-oci.tar"

    @property
    def nri_socket(self) -> Path:
        return self.base / "nri.sock"

    @property
    def nri_plugins(self) -> Path:
        return self.base / "nri-plugins"  # none: keeps the host's /opt/nri/plugins out


# A config table: its header and its lines, both templates over `_config_values`.
_Table = tuple[str, tuple[str, ...]]

# What both CRI plugins need on this VM, whichever table holds it.
_CRI_SANDBOX_LINES = (
    "restrict_oom_score_adj = true",
    "disable_apparmor = true",
    "enable_selinux = false",
)
_STREAM_SERVER_LINES = ('stream_server_address = "127.0.0.1"', 'stream_server_port = "0"')
_NRI = "plugins.'io.containerd.nri.v1.nri'"


@dataclass(frozen=True, slots=True)
class _ConfigDialect:
    """What differs between containerd 1.6's config (version 2) and containerd 2's
    (version 3) for the same private instance; `render_config` writes the rest once.
    Lines are templates over `_config_values` ({q}: the quote around plugin names)."""

    version: int
    quote: str
    head_comment: tuple[str, ...]  # above disabled_plugins
    disabled_plugins: tuple[str, ...]
    runtime_plugin: str  # the CRI plugin part that holds the runtimes and CNI
    runtime_lines: tuple[str, ...]
    containerd_lines: tuple[str, ...]
    runc_option_lines: tuple[str, ...]
    cni_lines: tuple[str, ...]
    before_runtime: tuple[_Table, ...] = ()
    after_runtime: tuple[_Table, ...] = ()


_CONTAINERD_1_6 = _ConfigDialect(
    version=2,
    quote='"',
    head_comment=(
        "# Ignore plugins that would reach outside the base dir or need hardware this VM lacks.",
    ),
    disabled_plugins=(
        "io.containerd.snapshotter.v1.btrfs",
        "io.containerd.snapshotter.v1.zfs",
        "io.containerd.snapshotter.v1.devmapper",
        "io.containerd.snapshotter.v1.aufs",
        "io.containerd.tracing.processor.v1.otlp",
        "io.containerd.internal.v1.tracing",
    ),
    runtime_plugin="io.containerd.grpc.v1.cri",
    runtime_lines=(
        'sandbox_image = "{sandbox_image}"',
        "# The VM refuses to lower oom_score_adj; without this RunPodSandbox fails with",
        '# "failed to update /proc/self/oom_score_adj: Permission denied".',
        *_CRI_SANDBOX_LINES,
        *_STREAM_SERVER_LINES,
    ),
    containerd_lines=('snapshotter = "{snapshotter}"', 'default_runtime_name = "runc"'),
    runc_option_lines=(
        "SystemdCgroup = false",
        "# runc's own state, which would default to /run/containerd/runc.",
        'Root = "{state}/runc"',
    ),
    cni_lines=('conf_dir = "{cni_conf}"',),
)

_CONTAINERD_2 = _ConfigDialect(
    version=3,
    quote="'",
    head_comment=(),
    disabled_plugins=(
        "io.containerd.snapshotter.v1.btrfs",
        "io.containerd.snapshotter.v1.zfs",
        "io.containerd.snapshotter.v1.devmapper",
        "io.containerd.tracing.processor.v1.otlp",
        "io.containerd.internal.v1.tracing",
    ),
    runtime_plugin="io.containerd.cri.v1.runtime",
    runtime_lines=(
        "# The VM refuses to lower oom_score_adj (see the version 2 config).",
        *_CRI_SANDBOX_LINES,
    ),
    containerd_lines=('default_runtime_name = "runc"',),
    runc_option_lines=("SystemdCgroup = false", 'BinaryName = "{runc}"', 'Root = "{state}/runc"'),
    cni_lines=(
        'conf_dir = "{cni_conf}"',
        "# Debian's containernetworking-plugins, for pods not on the host network.",
        'bin_dirs = ["/usr/lib/cni", "/opt/cni/bin"]',
    ),
    before_runtime=(
        ("plugins.'io.containerd.cri.v1.images'", ('snapshotter = "{snapshotter}"',)),
        ("plugins.'io.containerd.cri.v1.images'.pinned_images", ('sandbox = "{sandbox_image}"',)),
        ("plugins.'io.containerd.cri.v1.images'.registry", ('config_path = "{registry}"',)),
    ),
    after_runtime=(
        ("plugins.'io.containerd.grpc.v1.cri'", _STREAM_SERVER_LINES),
        (
            _NRI,
            (
                "disable = false",
                'socket_path = "{nri_socket}"',
                'plugin_path = "{nri_plugins}"',
                'plugin_config_path = "{nri_plugins}"',
                'plugin_registration_timeout = "5s"',
                'plugin_request_timeout = "2s"',
            ),
        ),
    ),
)


def _toml_strings(items: tuple[str, ...], per_line: int = 2) -> str:
    """A TOML array of strings, `per_line` to a line (continuations indented)."""
    rows = [
        ", ".join(f'"{item}"' for item in items[i : i + per_line])
        for i in range(0, len(items), per_line)
    ]
    return "[" + ",\n  ".join(rows) + "]"


def render_config(
    paths: ContainerdPaths,
    *,
    bin_dir: Path | None = None,
    snapshotter: str = "overlayfs",
    sandbox_image: str = BUSYBOX_IMAGE,
    required_plugins: tuple[str, ...] = (),
    registry_config_path: Path | None = None,
) -> str:
    """The config of a private instance with the CRI plugin: containerd 1.6's
    (version 2) when `bin_dir` is None, else that of the containerd 2 build in
    `bin_dir` (version 3, NRI on). `required_plugins`: NRI's default validator
    fails creations without them; `registry_config_path`: hosts.toml per registry.
    Both are containerd 2 settings only."""
    dialect = _CONTAINERD_1_6 if bin_dir is None else _CONTAINERD_2
    if bin_dir is None and (required_plugins or registry_config_path is not None):
        raise ValueError(
            "required NRI plugins and a registry config path need containerd 2 (a bin_dir); "
            f"got required_plugins={required_plugins!r}, "
            f"registry_config_path={registry_config_path}"
        )
    values = {
        "q": dialect.quote,
        "version": str(dialect.version),
        "disabled_plugins": _toml_strings(dialect.disabled_plugins),
        "required_plugins": ", ".join(f'"{name}"' for name in required_plugins),
        "root": str(paths.root),
        "state": str(paths.state),
        "socket": str(paths.socket),
        "opt": str(paths.opt),
        "cni_conf": str(paths.cni_conf),
        "nri_socket": str(paths.nri_socket),
        "nri_plugins": str(paths.nri_plugins),
        "snapshotter": snapshotter,
        "sandbox_image": sandbox_image,
        "runc": str(bin_dir / "runc") if bin_dir is not None else "",
        "registry": str(registry_config_path or ""),
    }
    runtime = "plugins.{q}" + dialect.runtime_plugin + "{q}"
    tables: list[_Table] = [
        ("grpc", ('address = "{socket}"',)),
        ("ttrpc", ('address = "{socket}.ttrpc"',)),
        ("debug", ('address = ""',)),
        ("metrics", ('address = ""',)),
        ("plugins.{q}io.containerd.internal.v1.opt{q}", ('path = "{opt}"',)),
        *dialect.before_runtime,
        (runtime, dialect.runtime_lines),
        (runtime + ".containerd", dialect.containerd_lines),
        (runtime + ".containerd.runtimes.runc", ('runtime_type = "io.containerd.runc.v2"',)),
        (runtime + ".containerd.runtimes.runc.options", dialect.runc_option_lines),
        (runtime + ".cni", dialect.cni_lines),
        *dialect.after_runtime,
    ]
    if required_plugins:  # containerd 2 only, checked above
        tables.append(
            (
                _NRI + ".default_validator",
                ("enable = true", "required_plugins = [{required_plugins}]"),
            )
        )
    head = (
        "version = {version}",
        'root = "{root}"',
        'state = "{state}"',
        *dialect.head_comment,
        "disabled_plugins = {disabled_plugins}",
    )
    # Templates are filled one by one: a value's own braces are never read as a field.
    text = "".join(template.format_map(values) + "\n" for template in head)
    for header, lines in tables:
        text += "\n[" + header.format_map(values) + "]\n"
        text += "".join("  " + template.format_map(values) + "\n" for template in lines)
    return text


def overlay_works(scratch: Path) -> bool:
    """Whether an overlay mount works on the filesystem holding `scratch` (not in all VMs)."""
    dirs = {name: scratch / name for name in ("lower", "upper", "work", "merged")}
    for d in dirs.values():
        d.mkdir(parents=True, exist_ok=True)
    opts = f"lowerdir={dirs['lower']},upperdir={dirs['upper']},workdir={dirs['work']}"
    try:
        mounted = subprocess.run(
            ["mount", "-t", "overlay", "overlay", "-o", opts, str(dirs["merged"])],
            capture_output=True,
            check=False,
        )
        if mounted.returncode == 0:
            subprocess.run(["umount", str(dirs["merged"])], capture_output=True, check=True)
        return mounted.returncode == 0
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


_OCTAL_ESCAPE = re.compile(r"\\([0-7]{3})")


def mounts_under(base: Path, mountinfo: str) -> list[Path]:
    """Mount points at or below `base` in /proc/self/mountinfo text, deepest first."""
    found = []
    prefix = str(base).rstrip("/") + "/"
    for line in mountinfo.splitlines():
        fields = line.split()
        if len(fields) < 5:
            continue
        # mountinfo escapes space, tab, newline and backslash as octal.
        point = _OCTAL_ESCAPE.sub(lambda m: chr(int(m.group(1), 8)), fields[4])
        if point == prefix[:-1] or point.startswith(prefix):
            found.append(Path(point))
    return sorted(set(found), key=lambda p: len(p.parts), reverse=True)


@dataclass(frozen=True, slots=True)
class ProcStatus:
    """What the kernel enforces for one process, from /proc/<pid>/status."""

    pid: int
    cpus_allowed: str
    mems_allowed: str


def read_proc_status(pid: int, proc: Path = PROC) -> ProcStatus:
    """The agent's own reading (agent.node.kernel), in the kernel's list form; an
    error naming the file when it cannot be read."""
    allowed = read_allowed(pid, proc)
    if allowed is None:
        raise ContainerdError(
            f"cannot read Cpus_allowed_list and Mems_allowed_list from {proc / str(pid) / 'status'}"
        )
    return ProcStatus(pid, str(allowed.cpus), str(allowed.mems))


def pid_from_status(status: cri_pb2.ContainerStatusResponse) -> int:
    """The host pid of a running container's init, from a verbose ContainerStatus answer."""
    container_id = status.status.id
    if "info" not in status.info:
        raise ContainerdError(f"ContainerStatus of {container_id} has no verbose info")
    pid = pid_from_info(status.info)
    if pid is None:
        raise ContainerdError(f"container {container_id} has no running process (no pid)")
    return pid


def container_pid(client: CRIClient, container_id: str) -> int:
    return pid_from_status(client.container_status(container_id, verbose=True))


def containerd_command(config: Path, binary: str = "containerd") -> list[str]:
    command = [binary, "--config", str(config), "--log-level", "info"]
    # If the process that started containerd dies without stopping it (a killed test run),
    # containerd gets SIGTERM instead of running on unowned. setpriv (util-linux) sets that
    # without a preexec_fn, which is unsafe once gRPC threads exist.
    if shutil.which("setpriv"):
        return ["setpriv", "--pdeathsig", "TERM", "--", *command]
    return command


class PrivateContainerd:
    """One containerd subprocess with its own dirs and socket, and our busybox image imported."""

    def __init__(
        self,
        base: Path,
        *,
        snapshotter: str | None = None,
        bin_dir: Path | None = None,
        nri_required: tuple[str, ...] = (),
        registry_config_path: Path | None = None,
    ) -> None:
        """`bin_dir`: a containerd 2 build there (config version 3, NRI on at
        paths.nri_socket; `nri_required`: NRI plugins it will not create a
        container without); None: containerd 1.6 from PATH."""
        self.paths = ContainerdPaths(base)
        self.bin_dir = bin_dir
        self.nri_required = nri_required
        self.registry_config_path = registry_config_path  # hosts.toml per registry
        self.snapshotter = snapshotter
        self.image = BUSYBOX_IMAGE
        self.started_in = 0.0  # seconds from exec to CRI answering with the image present
        self._proc: subprocess.Popen[bytes] | None = None
        self._client: CRIClient | None = None

    @property
    def socket(self) -> Path:
        return self.paths.socket

    @property
    def endpoint(self) -> str:
        return f"unix://{self.paths.socket}"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    @property
    def pod_log_root(self) -> Path:
        """Pass as kubelet_pod_config(log_root=...): containerd writes container logs there,
        not in the host's /var/log/pods."""
        return self.paths.base / "pod-logs"

    def client(self) -> CRIClient:
        """A CRI client straight to this containerd (not through the agent)."""
        if self._client is None:
            self._client = CRIClient(self.endpoint)
        return self._client

    def pid_of(self, container_id: str) -> int:
        return container_pid(self.client(), container_id)

    def proc_status(self, container_id: str) -> ProcStatus:
        """What the kernel enforces for the container's init process right now."""
        return read_proc_status(self.pid_of(container_id))

    def start(self, timeout: float = 30.0) -> None:
        if self._proc is not None:
            raise ContainerdError("this containerd is already started")
        missing = missing_prerequisites(self.bin_dir)
        if missing:
            raise ContainerdUnavailable("cannot run containerd here: " + "; ".join(missing))
        began = time.monotonic()
        self.paths.base.mkdir(parents=True, exist_ok=True)
        for d in (self.paths.root, self.paths.state, self.paths.cni_conf, self.paths.opt):
            d.mkdir(parents=True, exist_ok=True)
        if self.bin_dir is not None:
            self.paths.nri_plugins.mkdir(exist_ok=True)
        if self.snapshotter is None:
            scratch = self.paths.base / "overlay-check"
            self.snapshotter = "overlayfs" if overlay_works(scratch) else "native"
        config = render_config(
            self.paths,
            bin_dir=self.bin_dir,
            snapshotter=self.snapshotter,
            required_plugins=self.nri_required,
            registry_config_path=self.registry_config_path,
        )
        self.paths.config.write_text(config)
        build_busybox_image(self.paths.image_tar, name=self.image)
        with self.paths.log.open("ab") as log:
            self._proc = subprocess.Popen(
                containerd_command(self.paths.config, self._binary("containerd")),
                # containerd finds its shim on PATH: containerd 2's own first.
                env=self._env(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                # Own session: a Ctrl-C meant for the tests does not kill it mid-teardown.
                start_new_session=True,
            )
        try:
            self._wait_until(self._cri_answers, began + timeout, "CRI Version to answer")
            self.ctr(
                "images", "import", "--snapshotter", self.snapshotter, str(self.paths.image_tar)
            )
            # The CRI plugin learns of imported images from an event: wait until it has.
            self._wait_until(self._cri_has_image, began + timeout, f"CRI to see {self.image}")
        except BaseException:
            self.stop()
            raise
        self.started_in = time.monotonic() - began

    def _wait_until(self, ready: Callable[[], bool], deadline: float, what: str) -> None:
        delay = 0.01
        while True:
            if self._proc is not None and self._proc.poll() is not None:
                raise ContainerdStartError(
                    f"containerd exited with {self._proc.returncode} while waiting for {what}; "
                    f"log {self.paths.log}:\n{self.log_tail()}"
                )
            if ready():
                return
            if time.monotonic() >= deadline:
                raise ContainerdStartError(
                    f"timed out waiting for {what}; log {self.paths.log}:\n{self.log_tail()}"
                )
            time.sleep(delay)  # polling a condition with a deadline, not waiting blind
            delay = min(delay * 2, 0.2)

    def _cri_answers(self) -> bool:
        if not self.paths.socket.exists():
            return False
        try:
            # Short per-call deadline: an answer arrives at once when containerd is up.
            with CRIClient(self.endpoint, timeout=1) as probe:
                probe.version()
        except CRIError:
            return False
        return True

    def _cri_has_image(self) -> bool:
        return bool(self.client().image_status(self.image).HasField("image"))

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = self.paths.log.read_text(errors="replace")
        except FileNotFoundError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def _binary(self, name: str) -> str:
        return name if self.bin_dir is None else str(self.bin_dir / name)

    def _env(self) -> dict[str, str] | None:
        if self.bin_dir is None:
            return None
        return {**os.environ, "PATH": f"{self.bin_dir}:{os.environ.get('PATH', '')}"}

    def ctr(self, *args: str, timeout: float = 30.0) -> str:
        command = [
            self._binary("ctr"),
            "--address",
            str(self.paths.socket),
            "--namespace",
            K8S_NAMESPACE,
            *args,
        ]
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
        if done.returncode != 0:
            raise CtrError(f"{' '.join(command)} failed ({done.returncode}): {done.stderr.strip()}")
        return done.stdout

    def remove_all_tasks(self) -> None:
        """Kill and delete every task and container containerd still has (tests that failed
        half-way leave some); container init dies with SIGKILL, then its shim exits."""
        for task in self.ctr("tasks", "list", "--quiet").split():
            with contextlib.suppress(CtrError):
                self.ctr("tasks", "delete", "--force", task)
        for container in self.ctr("containers", "list", "--quiet").split():
            with contextlib.suppress(CtrError):
                self.ctr("containers", "delete", container)

    def stop(self, timeout: float = 15.0) -> None:
        """Stop everything this containerd started and unmount what it mounted."""
        proc, self._proc = self._proc, None
        if self._client is not None:
            self._client.close()
            self._client = None
        if proc is None:
            return
        if proc.poll() is None:
            # Best effort: if ctr fails here, the shim sweep and unmount below still run.
            with contextlib.suppress(CtrError, subprocess.TimeoutExpired):
                self.remove_all_tasks()
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self._kill_leftover_shims()
        self._unmount_all()

    def _kill_leftover_shims(self) -> None:
        # Shims outlive containerd by design; ours name our socket on their command line.
        marker = str(self.paths.socket).encode()
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if argv and argv[0].endswith(b"containerd-shim-runc-v2") and marker in argv:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(entry.name), signal.SIGKILL)

    def _unmount_all(self) -> None:
        mountinfo = Path("/proc/self/mountinfo").read_text()
        for point in mounts_under(self.paths.base, mountinfo):
            subprocess.run(["umount", "--lazy", str(point)], capture_output=True, check=False)

    def __enter__(self) -> PrivateContainerd:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


@contextlib.contextmanager
def private_containerd(
    base: Path | None = None, *, keep: bool = False
) -> Iterator[PrivateContainerd]:
    """Start a private containerd in `base` (a new temp dir by default), stop it on exit,
    and remove the dir unless `keep`."""
    # Unix socket paths are limited to 107 bytes: keep the base short.
    own = base is None
    base_dir = Path(tempfile.mkdtemp(prefix="numa-ctrd-")) if base is None else base
    env = PrivateContainerd(base_dir)
    try:
        env.start()
        yield env
    finally:
        env.stop()
        if own and not keep:
            shutil.rmtree(base_dir, ignore_errors=True)
