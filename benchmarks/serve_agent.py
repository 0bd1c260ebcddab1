"""The agent as `numa-agent run` runs it (agent.daemon), in its own process, for the
relay benchmarks: argv is RUNTIME_ENDPOINT LISTEN STATE_DIR SYSFS_ROOT [METRICS_ADDRESS];
SIGTERM stops it. It skips the CLI parser so that nothing but the daemon is measured."""

from __future__ import annotations

import sys

from agent.config import config_from_mapping
from agent.daemon import Daemon, serve
from agent.logs import setup_logging


def main(argv: list[str]) -> int:
    runtime, listen, state_dir, sysfs_root, *rest = argv
    config = config_from_mapping(
        {
            "runtime_endpoint": runtime,
            "listen": listen,
            "state_dir": state_dir,
            "sysfs_root": sysfs_root,
            "log_level": "warning",
            "feature_file": "",  # a benchmark publishes no node labels
            "metrics_address": rest[0] if rest else "",
        }
    )
    setup_logging(config.log_level, config.log_format)
    return serve(Daemon(config))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
