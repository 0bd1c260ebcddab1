"""The README's install instructions name the files, flags and paths that exist."""

from __future__ import annotations

import shlex

from agent import __version__
from agent.config import AgentConfig
from tests.packaging.helpers import ROOT, parse_unit, single
from tests.packaging.readme import install_section, packaged_paths

SECTION = install_section()
DROPIN_TEXT = (ROOT / "systemd/kubelet-numa-agent.conf").read_text()


def test_the_package_name_is_what_make_deb_builds() -> None:
    # build_deb names it numa-agent_<agent.__version__>_<dpkg arch>.
    assert f"./dist/numa-agent_{__version__}_amd64.deb" in SECTION


def test_kubelet_flags_are_the_dropins() -> None:
    (assignment,) = shlex.split(single(parse_unit(DROPIN_TEXT), "Service", "Environment"))
    flags = assignment.partition("=")[2]
    assert " ".join(SECTION.split()).count(flags) == 1
    assert AgentConfig().listen in flags


def test_dropin_is_installed_under_the_name_it_documents() -> None:
    target = "/etc/systemd/system/kubelet.service.d/20-numa-agent.conf"
    assert target in DROPIN_TEXT
    assert SECTION.count(target) == 2  # put in place, and removed to turn it off


def test_socket_and_config_paths_are_the_defaults() -> None:
    assert "/var/run/numa-agent/numa-agent.sock" in AgentConfig().listen
    assert f"`{AgentConfig().listen.removeprefix('unix://')}`" in SECTION
    assert {"/etc/numa-agent/config.yaml", "/opt/numa-agent"} <= packaged_paths(SECTION)
