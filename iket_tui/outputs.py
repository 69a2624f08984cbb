"""Writing the files a user names (``-o``, ``--record``) without writing anything else.

Whoever can plant a name in a shared directory (``/tmp``) must not be able to make iket-tui
write somewhere the user did not name, nor keep a hand on what it writes:

- A symbolic link at the name is refused, never followed and never replaced: a planted link
  would redirect the write, and a link of the user's own points at a file they may not mean
  to lose. Removing it or naming another file is the user's one-line choice.
- The directory that receives a file, and a directory named by ``-o``, must belong to this
  user or to root: another user could read, swap or replace what is written there.
- A regular file is written under a private name beside the destination, created exclusively
  (``O_EXCL|O_NOFOLLOW``, the umask's mode, or the mode of the file it replaces), then renamed
  onto it: nothing is ever opened through a name someone else controls (a link raced in after
  the check is replaced by the rename, not followed; a hard link to another file is replaced,
  not written through), and the name never holds half a file.
- A FIFO or a character device (a pipe, ``/dev/null``) is written in place: it is not a file
  that could be replaced, and writing into it is what naming it means.
- :data:`STDOUT` (what ``-o -`` names) is this process's standard output, written in place
  through its descriptor, never through the link ``/dev/stdout`` is: what it leads to was
  chosen by whoever started the process.
- Inside :func:`reading`, a destination that is the file being read (the same file by any
  name, link or descriptor: ``export X -o X``, ``dump X >> X``) is refused: it would replace
  or grow what is being read.

Everything here raises :class:`OutputError` (a refusal, one line naming the path) or lets the
``OSError`` of a failed write through, for the caller to word.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import secrets
import stat
from collections.abc import Iterable, Iterator
from contextvars import ContextVar
from pathlib import Path
from typing import Final

STDOUT: Final = Path("/dev/stdout")
"""Standard output, as a destination: written in place through descriptor 1."""

_STDOUT_FD: Final = 1
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_IN_PLACE = os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC
_READING: ContextVar[tuple[tuple[Path, int, int], ...]] = ContextVar("iket_tui_outputs_reading", default=())
"""The files being read (each its name, device and inode) while :func:`reading` runs."""


class OutputError(Exception):
    """A path that must not or cannot be written; the message says why in one line, naming it."""


@contextlib.contextmanager
def reading(path: Path) -> Iterator[None]:
    """While the block runs, refuse every destination that is the file at ``path`` (the same
    file, followed through links, or standard output leading to it): a command that reads one
    file and writes another would otherwise replace its input with its output (``export X -o
    X``) or append to what it is still reading (``dump X >> X``). A ``path`` that cannot be
    looked at adds nothing (reading it fails on its own), nor does one that is not a regular
    file: a terminal or a pipe read and written is nothing that could be destroyed."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        st = None
    if st is None or not stat.S_ISREG(st.st_mode):
        yield
        return
    token = _READING.set((*_READING.get(), (Path(path), st.st_dev, st.st_ino)))
    try:
        yield
    finally:
        _READING.reset(token)


def _check_not_read(path: Path, st: os.stat_result) -> None:
    for name, device, inode in _READING.get():
        if (st.st_dev, st.st_ino) == (device, inode):
            what = "standard output is" if path == STDOUT else "is"
            also = "" if name == path else f" ({name})"
            raise OutputError(
                f"{path}: {what} the file being read{also}: writing there would destroy it; name another output"
            )


def check_file(path: Path) -> None:
    """Refuse, before any work, a destination that :func:`write_file` or :func:`create_growing`
    would refuse or could not write: a link, a directory, something that is neither a file, a
    FIFO nor a device, a missing or foreign directory, no permission."""
    path = Path(path)
    if path == STDOUT:
        try:
            out = os.fstat(_STDOUT_FD)
            writable = (fcntl.fcntl(_STDOUT_FD, fcntl.F_GETFL) & os.O_ACCMODE) != os.O_RDONLY
        except OSError:
            writable = False
        if not writable:  # closed (``>&-``), or open for reading only
            raise OutputError(f"{path}: standard output is closed")
        _check_not_read(path, out)
        return
    st = _lstat(path)
    if st is not None:
        _check_not_read(path, os.stat(path) if stat.S_ISLNK(st.st_mode) and os.path.exists(path) else st)
        if stat.S_ISLNK(st.st_mode):
            raise OutputError(
                f"{path}: is a symbolic link (to {_link_target(path)}): iket-tui does not write through links; "
                "remove it or name another file"
            )
        if stat.S_ISDIR(st.st_mode):
            raise OutputError(f"{path}: is a directory")
        if not (stat.S_ISREG(st.st_mode) or _in_place(st)):
            raise OutputError(f"{path}: not a regular file, a FIFO or a device")
        if not os.access(path, os.W_OK):
            raise OutputError(f"{path}: permission denied")
        if _in_place(st):
            _check_in_place(path, st)
            return
    directory = path.parent
    _check_directory(directory, missing=f"{path}: no such directory {directory}")
    if st is not None and not _may_replace(st, directory):
        raise OutputError(f"{path}: permission denied (it belongs to uid {st.st_uid}, in a sticky directory)")


