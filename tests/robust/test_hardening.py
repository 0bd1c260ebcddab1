"""What the agent does not do: serve a socket others can write to, run shell
commands, or build Python objects from YAML."""

from __future__ import annotations

import ast
import grp
import os
import stat
from pathlib import Path

import pytest

from agent.affinity import ANNOTATION_AFFINITY, parse_pod_affinities
from agent.config import ConfigError, load_config_file
from tests.robust.harness import RuntimeServer, Site

ROOT = Path(__file__).resolve().parents[2]

SHELL_MODULES = {"subprocess", "pty", "commands", "popen2"}
OS_SHELL_CALLS = ("system", "popen", "exec", "spawn", "posix_spawn", "fork")
UNSAFE_YAML = {
    "load",
    "load_all",
    "full_load",
    "full_load_all",
    "unsafe_load",
    "unsafe_load_all",
    "Loader",
    "FullLoader",
    "UnsafeLoader",
    "Constructor",
    "FullConstructor",
    "UnsafeConstructor",
}


def _sources(*packages: str) -> list[tuple[str, ast.Module]]:
    """The modules of `packages` (default: the agent's, what the package installs)."""
    roots = packages or ("agent", "topology")
    files = sorted(f for root in roots for f in (ROOT / root).rglob("*.py"))
    assert len(files) > 5, files  # the walk found the code
    return [(str(f.relative_to(ROOT)), ast.parse(f.read_text(), str(f))) for f in files]


def _shell_uses(tree: ast.Module) -> list[str]:
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.split(".")[0] in SHELL_MODULES]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if module.split(".")[0] in SHELL_MODULES:
                found.append(module)
            if module == "os":
                found += [a.name for a in node.names if a.name.startswith(OS_SHELL_CALLS)]
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "os"
            and node.attr.startswith(OS_SHELL_CALLS)
        ):
            found.append(f"os.{node.attr}")
    return found


def _yaml_uses(tree: ast.Module) -> list[str]:
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("yaml"):
            found += [a.name for a in node.names if a.name in UNSAFE_YAML]
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "yaml"
            and node.attr in UNSAFE_YAML
        ):
            found.append(f"yaml.{node.attr}")
    return found


def test_the_agent_runs_no_shell_commands() -> None:
    offenders = {path: uses for path, tree in _sources() if (uses := _shell_uses(tree))}
    assert offenders == {}
    # The check itself sees what it must: the development tooling (not installed,
    # never imported by the agent) starts containerd and ctr on purpose.
    tooling = {path: _shell_uses(tree) for path, tree in _sources("devtools")}
    assert tooling["devtools/containerd.py"], tooling


def test_yaml_is_loaded_safely() -> None:
    offenders = {path: uses for path, tree in _sources() if (uses := _yaml_uses(tree))}
    assert offenders == {}
    assert _yaml_uses(ast.parse("import yaml\nyaml.load(x, Loader=yaml.Loader)")) == [
        "yaml.load",
        "yaml.Loader",
    ]


PAYLOAD = "!!python/object/apply:os.system ['touch {marker}']"


def test_python_tags_in_yaml_build_nothing(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    config = tmp_path / "config.yaml"
    config.write_text(f"log_level: {PAYLOAD.format(marker=marker)}\n")
    with pytest.raises(ConfigError):
        load_config_file(config)
    annotation = f"app: {PAYLOAD.format(marker=marker)}"
    parsed = parse_pod_affinities({ANNOTATION_AFFINITY: annotation})
    with pytest.raises(Exception, match="python/object"):
        parsed.rules_for("app")
    assert not marker.exists()


def _a_group() -> grp.struct_group:
    """A real group other than the caller's primary one that it may chown to."""
    if os.geteuid() == 0:
        return grp.getgrnam("daemon")
    others = [g for g in os.getgroups() if g != os.getegid()]
    assert others, "run as root or as a user with a supplementary group"
    return grp.getgrgid(others[0])


def test_socket_mode_owner_and_group(site: Site, runtime_server: RuntimeServer) -> None:
    group = _a_group()
    site.config_text = f"reserved_cpus: '0'\nsocket_group: {group.gr_name}\n"
    agent = site.start(runtime_server.endpoint)
    try:
        st = site.listen.stat()
        assert stat.S_ISSOCK(st.st_mode)
        assert stat.S_IMODE(st.st_mode) == 0o660
        assert st.st_uid == os.geteuid()  # root when run as a service
        assert st.st_gid == group.gr_gid, (st.st_gid, group)
    finally:
        assert agent.stop()[0] == 0
