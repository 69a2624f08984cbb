"""A real full filesystem for the tests of what a full disk does to a recording.

:func:`small_filesystem` mounts a tmpfs of a few KiB (it needs root, or CAP_SYS_ADMIN, and the
test is skipped without it). A recording onto it fills it within a second and then gets
``ENOSPC`` from the kernel, mid-frame, as it would on a real disk. ``/dev/full`` (``ENOSPC`` on
every write) and a file-size limit (``RLIMIT_FSIZE``: ``EFBIG`` past the limit) need no privilege.
"""

from __future__ import annotations

import contextlib
import resource
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

DEV_FULL = Path("/dev/full")


@contextlib.contextmanager
def small_filesystem(where: Path, kib: int = 64) -> Iterator[Path]:
    """A fresh tmpfs of ``kib`` KiB mounted at ``where``/small (mode 0755), unmounted after."""
    mount = where / "small"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={kib}k,mode=0755", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here (needs root): {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True, check=False)


def file_size_limit(limit: int) -> Callable[[], None]:
    """A ``preexec_fn`` that limits the size of any file the child writes to ``limit`` bytes
    (Python ignores ``SIGXFSZ``, so a write past it fails with ``EFBIG``)."""

    def limit_files() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return limit_files
