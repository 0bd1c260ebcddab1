"""CRI endpoint spellings: what kubelet and containerd accept, and what is refused by name."""

from __future__ import annotations

import pytest

from agent.relay.endpoint import Endpoint, EndpointError


@pytest.mark.parametrize(
    ("text", "path", "target"),
    [
        ("unix:///run/containerd/containerd.sock", "/run/containerd/containerd.sock", None),
        ("/run/containerd/containerd.sock", "/run/containerd/containerd.sock", None),
        (" unix:///a/b.sock ", "/a/b.sock", "unix:///a/b.sock"),
    ],
)
def test_endpoint_spellings(text: str, path: str, target: str | None) -> None:
    ep = Endpoint.parse(text)
    assert str(ep.path) == path
    assert ep.target == (target or f"unix://{path}")


@pytest.mark.parametrize(
    "text", ["tcp://127.0.0.1:1234", "unix://relative.sock", "", "npipe:////./pipe/x"]
)
def test_bad_endpoints_are_refused_by_name(text: str) -> None:
    with pytest.raises(EndpointError) as err:
        Endpoint.parse(text)
    assert repr(text.strip()) in str(err.value) or repr(text) in str(err.value)