def check_directory(path: Path) -> None:
    """Refuse, before any work, a directory to write files into (``repro -o DIR``) that is a
    link, not a directory, another user's, or not writable; one that does not exist yet must
    be creatable in a directory of this user's (or root's)."""
    path = Path(path)
    st = _lstat(path)
    if st is None:
        parent = path.parent
        while _lstat(parent) is None and parent != parent.parent:
            parent = parent.parent
        _check_directory(parent, missing=f"{path}: no such directory {parent}")
        return
    if stat.S_ISLNK(st.st_mode):
        raise OutputError(
            f"{path}: is a symbolic link (to {_link_target(path)}): iket-tui does not write through links; "
            "remove it or name another directory"
        )
    _check_directory(path, missing=f"{path}: no such directory")


def make_directory(path: Path) -> None:
    """Create ``path`` (and its missing parents) as a directory to write files into, or use
    the one there if :func:`check_directory` accepts it (checked again once it exists)."""
    path = Path(path)
    check_directory(path)
    with contextlib.suppress(FileExistsError):  # something else than a directory: the check below says so
        path.mkdir(parents=True, exist_ok=True)
    check_directory(path)


def write_file(path: Path, data: bytes) -> None:
    """Write ``data`` as the whole content of ``path`` (see the module's rules)."""
    write_files([(Path(path), data)])


def write_files(files: Iterable[tuple[Path, bytes]]) -> None:
    """Write several files (each a path and its whole content): every destination is checked
    before any is written, so a refusal leaves them all as they were."""
    files = list(files)
    for path, _ in files:
        check_file(path)
    for path, data in files:
        with writing(path) as fd:
            write_all(fd, data)


@contextlib.contextmanager
def writing(path: Path) -> Iterator[int]:
    """A descriptor to write the whole content of ``path`` into, by the module's rules: on
    leaving the block without an exception the destination holds exactly what was written;
    after an exception a regular file's destination is left as it was. The descriptor is closed
    on the way out."""
    path = Path(path)
    check_file(path)
    private: Path | None = None
    if path == STDOUT:
        fd = os.dup(_STDOUT_FD)
    else:
        st = _lstat(path)
        if st is not None and _in_place(st):
            fd = _open_in_place(path)
        else:
            fd, private = _create_beside(path, st)
    try:
        yield fd
        if private is not None:
            os.fsync(fd)
    except BaseException:
        os.close(fd)
        if private is not None:
            _remove(private)
        raise
    os.close(fd)
    if private is not None:
        _publish(private, path)


@contextlib.contextmanager
def reader_kept(path: Path) -> Iterator[None]:
    """For a destination that is a FIFO: refuse it at once, in one line, when nobody reads it,
    and keep it open for writing while the block runs, so that its reader waits rather than
    reads the end of its input before the command's own writer opens it. For a command that
    does something long before it writes (``run`` starts its program first); a destination
    that is not a FIFO is left to :func:`check_file`."""
    st = None if Path(path) == STDOUT else _lstat(Path(path))
    if st is None or not stat.S_ISFIFO(st.st_mode):
        yield
        return
    fd = _open_in_place(Path(path))
    try:
        yield
    finally:
        os.close(fd)


def create_growing(path: Path, head: bytes) -> int:
    """Open a new file at ``path`` that grows while it is read, a recording; returns its
    descriptor, positioned after ``head``, the file's first bytes.

    ``head`` is written under a private name beside ``path``, which is then renamed onto
    ``path`` at once; from then on the file grows under the name the user gave. A writer
    killed at any moment therefore leaves a readable recording under that name (a ``FILE.part``
    renamed on close would leave a killed recording under a name nobody asked for), and a
    recording that cannot even start (the disk is full) leaves whatever was at ``path`` as it was.
    """
    path = Path(path)
    check_file(path)
    st = None if path == STDOUT else _lstat(path)
    if path == STDOUT or (st is not None and _in_place(st)):
        fd = os.dup(_STDOUT_FD) if path == STDOUT else _open_in_place(path)
        try:
            write_all(fd, head)
        except BaseException:
            os.close(fd)
            raise
        return fd
    fd, private = _create_beside(path, st)
    try:
        write_all(fd, head)
        _publish(private, path)
    except BaseException:
        os.close(fd)
        _remove(private)
        raise
    return fd


class PartialWrite(OSError):
    """The ``OSError`` of a write (:func:`write_all`) that got only :attr:`written` bytes out."""

    written: int = 0


