"""The drain's native pass: its per-record work in C, built on first use by the system's C
compiler and loaded with ctypes; :class:`~iket_tui.ring.drain.RingDrain`'s numpy code is the
reference and the fallback.

numpy makes several passes over every record of a pass (positions from stamps, the checks, the
stop found, the events gathered), and those passes alone cost several times the drain's target.
``drain_pass.c`` reads each record once instead: :meth:`NativePass.regions` finds, for each
region, the run of records its reader takes (looking at the whole region only where the warp
lapped it); :meth:`NativePass.chunks` cuts the runs into drained chunks and writes each whole,
header and events, reading each event's record once. Everything that works per warp (its
descriptor, its counts, which pieces make its chunks) stays in numpy, shared by both drains, so
they hand on the same chunks and counts.

The library is built once per process, in the drain's thread at its first pass, in at most
:data:`COMPILE_TIMEOUT_S`, into a per-user cache directory (``$XDG_CACHE_HOME/iket-tui/native``
or ``~/.cache/iket-tui/native``, mode 0700, never through a link, never another user's); its
name carries a hash of the source, the compiler (its path and ``--version``), its flags and the
machine's architecture, so a stale build is never loaded. Any failure (no compiler, a cache that
cannot be written, a bad build) leaves the numpy drain in charge, with the reason in
:func:`load`'s answer. ``IKET_TUI_NATIVE_DRAIN=0`` turns the native pass off.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import os
import platform
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Final

import numpy as np

from iket_tui.durations import duration
from iket_tui.ring.layout import DRAINED_EVENTS_PER_CHUNK, FLAG_PAYLOAD_EVERY_EVENT, HEADER_WORDS

__all__ = ["COMPILE_TIMEOUT_S", "ENV", "NativePass", "cache_directory", "load"]

ENV: Final = "IKET_TUI_NATIVE_DRAIN"
"""``0`` turns the native pass off."""
COMPILE_TIMEOUT_S: Final = 60.0
FLAGS: Final = ("-O3", "-shared", "-fPIC", "-std=c99")
SOURCE: Final = "drain_pass.c"
PER: Final = DRAINED_EVENTS_PER_CHUNK
Array = np.ndarray[Any, Any]

_I64P = ctypes.POINTER(ctypes.c_int64)
_U32P = ctypes.POINTER(ctypes.c_uint32)
_U8P = ctypes.POINTER(ctypes.c_uint8)
_lock = threading.Lock()
_loaded: tuple[NativePass | None, str] | None = None
_said = False


class NativeBuildError(Exception):
    """Why the native pass could not be built or loaded (one line)."""


@dataclass(frozen=True)
class NativePass:
    """The loaded library's two functions, called on numpy buffers."""

    library: ctypes.CDLL
    path: Path

    def regions(
        self,
        records: Array,
        before: Array | None,
        after: Array | None,
        base: Array,
        read: Array,
        count: Array,
        begun: Array,
        rows: Array | None = None,
    ) -> tuple[Array, Array, Array]:
        """For each of n regions, the records of row ``rows[i]`` (default ``i``) of ``records``
        (``uint32`` of shape (rows, cap, 4)), with its stamps before and after the copy where the
        writers write while it is read (shape (n, cap)): where its run starts, how many
        positions it takes, and the newest position it holds (see
        :func:`~iket_tui.ring.drain.RingDrain` for what each means)."""
        if not records.flags.c_contiguous or records.dtype != np.uint32 or records.ndim != 3:
            raise ValueError("records must be C-contiguous uint32 of shape (n, cap, 4)")
        n, cap = len(base), records.shape[1]
        where = np.arange(n, dtype=np.int64) if rows is None else np.ascontiguousarray(rows, dtype=np.int64)
        if len(where) != n or (n and ((where < 0).any() or (where >= records.shape[0]).any())):
            raise ValueError("a region's row lies outside the records")
        checks: list[Array | None] = []
        for stamps in (before, after):
            if stamps is None:
                checks.append(None)
                continue
            stamps = np.ascontiguousarray(stamps, dtype=np.uint32)
            if stamps.shape != (n, cap):
                raise ValueError("stamps must be one per record")
            checks.append(stamps)
        columns = [np.ascontiguousarray(a, dtype=np.int64) for a in (read, count)]
        bases = np.ascontiguousarray(base, dtype=np.uint32)
        flags = np.ascontiguousarray(begun, dtype=np.uint8)
        if any(len(c) != n for c in (columns[0], columns[1], bases, flags)):
            raise ValueError("one base, read position, count and flag per region")
        start, run, newest = (np.empty(n, dtype=np.int64) for _ in range(3))
        self.library.iket_regions(
            n,
            cap,
            _ptr(records, _U32P),
            _ptr(where, _I64P),
            None if checks[0] is None else _ptr(checks[0], _U32P),
            None if checks[1] is None else _ptr(checks[1], _U32P),
            _ptr(bases, _U32P),
            _ptr(columns[0], _I64P),
            _ptr(columns[1], _I64P),
            _ptr(flags, _U8P),
            _ptr(start, _I64P),
            _ptr(run, _I64P),
            _ptr(newest, _I64P),
        )
        return start, run, newest

    def chunks(
        self,
        records: Array,
        row: Array,
        slot: Array,
        length: Array,
        header: Array,
        first_flags: Array,
        last_flags: Array,
        empty_t: Array,
        table: Array,
        out: Array,
    ) -> bool:
        """Write the drained chunks of pieces (``length`` records from ``slot`` of row ``row`` of
        ``records``) into ``out`` (rows of ``uint32`` words, exactly as many as the pieces cut into
        chunks of :data:`~iket_tui.ring.layout.DRAINED_EVENTS_PER_CHUNK`): headers from ``table``
        (9 words per warp, row ``header``: words 3 to 7, then words 0, 1, 2 and the tail), flags,
        ``t_base`` (the first event's time, or ``empty_t`` for a chunk of none) and events.
        ``False`` where a chunk's events lie 2**32 ns or more apart (``out`` is then partly
        written)."""
        if not records.flags.c_contiguous or records.dtype != np.uint32 or records.ndim != 3:
            raise ValueError("records must be C-contiguous uint32 of shape (n, cap, 4)")
        if not out.flags.c_contiguous or out.dtype != np.uint32 or out.shape[1] < HEADER_WORDS + 2 * PER:
            raise ValueError("chunks must be C-contiguous uint32 rows")
        n, cap = records.shape[0], records.shape[1]
        columns = [np.ascontiguousarray(a, dtype=np.int64) for a in (row, slot, length, header)]
        columns += [np.ascontiguousarray(a, dtype=np.int64) for a in (first_flags, last_flags, empty_t)]
        r, s, m, h = columns[:4]
        pieces = len(r)
        if any(len(c) != pieces for c in columns) or (r < 0).any() or (r >= n).any():
            raise ValueError("a piece lies outside the copy")
        if (s < 0).any() or (m < 0).any() or (s + m > cap).any() or (h < 0).any() or (h >= len(table)).any():
            raise ValueError("a piece lies outside its region or names no warp")
        if int(np.maximum(-(-m // PER), 1).sum()) != len(out):
            raise ValueError("the chunks are not as many as the pieces make")
        identities = np.ascontiguousarray(table, dtype=np.uint32)
        if identities.ndim != 2 or identities.shape[1] != 9:
            raise ValueError("a warp's header words are 9")
        written = self.library.iket_chunks(
            _ptr(records, _U32P),
            cap,
            pieces,
            *(_ptr(c, _I64P) for c in columns),
            _ptr(identities, _U32P),
            _ptr(out, _U32P),
            out.shape[1],
            HEADER_WORDS,
            PER,
            FLAG_PAYLOAD_EVERY_EVENT,
        )
        return bool(written >= 0)


def _ptr(array: Array, kind: Any) -> Any:
    return ctypes.cast(array.ctypes.data, kind)


def load(*, announce: bool = True) -> tuple[NativePass | None, str]:
    """The native pass, built on the first call of the process (later calls answer at once),
    or ``None`` and why not; with ``announce``, a fallback not asked for is said once on stderr."""
    global _loaded, _said
    with _lock:
        if _loaded is None:
            if os.environ.get(ENV, "").strip() == "0":
                _loaded = (None, f"native drain pass off ({ENV}=0)")
            else:
                try:
                    native = _build()
                    _loaded = (native, f"native drain pass ({native.path.name})")
                except NativeBuildError as error:
                    _loaded = (None, f"native drain pass unavailable: {error}; draining with numpy")
        if announce and _loaded[0] is None and not _said and os.environ.get(ENV, "").strip() != "0":
            _said = True
            print(f"iket-tui: {_loaded[1]}", file=sys.stderr)
        return _loaded


def cache_directory() -> Path:
    """Where built libraries are kept: ``$XDG_CACHE_HOME/iket-tui/native`` (an absolute
    ``XDG_CACHE_HOME`` only) or ``~/.cache/iket-tui/native``."""
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    root = Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".cache"
    return root / "iket-tui" / "native"


def compiler() -> str | None:
    """The C compiler: ``$CC`` where it names one on the path, else ``cc``, else ``gcc``."""
    for name in (os.environ.get("CC", ""), "cc", "gcc"):
        found = shutil.which(name) if name else None
        if found:
            return found
    return None


def _build() -> NativePass:
    cc = compiler()
    if cc is None:
        raise NativeBuildError("no C compiler (cc or gcc) found")
    source = resources.files("iket_tui.ring").joinpath(SOURCE).read_bytes()
    try:
        version = subprocess.run(
            [cc, "--version"], capture_output=True, timeout=COMPILE_TIMEOUT_S, check=True, stdin=subprocess.DEVNULL
        ).stdout
    except (OSError, subprocess.SubprocessError) as error:
        raise NativeBuildError(f"{cc} --version failed ({_one_line(error)})") from None
    machine = platform.machine().encode()  # a home shared by hosts of several architectures
    digest = hashlib.sha256(b"\0".join([source, os.fsencode(cc), version, " ".join(FLAGS).encode(), machine]))
    name = f"drain_pass-{digest.hexdigest()[:24]}.so"
    directory = cache_directory()
    _own_directory(directory)
    path = directory / name
    if not _usable(path):
        _compile(cc, source, directory, path)
    try:
        library = ctypes.CDLL(str(path))
        library.iket_regions.restype = None
        library.iket_regions.argtypes = [
            ctypes.c_int64,
            ctypes.c_int64,
            _U32P,
            _I64P,
            _U32P,
            _U32P,
            _U32P,
            _I64P,
            _I64P,
        ]
        library.iket_regions.argtypes += [_U8P, _I64P, _I64P, _I64P]
        library.iket_chunks.restype = ctypes.c_int64
        library.iket_chunks.argtypes = [_U32P, ctypes.c_int64, ctypes.c_int64, *[_I64P] * 7, _U32P, _U32P]
        library.iket_chunks.argtypes += [ctypes.c_int64] * 4
    except (OSError, AttributeError) as error:
        raise NativeBuildError(f"{path}: cannot be loaded ({_one_line(error)})") from None
    return NativePass(library, path)


def _compile(cc: str, source: bytes, directory: Path, path: Path) -> None:
    """Build into a fresh file of the cache directory, then rename it into place (another
    process building the same library at once renames the same bytes)."""
    with tempfile.TemporaryDirectory(prefix=".build-", dir=directory) as work:
        c_file = Path(work) / SOURCE
        c_file.write_bytes(source)
        built = Path(work) / "drain_pass.so"
        try:
            result = subprocess.run(
                [cc, *FLAGS, "-o", str(built), str(c_file)],
                capture_output=True,
                timeout=COMPILE_TIMEOUT_S,
                stdin=subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired:
            raise NativeBuildError(f"{cc} took over {duration(COMPILE_TIMEOUT_S * 1e9)}") from None
        except OSError as error:
            raise NativeBuildError(f"{cc} could not run ({_one_line(error)})") from None
        if result.returncode != 0:
            said = result.stderr.decode(errors="replace").strip().splitlines()
            raise NativeBuildError(f"{cc} failed ({said[0] if said else f'exit status {result.returncode}'})")
        os.chmod(built, 0o700)
        os.replace(built, path)
    if not _usable(path):
        raise NativeBuildError(f"{path}: not the library just built")


def _usable(path: Path) -> bool:
    """Whether ``path`` is a library this user built: a plain file (not a link), theirs, that
    nobody else may write."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return False
    except OSError as error:
        raise NativeBuildError(f"{path}: {_one_line(error)}") from None
    if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o022:
        raise NativeBuildError(f"{path}: not a plain file of this user's that only they may write")
    return True


def _own_directory(path: Path) -> None:
    """Create ``path`` and its two parents where missing, each with mode 0700, checking each
    before going into it: not a link, a directory, this user's (the parents may be root's); and
    ``path`` itself nobody else's to use."""
    for directory in (path.parent.parent, path.parent, path):
        own = directory == path
        try:
            directory.mkdir(mode=0o700)
        except FileExistsError:
            pass
        except OSError as error:
            raise NativeBuildError(f"{directory}: cannot be created ({_one_line(error)})") from None
        try:
            st = os.lstat(directory)
        except OSError as error:
            raise NativeBuildError(f"{directory}: {_one_line(error)}") from None
        if stat.S_ISLNK(st.st_mode):
            raise NativeBuildError(f"{directory}: is a symbolic link; the native drain is not built through links")
        if not stat.S_ISDIR(st.st_mode):
            raise NativeBuildError(f"{directory}: not a directory")
        if st.st_uid not in (os.getuid(), 0) or (own and st.st_uid != os.getuid()):
            raise NativeBuildError(f"{directory}: another user's directory")
        if own and st.st_mode & 0o077:
            with contextlib.suppress(OSError):
                os.chmod(directory, 0o700)
            if os.lstat(directory).st_mode & 0o077:
                raise NativeBuildError(f"{directory}: others may use it (mode {st.st_mode & 0o777:o}, not 700)")


def _one_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return text[0] if text else type(error).__name__


def _reset_for_tests() -> None:
    """Forget the loaded pass, so a test can load it again under other conditions."""
    global _loaded, _said
    with _lock:
        _loaded = None
        _said = False
