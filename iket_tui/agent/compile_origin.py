"""Where the program asked for a compile, and what the compile was given: the fields a
``compile_begin`` carries so that a user can tell their compiles apart and see why a kernel
compiled again.

- The caller: the innermost frame of the program's own code on the compiler's thread when the
  compile starts (not TileLang's, TVM's, the agent's or the standard library's), as
  ``{"function", "file", "line"}``.
- The ``@tilelang.jit`` function that asked for it, when one did: its name and its arguments in
  short (a tensor as its shape and dtype, ``1024x1024 f16``; a number or a short string as it is).
- The inputs: the pass configuration in force (key to value, as text), the target, and the
  structural hash of the module the first pass was given (about 30 µs on a GEMM's module).
- Where the IR is kept (a client is attached, or ``IKET_TUI_IR=always``): when a kernel compiles
  again from a module of another hash, the diff of the two modules' TVMScript
  (:class:`InputModules`, about 2 ms on a GEMM's module, and only then).

Everything here is read on the compiler's thread, once per compile, and never raises: what
cannot be read is left out.
"""

from __future__ import annotations

import contextlib
import difflib
import functools
import os
import sys
import sysconfig
import threading
from types import FrameType
from typing import Any, Final

MAX_ARGS_CHARS: Final = 80
"""A jit call's arguments are cut to this many characters (with ``…``)."""
MAX_VALUE_CHARS: Final = 60
"""A pass configuration value is cut to this many characters."""
MAX_FRAMES: Final = 200
"""How deep the stack is searched for the program's frame."""
MAX_DIFF_LINES: Final = 400
"""The lines of an input module diff sent at most (the rest is counted)."""
KEPT_KERNELS: Final = 64
"""The kernels whose latest input module is held for the next compile's diff."""

_LIBRARIES: Final = ("tilelang", "tvm", "tvm_ffi", "iket_tui")
"""Packages whose frames are never the program's own."""
_JIT_FILE: Final = os.path.join("tilelang", "jit", "__init__.py")
_JIT_METHODS: Final = frozenset({"__call__", "compile", "par_compile"})
_DTYPES: Final = {
    "float16": "f16",
    "bfloat16": "bf16",
    "float32": "f32",
    "float64": "f64",
    "float8_e4m3fn": "f8e4m3",
    "float8_e5m2": "f8e5m2",
    "int8": "i8",
    "int16": "i16",
    "int32": "i32",
    "int64": "i64",
    "uint8": "u8",
    "bool": "bool",
}


def origin(frame: FrameType | None) -> dict[str, Any]:
    """``caller`` and, when a ``@tilelang.jit`` function asked for the compile, ``jit``: the
    ``compile_begin`` fields found on the stack from ``frame`` outwards (either may be absent)."""
    found: dict[str, Any] = {}
    try:
        skipped = _skipped_dirs()
        depth = 0
        while frame is not None and depth < MAX_FRAMES:
            code = frame.f_code
            filename = code.co_filename
            if "jit" not in found and code.co_name in _JIT_METHODS and filename.endswith(_JIT_FILE):
                jit = _jit_call(frame)
                if jit is not None:
                    found["jit"] = jit
            if not _is_library(filename, skipped):
                found["caller"] = {"function": code.co_name, "file": _shown_path(filename), "line": frame.f_lineno}
                break
            frame = frame.f_back
            depth += 1
    except Exception:
        pass
    return found


def is_programs(frame: FrameType) -> bool:
    """Whether ``frame`` runs the program's own code (not a library's nor the standard library's)."""
    try:
        return not _is_library(frame.f_code.co_filename, _skipped_dirs())
    except Exception:
        return False


def inputs(mod: Any, pass_context: Any) -> dict[str, Any]:
    """``input_hash`` (the structural hash of ``mod``, in hex) and ``config`` (the pass
    configuration of ``pass_context``, key to value as text), those that can be read."""
    found: dict[str, Any] = {}
    if mod is not None:
        try:
            from tvm import ir

            found["input_hash"] = f"{ir.structural_hash(mod) & 0xFFFF_FFFF_FFFF_FFFF:016x}"
        except Exception:
            pass
    if pass_context is not None:
        with contextlib.suppress(Exception):
            found["config"] = {str(key): _value_text(value) for key, value in pass_context.config.items()}
    return found


InputKey = tuple[str | None, str | None, str | None]
"""A kernel as :class:`InputModules` tells it: the jit function (else the caller's function and
file) and the kernel's name, as a reader groups its compiles (``docs/protocol.md``)."""


def input_key(found: dict[str, Any], kernel: str | None) -> InputKey:
    """The kernel of a compile whose ``compile_begin`` fields (:func:`origin`) are ``found``."""
    jit = found.get("jit")
    caller = found.get("caller") or {}
    if jit is not None:
        return (jit.get("name"), None, kernel)
    return (caller.get("function"), caller.get("file"), kernel)


