"""Policy calls as the CRI sees them: refusals mapped to gRPC codes, decisions
logged and reported, and every call timed for the metrics."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Protocol

import grpc

from agent.policy.policy import (
    Decision,
    InvalidRequest,
    PlacementError,
    ResourceExhausted,
    RuleUnsatisfied,
)
from agent.relay.hooks import HookAbort
from agent.workload import ContainerInfo

# Placements are the node agent's log lines: kept under its name (log filters use it).
log = logging.getLogger("agent.node.agent")

OnDecision = Callable[[ContainerInfo, Decision], None]


class PlacementObserver(Protocol):
    """Told of every policy call and refusal (metrics); called with no lock held
    that matters for latency, and must be quick."""

    def decided(self, seconds: float) -> None: ...

    def refused(self, reason: str) -> None: ...  # "invalid_argument", "resource_exhausted", ...


class Decider:
    def __init__(
        self, observer: PlacementObserver | None = None, on_decision: OnDecision | None = None
    ) -> None:
        self._observer = observer
        self._on_decision = on_decision

    def decide(self, info: ContainerInfo, place: Callable[[], Decision]) -> Decision:
        """Run a policy call (decision lock held), mapping refusals to gRPC codes."""
        start = time.perf_counter()
        try:
            return place()
        except ResourceExhausted as err:
            raise self.refusal(grpc.StatusCode.RESOURCE_EXHAUSTED, info, err) from err
        except RuleUnsatisfied as err:
            raise self.refusal(grpc.StatusCode.FAILED_PRECONDITION, info, err) from err
        except InvalidRequest as err:
            raise self.refusal(grpc.StatusCode.INVALID_ARGUMENT, info, err) from err
        except PlacementError as err:
            raise self.refusal(grpc.StatusCode.INTERNAL, info, err) from err
        finally:
            if self._observer is not None:
                self._observer.decided(time.perf_counter() - start)

    def refusal(self, code: grpc.StatusCode, info: ContainerInfo, err: Exception) -> HookAbort:
        if self._observer is not None:
            self._observer.refused(code.name.lower())
        return HookAbort(code, f"cannot place {info.who}: {err}")

    def report(self, info: ContainerInfo, decision: Decision, what: str) -> None:
        """A decision took effect: log it (fields for JSON logs), then tell on_decision."""
        log.info(
            "%s %s in %s on cpus %s",
            what,
            info.who,
            decision.pool,
            decision.cpus or "-",
            extra={
                "pod": f"{info.namespace}/{info.pod.name}",
                "container": info.name,
                "container_id": decision.key,
                "pool": decision.pool,
                "cpuset": str(decision.cpus),
                "mems": str(decision.mems),
                "exclusive": decision.exclusive,
                "score": decision.score,
            },
        )
        if log.isEnabledFor(logging.DEBUG):
            log.debug(
                "scoring of %s:\n%s",
                info.who,
                decision.explanation,
                extra={"container_id": decision.key, "pool": decision.pool},
            )
        if self._on_decision is not None:
            self._on_decision(info, decision)
