"""Method names the relay has never heard of: still relayed, but they share one
handler and one `other` metrics label, so callers inventing names cannot make
the agent's memory or its /metrics page grow without bound."""

from __future__ import annotations

import grpc
import pytest
from prometheus_client import generate_latest

from agent.observe.metrics import AgentMetrics, method_label
from agent.relay import methods
from agent.relay.server import RelayServer
from tests.relay.conftest import EchoRuntime

RT = "/runtime.v1.RuntimeService/"
IMG = "/runtime.v1.ImageService/"
NAMES = 500


@pytest.mark.parametrize(
    ("method", "label"),
    [
        (RT + "Version", "RuntimeService/Version"),
        (RT + "GetContainerEvents", "RuntimeService/GetContainerEvents"),
        (RT + "UpdatePodSandboxResources", "RuntimeService/UpdatePodSandboxResources"),
        (IMG + "PullImage", "ImageService/PullImage"),
        (RT + "NotYetInvented", "other"),
        ("/runtime.v2.RuntimeService/Version", "other"),  # another API version
        ("/grpc.health.v1.Health/Check", "other"),
        ("/" + "x" * 5000, "other"),
        ("", "other"),
    ],
)
def test_method_label(method: str, label: str) -> None:
    assert method_label(method) == label


def test_the_known_methods_are_the_cri_list() -> None:
    # shared/cri-wire-facts.md: 31 RuntimeService and 5 ImageService unary methods,
    # 7 server-streaming ones.
    assert len(methods.KNOWN_METHODS) == 31 + 5 + 7
    assert methods.STREAMING_METHODS < methods.KNOWN_METHODS
    assert all(m.startswith((RT, IMG)) for m in methods.KNOWN_METHODS)


def test_unknown_methods_are_relayed_through_one_bounded_handler(
    echo_relay: tuple[EchoRuntime, RelayServer, grpc.Channel],
) -> None:
    echo, relay, channel = echo_relay
    channel.unary_unary(RT + "Version")(b"v", timeout=5)
    for i in range(NAMES):
        method = f"{RT}Invented{i}"
        assert channel.unary_unary(method)(b"\x0a\x01x", timeout=5) == b"\x0a\x01x"
        assert echo.received[-1][0] == method  # relayed under its own name
    channel.unary_unary(RT + "Version")(b"v", timeout=5)
    assert relay.cached_methods() <= {RT + "Version"}
    assert relay.backend.cached_methods() <= {RT + "Version"}


def test_unknown_methods_share_one_metrics_label() -> None:
    metrics = AgentMetrics()
    metrics.observe_call(RT + "Version", grpc.StatusCode.OK, 0.001)
    small = len(generate_latest(metrics.registry))
    for i in range(NAMES):
        metrics.observe_call(f"{RT}Invented{i}", grpc.StatusCode.UNIMPLEMENTED, 0.001)
        metrics.observe_call(f"/evil.{i}/x", grpc.StatusCode.OK, 0.001)
    text = generate_latest(metrics.registry).decode()
    assert "Invented" not in text and "evil" not in text
    count = "numa_agent_cri_request_duration_seconds_count"
    assert f'{count}{{code="UNIMPLEMENTED",method="other"}} {NAMES}.0' in text
    assert f'{count}{{code="OK",method="other"}} {NAMES}.0' in text
    assert f'{count}{{code="OK",method="RuntimeService/Version"}} 1.0' in text
    # Two more label sets (other/OK, other/UNIMPLEMENTED), not a thousand.
    assert len(text) < 4 * small, (len(text), small)
