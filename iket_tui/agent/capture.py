"""What the agent keeps of a failed compile without being asked, so that ``iket-tui repro`` can
make the same failure happen again in another process.

- A failed pass: the module the pass was given (TVMScript to read, TVM's JSON to load back), the
  target and the pass-context configuration in force. Captured on the compiler's thread when
  the pass fails (the failure path, never the normal one), from the module the IR store holds
  for that pass.
- A failed codegen step: the CUDA source nvcc was given (after every post-processing callback,
  kernel tracing's included), nvcc's arguments and its diagnostics. TileLang's
  ``tilelang.contrib.nvcc.compile_cuda`` is wrapped while the agent watches TileLang; the
  wrapper keeps what a failing call was given for the codegen step running on its thread, and
  costs nothing more than a thread-local store on a call that succeeds.

Every text fits in a message a reader accepts (:data:`MAX_TEXT_BYTES`); a longer one is cut or
left out, and the capture says so.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from iket_tui.agent import failures
from iket_tui.agent.ir_store import IRStore

MAX_TEXT_BYTES: Final = 4 * 1024 * 1024
"""The longest string a reader accepts in a message (the decoder's ``max_str_len``): a longer
one would make the whole frame unreadable."""

MAX_OUTPUT_CHARS: Final = failures.MAX_TRACEBACK_CHARS
"""nvcc's diagnostics are kept up to this many characters (cut in the middle beyond)."""

TILELANG_PATHS: Final = ("TILELANG_TEMPLATE_PATH", "CUTLASS_INCLUDE_DIR")
"""The include directories of the TileLang install (``tilelang.env``) that TileLang gives nvcc."""

_WATCHING: Final = "_iket_tui_watching"
_NVCC_MARKER: Final = "\nCompilation error:\n"
_COMMAND_MARKER: Final = "\nCommand: "

_thread = threading.local()  # .failed: the NvccRun of this thread's last failed compile_cuda, until taken


def scope() -> dict[str, Any]:
    """The target and pass context in force now (while the failure unwinds): see :func:`scope_of`."""
    from tvm import target, transform

    current = context = None
    with contextlib.suppress(Exception):
        current = target.Target.current(allow_none=True)
    with contextlib.suppress(Exception):
        context = transform.PassContext.current()
    return scope_of(current, context)


def scope_of(target: Any, pass_context: Any) -> dict[str, Any]:
    """The target (a JSON object TVM's ``Target()`` reads back) and the pass context: its
    configuration (``tvm.ir.save_json``) as a failure capture has it, its ``opt_level``, and its
    ``required_pass`` and ``disabled_pass`` lists, so that a reproducer makes the same context."""
    found: dict[str, Any] = {
        "target": None,
        "config_json": None,
        "opt_level": None,
        "required_pass": None,
        "disabled_pass": None,
    }
    with contextlib.suppress(Exception):
        if target is not None:
            found["target"] = str(target)
    if pass_context is None:
        return found
    with contextlib.suppress(Exception):
        found["config_json"] = config_json(pass_context.config)
    with contextlib.suppress(Exception):
        level = pass_context.opt_level
        found["opt_level"] = level if type(level) is int else None
    for key in ("required_pass", "disabled_pass"):
        with contextlib.suppress(Exception):
            found[key] = [str(name) for name in getattr(pass_context, key)]
    return found


def config_json(config: Any) -> str | None:
    """A pass-context configuration as TVM's JSON, when it fits in a message and saving it is safe
    here (see :func:`save_json_crashes`: a configuration of plain values is)."""
    from tvm import ir

    if save_json_crashes() is not None and not all(
        isinstance(value, bool | int | float | str) for value in config.values()
    ):
        return None
    text = ir.save_json(config)
    return text if _fits(text) else None


def failed_pass(store: IRStore, compile_id: int, seq: int) -> dict[str, Any]:
    """The module pass ``seq`` of ``compile_id`` was given, as text and as TVM JSON."""
    from tvm import ir

    found: dict[str, Any] = {"ir_script": None, "ir_json": None, "ir_missing": None}
    module = store.module_before(compile_id, seq)
    if module is None:
        found["ir_missing"] = "the agent no longer held the module this pass was given"
        return found
    try:
        script, cut = cut_to_fit(str(module.script()))
        found["ir_script"] = script
        if cut:
            found["ir_missing"] = f"the module's TVMScript {cut}"
    except Exception as exc:
        found["ir_missing"] = f"the module could not be printed ({type(exc).__name__})"
    crashes = save_json_crashes()
    if crashes is not None:
        found["ir_missing"] = f"{found['ir_missing']}; {crashes}" if found["ir_missing"] else crashes
        return found
    try:
        text = ir.save_json(module)
        if _fits(text):
            found["ir_json"] = text
        else:
            found["ir_missing"] = f"the module is {_utf8_len(text):,} bytes as JSON, over {MAX_TEXT_BYTES:,}"
    except Exception as exc:
        found["ir_missing"] = f"the module could not be saved ({type(exc).__name__})"
    return found


@functools.cache
def save_json_crashes() -> str | None:
    """Why ``tvm.ir.save_json`` must not be called in this process, if it must not: Apache TVM 0.27
    with apache-tvm-ffi 0.1.15 ends the whole process in it (a segmentation fault) for any IR that
    holds an expression. The ``tvm`` extra keeps apache-tvm-ffi below 0.1.15."""
    import tvm
    import tvm_ffi

    tvm_version, ffi_version = _version(tvm.__version__), _version(getattr(tvm_ffi, "__version__", ""))
    if tvm_version[:2] == (0, 27) and ffi_version >= (0, 1, 15):
        return (
            f"TVM's JSON of it is left out: Apache TVM {tvm.__version__} crashes saving IR as JSON with "
            f"apache-tvm-ffi {tvm_ffi.__version__} (below 0.1.15 it does not)"
        )
    return None


def _version(text: str) -> tuple[int, ...]:
    """The leading numbers of a version (``0.27.0.post1``: 0, 27, 0)."""
    return tuple(int(part) for part in re.findall(r"\d+", text.split("+")[0].split(".post")[0].split("rc")[0])[:3])


@dataclass(frozen=True)
class NvccRun:
    """One call of ``compile_cuda`` that raised: what it was given and what nvcc said."""

    code: str
    target_format: str | None
    arch: str | list[str] | None
    options: str | list[str] | None
    output: str
    command: str | None
    tilelang_paths: dict[str, str]


def failed_codegen(run: NvccRun | None) -> dict[str, Any]:
    """The fields of a codegen failure's ``compile_failure``: the source nvcc rejected, its
    arguments and its diagnostics (all ``None`` when the step failed without running nvcc)."""
    found: dict[str, Any] = {
        "source": None,
        "source_missing": None,
        "compiler_output": None,
        "nvcc_format": None,
        "nvcc_arch": None,
        "nvcc_options": None,
        "nvcc_command": None,
        "tilelang_paths": None,
    }
    if run is None:
        found["source_missing"] = "the codegen step failed without a failing nvcc run"
        return found
    source, cut = cut_to_fit(run.code)
    found["source"] = source
    if cut:
        found["source_missing"] = f"the source {cut}"
    found["compiler_output"] = failures.bounded(run.output, MAX_OUTPUT_CHARS)
    found["nvcc_format"] = run.target_format
    found["nvcc_arch"] = run.arch
    found["nvcc_options"] = run.options
    found["nvcc_command"] = None if run.command is None else failures.bounded(run.command, MAX_OUTPUT_CHARS)
    found["tilelang_paths"] = run.tilelang_paths
    return found


def cut_to_fit(text: str, limit: int = MAX_TEXT_BYTES) -> tuple[str, str | None]:
    """``text``, or its first lines when it is longer than ``limit`` bytes as UTF-8, with what was cut."""
    if len(text) * 4 <= limit:
        return text, None
    encoded = text.encode("utf-8", "surrogatepass")
    if len(encoded) <= limit:
        return text, None
    head = encoded[:limit].decode("utf-8", "ignore")
    newline = head.rfind("\n")
    if newline > 0:
        head = head[: newline + 1]
    kept = head.count("\n")
    total = text.count("\n") + (0 if text.endswith("\n") else 1)
    return head, f"is {len(encoded):,} bytes, over {limit:,}: only its first {kept:,} of {total:,} lines are kept"


# nvcc, watched


def watch_nvcc() -> None:
    """Wrap TileLang's ``compile_cuda`` so that a failing call is kept for this thread's codegen step
    (a TileLang without it compiles no CUDA through nvcc: nothing to watch)."""
    try:
        from tilelang.contrib import nvcc
    except ImportError:
        return
    compile_cuda = nvcc.compile_cuda
    if not getattr(compile_cuda, _WATCHING, False):
        nvcc.compile_cuda = _watching(compile_cuda)


def unwatch_nvcc() -> None:
    """Put TileLang's own ``compile_cuda`` back, unless something wrapped it after the agent."""
    try:
        from tilelang.contrib import nvcc
    except ImportError:
        return
    current = nvcc.compile_cuda
    if getattr(current, _WATCHING, False):
        nvcc.compile_cuda = current.__wrapped__


def forget_nvcc() -> None:
    """Drop any failed nvcc run kept for this thread (a codegen step begins)."""
    _thread.failed = None


def failed_nvcc() -> NvccRun | None:
    """The failed nvcc run of this thread's codegen step, if one failed since it began; forgotten then."""
    run: NvccRun | None = getattr(_thread, "failed", None)
    _thread.failed = None
    return run


def _watching(compile_cuda: Callable[..., Any]) -> Callable[..., Any]:
    signature = inspect.signature(compile_cuda)

    @functools.wraps(compile_cuda)
    def watched(*args: Any, **kwargs: Any) -> Any:
        _thread.failed = None
        try:
            return compile_cuda(*args, **kwargs)
        except Exception as exc:
            _keep(signature, args, kwargs, exc)
            raise

    setattr(watched, _WATCHING, True)
    return watched


def _keep(signature: inspect.Signature, args: tuple[Any, ...], kwargs: dict[str, Any], exc: Exception) -> None:
    try:
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        given = bound.arguments
        code = str(given.get("code", ""))
        output, command = _nvcc_said(code, str(exc))
        _thread.failed = NvccRun(
            code=code,
            target_format=_optional_str(given.get("target_format")),
            arch=_strings(given.get("arch")),
            options=_strings(given.get("options")),
            output=output,
            command=command,
            tilelang_paths=_tilelang_paths(),
        )
    except Exception:
        _thread.failed = None


def _nvcc_said(code: str, text: str) -> tuple[str, str | None]:
    """nvcc's output and command line, out of the message of ``compile_cuda``'s error
    (``{code}\\nCompilation error:\\n{output}\\nCommand: {command}\\n``); any other message whole."""
    if not (text.startswith(code) and text.startswith(_NVCC_MARKER, len(code))):
        return failures.compiler_text(text), None
    rest = text[len(code) + len(_NVCC_MARKER) :]
    cut = rest.rfind(_COMMAND_MARKER)
    if cut < 0:
        return rest, None
    command = rest[cut + len(_COMMAND_MARKER) :].split("\n", 1)[0]
    return rest[:cut], command


def _tilelang_paths() -> dict[str, str]:
    from tilelang import env

    paths: dict[str, str] = {}
    for name in TILELANG_PATHS:
        value = getattr(env, name, None)
        if isinstance(value, str) and value:
            paths[name] = value
    return paths


def _strings(value: Any) -> str | list[str] | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, list | tuple):
        return [str(item) for item in value]
    return str(value)


def _optional_str(value: Any) -> str | None:
    return None if value is None else str(value)


def _fits(text: str) -> bool:
    return len(text) * 4 <= MAX_TEXT_BYTES or _utf8_len(text) <= MAX_TEXT_BYTES


def _utf8_len(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))
