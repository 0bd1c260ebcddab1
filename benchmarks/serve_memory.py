"""The in-memory runtime in its own process, for the relay benchmarks and tests that
pause it (SIGSTOP): serves the socket given as argument with MAX_WORKERS threads
(default 32), prints "ready", stops when its stdin closes."""

from __future__ import annotations

import sys

from devtools.fake_runtime import serve_memory_runtime


def main(argv: list[str]) -> int:
    workers = int(argv[1]) if len(argv) > 1 else 32
    server, _ = serve_memory_runtime(argv[0], max_workers=workers)
    print("ready", flush=True)
    sys.stdin.read()  # the benchmark closes our stdin to stop us
    server.stop(0)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