class InputModules:
    """The input module of the latest compile of each kernel, held while the IR is kept, so that
    a compile of the same kernel from another module can say what changed in it."""

    def __init__(self) -> None:
        self._latest: dict[InputKey, tuple[str, Any]] = {}
        self._lock = threading.Lock()

    def diff(self, key: InputKey, input_hash: str, mod: Any, *, keep: bool) -> str | None:
        """The unified diff from the latest input module of ``key`` to ``mod`` when their hashes
        differ (None otherwise, or when nothing is kept); ``mod`` is held for the next one while
        ``keep`` (nothing is held otherwise)."""
        with self._lock:
            previous = self._latest.pop(key, None)
            if not keep:
                self._latest.clear()
                return None
            self._latest[key] = (input_hash, mod)
            while len(self._latest) > KEPT_KERNELS:
                del self._latest[next(iter(self._latest))]
        if previous is None or previous[0] == input_hash:
            return None
        try:
            return module_diff(previous[1], mod)
        except Exception:
            return None


def module_diff(before: Any, after: Any) -> str:
    """The unified diff of two modules' TVMScript, at most :data:`MAX_DIFF_LINES` lines."""
    lines = list(
        difflib.unified_diff(
            before.script().splitlines(), after.script().splitlines(), "before", "now", n=2, lineterm=""
        )
    )
    if len(lines) > MAX_DIFF_LINES:
        lines = [*lines[:MAX_DIFF_LINES], f"… {len(lines) - MAX_DIFF_LINES} more lines"]
    return "\n".join(lines)


def _jit_call(frame: FrameType) -> dict[str, Any] | None:
    """The jit function a ``JITImpl`` method frame runs, and the arguments it was given."""
    local = frame.f_locals
    impl = local.get("self")
    func = getattr(impl, "func", None)
    original = getattr(func, "orig_func", func)
    name = getattr(original, "__name__", None)
    if not isinstance(name, str):
        return None
    args = local.get("args", ())
    kwargs = local.get("kwargs", {})
    parts = [_arg_text(arg) for arg in (args if isinstance(args, tuple) else ())]
    if isinstance(kwargs, dict):
        parts += [f"{key}={_arg_text(value)}" for key, value in kwargs.items() if not str(key).startswith("__")]
    return {"name": name, "args": _cut(", ".join(parts), MAX_ARGS_CHARS)}


def _arg_text(value: Any) -> str:
    """An argument in short: a tensor as ``1024x1024 f16``, a plain value as it is, else its type."""
    shape = getattr(value, "shape", None)
    dtype = getattr(value, "dtype", None)
    if shape is not None and dtype is not None and not isinstance(value, type):
        try:
            dims = "x".join(str(int(dim)) for dim in shape) or "scalar"
        except (TypeError, ValueError):
            dims = "x".join(str(dim) for dim in shape)
        kind = str(dtype).removeprefix("torch.").removeprefix("numpy.")
        return f"{dims} {_DTYPES.get(kind, kind)}"
    if value is None or isinstance(value, bool | int | float):
        return repr(value)
    if isinstance(value, str):
        return _cut(repr(value), 24)
    return type(value).__name__


def _value_text(value: Any) -> str:
    """A pass configuration value as text: TVM's boxed numbers as plain ones."""
    dtype = getattr(value, "dtype", None)
    plain = getattr(value, "value", None)
    if dtype is not None and isinstance(plain, int | float):
        return str(bool(plain)) if str(dtype) == "bool" else str(plain)
    return _cut(str(value), MAX_VALUE_CHARS)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _is_library(filename: str, skipped: tuple[tuple[str, ...], str | None]) -> bool:
    if filename.startswith("<"):
        return filename not in ("<string>", "<stdin>")
    libraries, stdlib = skipped
    if filename.startswith(libraries):
        return True
    return stdlib is not None and filename.startswith(stdlib) and _SITE_PACKAGES not in filename


_SITE_PACKAGES: Final = f"{os.sep}site-packages{os.sep}"


def _shown_path(filename: str) -> str:
    """A file as the user knows it: relative to the working directory when it is below it."""
    try:
        relative = os.path.relpath(filename)
    except ValueError:
        return filename
    return filename if relative.startswith("..") else relative


def _skipped_dirs() -> tuple[tuple[str, ...], str | None]:
    """The directories whose frames are never the program's: the libraries', and the standard
    library's (but not the packages installed below it)."""
    return _dirs_of(tuple(name for name in _LIBRARIES if name in sys.modules))


@functools.cache
def _dirs_of(libraries: tuple[str, ...]) -> tuple[tuple[str, ...], str | None]:
    dirs: list[str] = []
    for name in libraries:
        path = getattr(sys.modules.get(name), "__file__", None)
        if path:
            dirs.append(os.path.dirname(path) + os.sep)
    stdlib = sysconfig.get_paths().get("stdlib")
    return tuple(dict.fromkeys(dirs)), (stdlib.rstrip(os.sep) + os.sep if stdlib else None)
