"""Keep every CPU busy while a command runs: `python -m devtools.busy -- CMD ...`.

One busy-looping process per CPU, at normal priority, so that the command competes
for every CPU the way tests do on a loaded CI machine. The burners are stopped
whatever way the command ends (its failure, Ctrl-C, a signal to this process), and
the command's exit status is this one's. `make test-stress` runs the suite under it.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from types import FrameType


def _burn() -> None:
    # Die with the parent even if it is killed outright (SIGKILL skips its cleanup).
    parent = os.getppid()
    while True:
        for _ in range(1_000_000):
            pass
        if os.getppid() != parent:
            return


def _stop(burners: Sequence[multiprocessing.Process]) -> None:
    for burner in burners:
        if burner.is_alive():
            burner.kill()
    for burner in burners:
        burner.join(5)


def run_busy(command: Sequence[str], cpus: int) -> int:
    """Run `command` with `cpus` busy loops beside it; its exit status."""
    burners = [
        multiprocessing.Process(target=_burn, name=f"busy-{i}", daemon=True) for i in range(cpus)
    ]

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        raise SystemExit(128 + signum)

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        for burner in burners:
            burner.start()
        print(f"busy: {cpus} busy loops (pids {[b.pid for b in burners]})", flush=True)
        return subprocess.call(list(command))
    finally:
        _stop(burners)
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m devtools.busy", description=__doc__)
    parser.add_argument(
        "--cpus",
        type=int,
        default=os.cpu_count() or 1,
        help="busy loops to run (default: one per CPU, %(default)s here)",
    )
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the command, after --")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command given (python -m devtools.busy -- CMD ...)")
    if args.cpus < 1:
        parser.error(f"--cpus must be at least 1, got {args.cpus}")
    try:
        return run_busy(command, args.cpus)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
