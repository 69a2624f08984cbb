"""The drain's native pass: its per-record work in C, built on first use by the system's C
compiler and loaded with ctypes; :class:`~iket_tui.ring.drain.RingDrain`'s numpy code is the
reference and the fallback.

numpy makes several passes over every record of a pass (the stamps compared three times, the
own records found, the stop found, the events gathered), and those passes alone cost more than
the drain's target (``docs/benchmark-log.md``). ``drain_pass.c`` reads each record once instead:
:meth:`NativePass.scan` checks its three stamps, finds where each segment's pass stops and
notes the warps' own records; :meth:`NativePass.chunks` cuts the runs of a warp's events into
drained chunks and writes each whole, header and events, reading each event's record once.
Everything that works on the warps' own records and the chunks stays in numpy, shared by both
drains, so they hand on the same chunks and counts.

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

    def scan(
        self, before: Array, before_index: Array, records: Array, after: Array, off: Array, rf: Array, own: Array
    ) -> tuple[Array, int]:
        """Each segment's stop (relative to ``off``) and how many own records went into ``own``
        (``int64`` of shape (4, room): ``row * cap + relative position``, word, hi and payload,
        in order; -1 when there was no room for all).

        ``before``: stamps before the copy, (segments, cap), rows ``before_index``; ``records``:
        the copy, (n, cap, 4) ``uint32``, C-contiguous; ``after``: stamps after it, (n, cap)."""
        n, cap = records.shape[0], records.shape[1]
        stop = np.empty(n, dtype=np.int64)
        for array in (before, after):
            if array.dtype != np.uint32 or array.ndim != 2 or any(s % 4 for s in array.strides):
                raise ValueError("stamps must be a 2-d uint32 array")
        if own.dtype != np.int64 or own.ndim != 2 or own.shape[0] != 4 or not own.flags.c_contiguous:
            raise ValueError("room for own records must be C-contiguous int64 of shape (4, room)")
        if n == 0:
            return stop, 0
        if records.dtype != np.uint32 or not records.flags.c_contiguous or records.shape[2] != 4:
            raise ValueError("records must be C-contiguous uint32 of shape (n, cap, 4)")
        index = np.ascontiguousarray(before_index, dtype=np.int64)
        off64 = np.ascontiguousarray(off, dtype=np.int64)
        rf64 = np.ascontiguousarray(rf, dtype=np.int64)
        k = self.library.iket_scan(
            n,
            cap,
            _ptr(before, _U32P),
            before.strides[0] // 4,
            before.strides[1] // 4,
            _ptr(index, _I64P),
            _ptr(records, _U32P),
            _ptr(after, _U32P),
            after.strides[0] // 4,
            after.strides[1] // 4,
            _ptr(off64, _I64P),
            _ptr(rf64, _I64P),
            _ptr(stop, _I64P),
            _ptr(own, _I64P),
            own.shape[1],
        )
        return stop, int(k)

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
        segment: Array,
        table: Array,
        out: Array,
    ) -> bool:
        """Write the drained chunks of pieces (``length`` records from ``slot`` of copy row
        ``row``) into ``out`` (rows of ``uint32`` words, exactly as many as the pieces cut into
        chunks of :data:`~iket_tui.ring.layout.DRAINED_EVENTS_PER_CHUNK`): headers from ``table``
        (words 3 to 7 per warp, row ``header``) and ``segment[row]``, flags, ``t_base`` (the first
        event's time, or ``empty_t`` for a chunk of none) and events. ``False`` where a chunk's
        events lie 2**32 ns or more apart (``out`` is then partly written)."""
        if not records.flags.c_contiguous or records.dtype != np.uint32 or records.ndim != 3:
            raise ValueError("records must be C-contiguous uint32 of shape (n, cap, 4)")
        if not out.flags.c_contiguous or out.dtype != np.uint32 or out.shape[1] < HEADER_WORDS + 2 * PER:
            raise ValueError("chunks must be C-contiguous uint32 rows")
        n, cap = records.shape[0], records.shape[1]
        columns = [np.ascontiguousarray(a, dtype=np.int64) for a in (row, slot, length, header)]
        columns += [np.ascontiguousarray(a, dtype=np.int64) for a in (first_flags, last_flags, empty_t, segment)]
        r, s, m, h = columns[:4]
        pieces = len(r)
        if any(len(c) != pieces for c in columns[:7]) or (r < 0).any() or (r >= min(n, len(columns[7]))).any():
            raise ValueError("a piece lies outside the copy")
        if (s < 0).any() or (m < 0).any() or (s + m > cap).any() or (h < 0).any() or (h >= len(table)).any():
            raise ValueError("a piece lies outside its segment or names no warp")
        if int(np.maximum(-(-m // PER), 1).sum()) != len(out):
            raise ValueError("the chunks are not as many as the pieces make")
        identities = np.ascontiguousarray(table, dtype=np.uint32)
        if identities.ndim != 2 or identities.shape[1] != 5:
            raise ValueError("a warp's header words are 5")
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
        library.iket_scan.restype = ctypes.c_int64
        library.iket_scan.argtypes = [ctypes.c_int64, ctypes.c_int64, _U32P, ctypes.c_int64, ctypes.c_int64, _I64P]
        library.iket_scan.argtypes += [_U32P, _U32P, ctypes.c_int64, ctypes.c_int64, _I64P, _I64P, _I64P, _I64P]
        library.iket_scan.argtypes += [ctypes.c_int64]
        library.iket_chunks.restype = ctypes.c_int64
        library.iket_chunks.argtypes = [_U32P, ctypes.c_int64, ctypes.c_int64, *[_I64P] * 8, _U32P, _U32P]
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
