"""Where short-lived scratch files go: memory-backed /dev/shm when it is writable.

Simulated state files and fake sysfs trees are many small files written once
and read once; /dev/shm makes that several times faster than a disk-backed /tmp.
"""

from __future__ import annotations

import os

# None: tempfile's default directory.
FAST_TMP = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
