"""The daemon's NFD feature file: written at start and on reload, only when its text changes.

NFD re-reads the directory every minute and relabels the node from what it
finds, so the file is replaced atomically (a dot file NFD ignores, renamed over
it) and left alone when nothing changed. A failure to write is logged and never
stops the agent: kubelet depends on the CRI socket, not on labels.
"""

from __future__ import annotations

import errno
import logging
import os
from pathlib import Path

from agent.config import AgentConfig
from agent.labels.nfd import feature_file_text
from agent.labels.node import PHYSICAL_HOST, node_labels
from agent.labels.sources import LabelSourceError, current_node_labels
from agent.labels.virtual import is_virtual
from topology.dmi import Dmi
from topology.tree import Machine

log = logging.getLogger(__name__)

# The AgentConfig keys that shape the file; a reload applies them at once.
LABEL_KEYS = ("feature_file", "physical_host_id", "label_salt")

FILE_MODE = 0o644  # NFD's worker may not run as root
DIR_MODE = 0o755


def _reason(err: OSError) -> str:
    """The OS's reason, with the path it concerns: "Not a directory (/etc/x)"."""
    if err.strerror is None:
        return str(err)
    return f"{err.strerror} ({err.filename})" if err.filename else err.strerror


def _make_dirs(directory: Path) -> None:
    """Create `directory` and missing parents readable by all, whatever the umask."""
    missing: list[Path] = []
    for parent in (directory, *directory.parents):
        if parent.is_dir():
            break
        if parent.exists():
            raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(parent))
        missing.append(parent)
    for path in reversed(missing):
        path.mkdir(exist_ok=True)
        os.chmod(path, DIR_MODE)


def write_if_changed(path: Path, text: str) -> bool:
    """Atomically make `path` hold `text`; False (and no write) when it already does."""
    try:
        if path.read_text() == text:
            return False
    except (OSError, UnicodeDecodeError):
        pass  # missing or unreadable: write it
    _make_dirs(path.parent)
    tmp = path.with_name(f".{path.name}.tmp")  # a dot file: NFD skips it
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, FILE_MODE)
        with os.fdopen(fd, "w") as out:
            os.fchmod(fd, FILE_MODE)  # the unit's UMask would leave it unreadable to others
            out.write(text)
            out.flush()
            os.fsync(fd)
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    return True


class FeatureFile:
    """Keeps the configured feature file equal to the node's labels.

    The machine and DMI are read once at start (neither changes while the agent
    runs); the host id file and the three LABEL_KEYS are taken anew by `update`.
    """

    def __init__(self, machine: Machine, dmi: Dmi) -> None:
        self._machine = machine
        self._dmi = dmi
        self._path = ""  # the file this agent wrote (or found right), "" for none

    def labels(self, config: AgentConfig) -> dict[str, str]:
        try:
            computed = current_node_labels(
                self._machine,
                self._dmi,
                physical_host_id=config.physical_host_id,
                label_salt=config.label_salt,
            )
        except LabelSourceError as err:
            # Better no label than one from another source than the provider chose.
            log.error("%s; the node labels go out without %s", err, PHYSICAL_HOST)
            return node_labels(self._machine, virtual=is_virtual(self._dmi), physical_host=None)
        log.debug("%s", computed.note)
        return computed.labels

    def update(self, config: AgentConfig) -> None:
        """Write the file if its text changed; a moved or disabled file's old copy goes."""
        old, new = self._path, config.feature_file
        if old and old != new:
            try:
                Path(old).unlink(missing_ok=True)
                log.info("feature file %s removed (feature_file is now %r)", old, new)
            except OSError as err:
                log.error("cannot remove the old feature file %s: %s", old, _reason(err))
            self._path = ""
        if not new:
            return
        labels = self.labels(config)
        try:
            written = write_if_changed(Path(new), feature_file_text(labels))
        except OSError as err:
            log.error(
                "cannot write the feature file %s: %s; the node's labels are not published "
                "(is its directory writable? see docs/cluster-labels.md)",
                new,
                _reason(err),
            )
            return
        self._path = new
        if written:
            log.info("feature file %s written: %d labels", new, len(labels))
        else:
            log.debug("feature file %s unchanged", new)