def write_all(fd: int, data: bytes | bytearray | memoryview) -> None:
    """Write all of ``data`` to ``fd``; a failure (a full disk) raises :class:`PartialWrite`,
    which says how much was written before it, so that a caller can cut the file back."""
    done = 0
    with memoryview(data) as view:  # released on the way out, so that the caller may resize ``data``
        while done < len(view):
            try:
                done += os.write(fd, view[done:])
            except OSError as exc:
                failed = PartialWrite(exc.errno, exc.strerror)
                failed.written = done
                raise failed from None


def _create_beside(path: Path, existing: os.stat_result | None) -> tuple[int, Path]:
    """A new empty file, created exclusively beside ``path`` under a private name."""
    for _ in range(100):
        private = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
        try:
            fd = os.open(private, _CREATE, 0o666)
        except FileExistsError:
            continue
        if existing is not None:
            with contextlib.suppress(OSError):
                os.fchmod(fd, stat.S_IMODE(existing.st_mode))
        return fd, private
    raise OSError(errno.EEXIST, f"no free private name beside {path}")


def _publish(private: Path, path: Path) -> None:
    os.rename(private, path)


def _remove(private: Path) -> None:
    with contextlib.suppress(OSError):
        private.unlink()


def _lstat(path: Path) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except PermissionError:
        raise OutputError(_not_searchable(path)) from None


def _not_searchable(path: Path) -> str:
    """Why ``path`` cannot even be looked at: a directory on the way that this user may not enter."""
    for directory in reversed(Path(path).parents):
        if directory != Path(".") and not os.access(directory, os.X_OK):
            return f"{path}: permission denied: this user may not enter {directory}"
    return f"{path}: permission denied"


def _link_target(path: Path) -> str:
    try:
        return os.readlink(path)
    except OSError:
        return "?"


def _in_place(st: os.stat_result) -> bool:
    return stat.S_ISFIFO(st.st_mode) or stat.S_ISCHR(st.st_mode)


def _check_in_place(path: Path, st: os.stat_result) -> None:
    """A FIFO or device written in place must be this user's or root's: another user's FIFO
    planted at the name would hand them what is written (the kernel's ``protected_fifos``
    guards only opens that create)."""
    if not _trusted(st.st_uid):
        what = "a FIFO" if stat.S_ISFIFO(st.st_mode) else "a device"
        raise OutputError(
            f"{path}: {what} of uid {st.st_uid}, not of this user (uid {os.geteuid()}): "
            "iket-tui does not write into another user's; remove it or name another file"
        )


def _open_in_place(path: Path) -> int:
    """Open a FIFO or device for writing where it stands, checked again once open (the name
    may have been swapped since :func:`check_file`). A FIFO is opened without waiting: one
    that nobody reads is refused in one line rather than hanging the command; writes then
    block as usual."""
    try:
        fd = os.open(path, _IN_PLACE | os.O_NONBLOCK)
    except OSError as exc:
        if exc.errno == errno.ENXIO:
            raise OutputError(f"{path}: a FIFO that nobody reads: start its reader first") from None
        if exc.errno == errno.ELOOP:
            raise OutputError(f"{path}: is a symbolic link: iket-tui does not write through links") from None
        raise
    try:
        st = os.fstat(fd)
        if not _in_place(st):
            raise OutputError(f"{path}: changed while it was opened: name it again")
        _check_in_place(path, st)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _trusted(uid: int) -> bool:
    return uid in (os.geteuid(), 0)


def _check_directory(directory: Path, *, missing: str) -> None:
    """A directory that this user may write files into, and that no other user (but root) owns."""
    try:
        seen = [os.lstat(directory), os.stat(directory)]
    except (FileNotFoundError, NotADirectoryError):
        raise OutputError(missing) from None
    except PermissionError:
        raise OutputError(_not_searchable(directory)) from None
    real = seen[-1]
    if not stat.S_ISDIR(real.st_mode):
        raise OutputError(f"{directory}: not a directory")
    for st in seen:
        if not _trusted(st.st_uid):
            raise OutputError(
                f"{directory}: belongs to uid {st.st_uid}, not to this user (uid {os.geteuid()}): "
                "iket-tui does not write into another user's directory"
            )
    if not os.access(directory, os.W_OK | os.X_OK):
        raise OutputError(f"{directory}: permission denied")


def _may_replace(st: os.stat_result, directory: Path) -> bool:
    """Whether a file ``st`` in ``directory`` may be renamed over (a sticky directory keeps
    other users' files)."""
    me = os.geteuid()
    if me == 0 or st.st_uid == me:
        return True
    try:
        parent = os.stat(directory)
    except OSError:
        return True
    return not (parent.st_mode & stat.S_ISVTX) or parent.st_uid == me
