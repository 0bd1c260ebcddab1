"""The in-memory runtime in its own process, for the relay benchmark: serves the
socket given as argument, prints "ready", stops when its stdin closes."""

from __future__ import annotations

import sys

from devtools.fake_runtime import serve_memory_runtime


def main(argv: list[str]) -> int:
    server, _ = serve_memory_runtime(argv[0], max_workers=32)
    print("ready", flush=True)
    sys.stdin.read()  # the benchmark closes our stdin to stop us
    server.stop(0)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
