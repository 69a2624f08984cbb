"""The message schema shared by the agent, the socket, recordings and the UI.

A message is a msgpack map with a ``type`` key. Constructors here build the plain dicts that
go on the wire; readers treat any map as untrusted and validate the fields they use. Inside a
``batch`` a pass event may also travel as a *pass row*, a positional array (see
:data:`PASS_ROW_FIELDS`): half the bytes of the map and much faster to decode. The full
schema, with every field, is documented in ``docs/protocol.md``.
"""

from __future__ import annotations

from typing import Any, Final

Message = dict[str, Any]
PassRow = list[Any]
"""A pass event as a positional array, in the order of :data:`PASS_ROW_FIELDS`."""
Item = Message | PassRow
"""What a reader that keeps pass rows (``MessageDecoder(rows=True)``) hands out."""
PassTuple = tuple[Any, ...]
"""A pass row as the agent builds and keeps it, encoded exactly like a :data:`PassRow`. A tuple
of plain values is one Python's garbage collector stops tracking at the first collection it
survives, so the thousands of events the agent holds for its clients never make a full
collection (tens of milliseconds in a process that imported TileLang) come sooner."""
Outgoing = Message | PassTuple
"""What the agent keeps and queues for its clients."""

PROTOCOL_VERSION: Final = (1, 1)

# Session
HELLO: Final = "hello"
HEARTBEAT: Final = "heartbeat"
SYNC: Final = "sync"  # end of the backlog a late client receives; live stream follows
DROPPED: Final = "dropped"  # events this client lost since the last report
BYE: Final = "bye"  # the target is exiting
BATCH: Final = "batch"  # several messages in one frame, in order; readers flatten it
REQUEST: Final = "request"  # client to agent: asks for something now (``what``: see WHAT_*)
RESPONSE: Final = "response"  # agent to that client: the answer to one request, by its ``id``
# Compiles and passes
COMPILE_BEGIN: Final = "compile_begin"
COMPILE_END: Final = "compile_end"
PASS_CONTEXT_ENTER: Final = "pass_context_enter"
PASS_CONTEXT_EXIT: Final = "pass_context_exit"
PASS_START: Final = "pass_start"
PASS_END: Final = "pass_end"
PASS_INCOMPLETE: Final = "pass_incomplete"
CALLBACK_MISMATCH: Final = "callback_mismatch"
CODEGEN_BEGIN: Final = "codegen_begin"
CODEGEN_END: Final = "codegen_end"
COMPILE_FAILURE: Final = "compile_failure"  # what the agent captured of a failed pass or codegen step, for repro
COMPILE_PROCESS: Final = "compile_process"  # a process a codegen step runs (nvcc, ptxas, ...): seen, running, ended
# Kernel events (docs/ring.md)
KERNEL_MODULE: Final = "kernel_module"  # a traced module's event table, sent when it is compiled
KERNEL_RECORDS: Final = "kernel_records"  # one drain of the ring: chunks as bytes, and counters
KERNEL_TRACING: Final = "kernel_tracing"  # the agent's kernel tracing state (on, device or not)
# Recordings only
RECORDING: Final = "recording"
CHECKPOINT: Final = "checkpoint"
END: Final = "end"
PROCESS: Final = "process"  # in a stream of several processes: whose messages follow
INDEX: Final = "index"  # a recording's index of itself: read in place, never delivered (see UNDELIVERED_TYPES)

PASS_EVENTS: Final = frozenset({PASS_START, PASS_END, PASS_INCOMPLETE})
KNOWN_TYPES: Final = frozenset(
    {
        HELLO,
        HEARTBEAT,
        SYNC,
        DROPPED,
        BYE,
        BATCH,
        REQUEST,
        RESPONSE,
        COMPILE_BEGIN,
        COMPILE_END,
        PASS_CONTEXT_ENTER,
        PASS_CONTEXT_EXIT,
        PASS_START,
        PASS_END,
        PASS_INCOMPLETE,
        CALLBACK_MISMATCH,
        CODEGEN_BEGIN,
        CODEGEN_END,
        COMPILE_FAILURE,
        COMPILE_PROCESS,
        KERNEL_MODULE,
        KERNEL_RECORDS,
        KERNEL_TRACING,
        RECORDING,
        CHECKPOINT,
        END,
        PROCESS,
    }
)

UNDELIVERED_TYPES: Final = frozenset({INDEX})
"""Types a reader skips without counting them unknown: what a recording holds about itself for
readers that look for it in place (an older reader skips and counts them, as any unknown type)."""

# What a request may ask for
WHAT_STACKS: Final = "stacks"
"""The Python stack of every thread of the target, innermost frame last."""
WHAT_IR: Final = "ir"
"""The TVMScript of the module before or after one pass (``compile``, ``seq``, ``which``)."""
WHAT_STUCK: Final = "stuck"
"""What a reproducer of a hang needs: the module the running pass of a compile was given, the
pass, its place in the pipeline, the target and the pass-context configuration (``compile`` and
``seq`` optional: the pass running longest by default); see :data:`STUCK_FIELDS`."""
WHAT_ABORT: Final = "abort"
"""Make a running compile fail: ``CompileAborted`` raised in its thread (``compile`` optional:
the one whose pass runs longest by default); see :data:`ABORT_FIELDS`."""

STUCK_FIELDS: Final = (
    "compile",
    "seq",
    "name",
    "context",
    "depth",
    "parent",
    "parent_name",
    "phase",
    "pipeline",
    "kernel",
    "label",
    "running_ns",
    "target",
    "config_json",
    "opt_level",
    "required_pass",
    "disabled_pass",
    "ir_script",
    "ir_json",
    "ir_missing",
    "pass_source",
    "pid",
    "frames",
)
"""The fields of an ``ok`` answer to :data:`WHAT_STUCK`; see ``docs/protocol.md``."""
ABORT_FIELDS: Final = (
    "compile",
    "name",
    "seq",
    "running_ns",
    "message",
    "state",
    "compile_error",
    "where",
    "pid",
    "thread",
    "main_thread",
    "via",
    "children",
    "ended",
)
"""The fields of an ``ok`` answer to :data:`WHAT_ABORT`; see ``docs/protocol.md``."""
ABORT_ABORTED: Final = "aborted"
"""``state`` of an abort answer: the compile failed with the exception."""
ABORT_ENDED: Final = "ended"
"""``state``: the compile ended otherwise (it finished, or failed on its own) before the exception was raised."""
ABORT_RAISED: Final = "raised"
"""``state``: the exception was raised in the compiling thread, and the compile has not ended yet."""
ABORT_NATIVE: Final = "native"
"""``state``: the compiling thread is inside native code and has not run Python since; the
exception waits until it does."""

# Pass rows (protocol 1.1): a pass event inside a batch as
# [type, compile, context, name, seq, depth, parent, phase, t_ns, extra]
PASS_ROWS_SINCE: Final = (1, 1)
"""The protocol version from which a reader understands pass rows."""
PASS_ROW_FIELDS: Final = ("type", "compile", "context", "name", "seq", "depth", "parent", "phase", "t_ns", "extra")
PASS_ROW_LEN: Final = len(PASS_ROW_FIELDS)
PASS_ROW_EXTRA: Final[dict[str, str | None]] = {PASS_START: None, PASS_END: "duration_ns", PASS_INCOMPLETE: "error"}
"""The map field a row's last item stands for, by type (a ``pass_start`` row's is null)."""
_COMMON_PASS_FIELDS: Final = PASS_ROW_FIELDS[:-1]
_PASS_MAP_KEYS: Final = {
    kind: frozenset(_COMMON_PASS_FIELDS if extra is None else (*_COMMON_PASS_FIELDS, extra))
    for kind, extra in PASS_ROW_EXTRA.items()
}


def row_of(msg: Message) -> PassRow | None:
    """``msg`` as a pass row, or ``None`` when a row cannot say exactly what the map says: not a
    pass event, or a field missing or added (such a map is sent as it is)."""
    kind = msg.get("type")
    if type(kind) is not str or kind not in PASS_ROW_EXTRA or msg.keys() != _PASS_MAP_KEYS[kind]:
        return None
    extra = PASS_ROW_EXTRA[kind]
    return [
        kind,
        msg["compile"],
        msg["context"],
        msg["name"],
        msg["seq"],
        msg["depth"],
        msg["parent"],
        msg["phase"],
        msg["t_ns"],
        None if extra is None else msg[extra],
    ]


def message_of(row: PassRow | PassTuple) -> Message:
    """The map a pass row stands for, with its fields in the order the constructors here use.

    ``row`` must have a pass row's shape (as every row a decoder hands out has: the right
    length, a pass event type); its values are passed on unchecked.
    """
    msg = {
        "type": row[0],
        "compile": row[1],
        "context": row[2],
        "name": row[3],
        "seq": row[4],
        "depth": row[5],
        "parent": row[6],
        "phase": row[7],
        "t_ns": row[8],
    }
    extra = PASS_ROW_EXTRA[row[0]]
    if extra is not None:
        msg[extra] = row[9]
    return msg


def as_message(item: Item | PassTuple) -> Message:
    """``item`` as a map: a pass row as the map it stands for (see :func:`message_of`), a map as it is."""
    return item if isinstance(item, dict) else message_of(item)


def t_ns_of(item: object) -> int | None:
    """The ``t_ns`` of a message or a pass row, when it has an integer one."""
    if isinstance(item, list):
        t = item[8] if len(item) == PASS_ROW_LEN else None
    elif isinstance(item, dict):
        t = item.get("t_ns")
    else:
        return None
    return t if type(t) is int else None


# Capabilities an agent may announce in its hello.
CAP_PASSES: Final = "passes"
CAP_KERNELS: Final = "kernels"


def hello(
    *,
    role: str,
    pid: int,
    start_time: int,
    software_version: str,
    capabilities: list[str],
    argv: list[str] | None = None,
    t_ns: int = 0,
    ppid: int | None = None,
    rank: int | None = None,
) -> Message:
    """Both ends send one first. ``start_time`` is the process start time in clock ticks since
    boot (``/proc/PID/stat`` field 22), which tells a reused pid from the original process.

    An agent also names its parent process (``ppid``) and, in a process started by a distributed
    launcher such as ``torchrun``, its ``rank``: a client watching several processes places each
    one under its parent and labels it by rank."""
    msg: Message = {
        "type": HELLO,
        "proto": list(PROTOCOL_VERSION),
        "role": role,
        "pid": pid,
        "start_time": start_time,
        "version": software_version,
        "caps": capabilities,
        "argv": argv or [],
        "t_ns": t_ns,
    }
    if ppid is not None:
        msg["ppid"] = ppid
    if rank is not None:
        msg["rank"] = rank
    return msg


def heartbeat(*, t_ns: int, produced: int, dropped: int, open_passes: int, observer_errors: int = 0) -> Message:
    """Sent about once a second: ``produced`` events so far in the target, ``dropped`` for this
    client so far, passes open now, and ``observer_errors``: failures the agent caught in its
    own observers so far (each one an event that may be missing or incomplete)."""
    return {
        "type": HEARTBEAT,
        "t_ns": t_ns,
        "produced": produced,
        "dropped": dropped,
        "open_passes": open_passes,
        "observer_errors": observer_errors,
    }


def sync(*, t_ns: int, backlog: int, backlog_lost: int) -> Message:
    """Ends the catch-up a client receives on connect: ``backlog`` events were replayed,
    ``backlog_lost`` older ones no longer held (the open passes are always replayed)."""
    return {"type": SYNC, "t_ns": t_ns, "backlog": backlog, "backlog_lost": backlog_lost}


def dropped(*, t_ns: int, count: int, total: int) -> Message:
    """This client's queue overflowed: ``count`` events lost since the last report."""
    return {"type": DROPPED, "t_ns": t_ns, "count": count, "total": total}


def bye(*, t_ns: int, produced: int, dropped: int, reason: str) -> Message:
    return {"type": BYE, "t_ns": t_ns, "produced": produced, "dropped": dropped, "reason": reason}


COMPILE_ORIGIN_FIELDS: Final = ("kind", "caller", "jit", "config", "input_hash", "input_diff")
"""Optional fields of a ``compile_begin`` (protocol 1.1 agents may send them; readers that do not
know them ignore them): what kind of compile it is (``"pipeline"``: a pass pipeline the program
ran itself), where the program asked for it, the ``@tilelang.jit`` function that did, and its
inputs (pass configuration, structural hash of the input module, and where the IR is kept, the
diff from the input module of the kernel's compile before); see ``docs/protocol.md``."""
COMPILE_KIND_PIPELINE: Final = "pipeline"
"""``kind`` of a compile that is a pass pipeline the program ran itself, outside TileLang's entry points."""


def compile_begin(
    *, compile: int, label: str, kernel: str | None, target: str | None, t_ns: int, **origin: Any
) -> Message:
    """``origin``: any of :data:`COMPILE_ORIGIN_FIELDS` that is known (those that are not are left out)."""
    msg: Message = {
        "type": COMPILE_BEGIN,
        "compile": compile,
        "label": label,
        "kernel": kernel,
        "target": target,
        "t_ns": t_ns,
    }
    for key in COMPILE_ORIGIN_FIELDS:
        value = origin.get(key)
        if value is not None:
            msg[key] = value
    return msg


def compile_end(
    *,
    compile: int,
    label: str,
    t_ns: int,
    duration_ns: int,
    ok: bool,
    error: str | None = None,
    error_type: str | None = None,
    traceback: str | None = None,
    stage: str | None = None,
) -> Message:
    """``error`` is ``"Type: message"``; ``stage`` is where it failed: ``"pass"`` or
    ``"codegen"`` (or ``None`` when it succeeded or failed elsewhere)."""
    return {
        "type": COMPILE_END,
        "compile": compile,
        "label": label,
        "t_ns": t_ns,
        "duration_ns": duration_ns,
        "ok": ok,
        "error": error,
        "error_type": error_type,
        "traceback": traceback,
        "stage": stage,
    }


def pass_context(kind: str, *, compile: int, context: int, t_ns: int) -> Message:
    """``kind`` is :data:`PASS_CONTEXT_ENTER` or :data:`PASS_CONTEXT_EXIT`."""
    return {"type": kind, "compile": compile, "context": context, "t_ns": t_ns}


def pass_start(
    *, compile: int, context: int, name: str, seq: int, depth: int, parent: int | None, phase: str | None, t_ns: int
) -> Message:
    return {
        "type": PASS_START,
        "compile": compile,
        "context": context,
        "name": name,
        "seq": seq,
        "depth": depth,
        "parent": parent,
        "phase": phase,
        "t_ns": t_ns,
    }


def pass_end(
    *,
    compile: int,
    context: int,
    name: str,
    seq: int,
    depth: int,
    parent: int | None,
    phase: str | None,
    t_ns: int,
    duration_ns: int,
    changed: bool | None = None,
) -> Message:
    """A pass's end; ``changed``: whether it changed the module (``None``: not known, as when no
    client was attached; the field is then left out, and the event may travel as a row)."""
    msg = pass_start(
        compile=compile, context=context, name=name, seq=seq, depth=depth, parent=parent, phase=phase, t_ns=t_ns
    )
    msg["type"] = PASS_END
    msg["duration_ns"] = duration_ns
    if changed is not None:
        msg["changed"] = changed
    return msg


def pass_incomplete(
    *,
    compile: int,
    context: int,
    name: str,
    seq: int,
    depth: int,
    parent: int | None,
    phase: str | None,
    t_ns: int,
    error: str | None,
) -> Message:
    """A pass that started and never finished (its pass context exited on an exception)."""
    msg = pass_start(
        compile=compile, context=context, name=name, seq=seq, depth=depth, parent=parent, phase=phase, t_ns=t_ns
    )
    msg["type"] = PASS_INCOMPLETE
    msg["error"] = error
    return msg


def callback_mismatch(*, compile: int, context: int, expected: str | None, got: str, t_ns: int) -> Message:
    """The instrument saw a pass finish that is not the innermost open one."""
    return {
        "type": CALLBACK_MISMATCH,
        "compile": compile,
        "context": context,
        "expected": expected,
        "got": got,
        "t_ns": t_ns,
    }


def codegen_begin(*, compile: int, t_ns: int, name: str | None = None) -> Message:
    """A codegen step starts; ``name`` is the backend's build function (a compile may run
    several, e.g. ``target.build.tilelang_cuda`` then ``target.build.tilelang_c_host``)."""
    return {"type": CODEGEN_BEGIN, "compile": compile, "t_ns": t_ns, "name": name}


def codegen_end(
    *, compile: int, t_ns: int, duration_ns: int, ok: bool, error: str | None = None, name: str | None = None
) -> Message:
    """The most recent codegen step (of that ``name``) ended; a failure carries the compiler's text."""
    return {
        "type": CODEGEN_END,
        "compile": compile,
        "t_ns": t_ns,
        "duration_ns": duration_ns,
        "ok": ok,
        "error": error,
        "name": name,
    }


COMPILER_RUNNING: Final = "running"
"""``state`` of a ``compile_process``: the process runs (first seen, or its CPU time grew)."""
COMPILER_ENDED: Final = "ended"
"""``state``: the process ended (``exit`` says how, when the agent saw it)."""
COMPILER_LEFT: Final = "left"
"""``state``: the process still ran when its codegen step ended; it is watched no longer."""
COMPILER_STATES: Final = frozenset({COMPILER_RUNNING, COMPILER_ENDED, COMPILER_LEFT})


def compile_process(
    *,
    compile: int,
    step: str | None,
    pid: int,
    ppid: int,
    name: str,
    argv: list[str],
    state: str,
    running_ns: int,
    cpu_ns: int,
    exit: int | None,
    t_ns: int,
) -> Message:
    """A process that a codegen step of ``compile`` runs, directly or below another (nvcc, and
    below it cicc, ptxas, the host compiler), as the agent saw it at ``t_ns``: ``name`` (the
    kernel's short name of it), ``argv``, its ``state`` (:data:`COMPILER_STATES`), how long it
    had run (``running_ns``) and the CPU time it used (``cpu_ns``), and its ``exit`` status
    when the agent saw it end (a code, or minus the signal that ended it)."""
    return {
        "type": COMPILE_PROCESS,
        "compile": compile,
        "step": step,
        "pid": pid,
        "ppid": ppid,
        "name": name,
        "argv": argv,
        "state": state,
        "running_ns": running_ns,
        "cpu_ns": cpu_ns,
        "exit": exit,
        "t_ns": t_ns,
    }


PASS_CONTEXT_FIELDS: Final = ("target", "config_json", "opt_level", "required_pass", "disabled_pass")
"""The target and pass context in force, as failure captures and ``stuck`` answers hold them."""
FAILED_PASS_FIELDS: Final = (*PASS_CONTEXT_FIELDS, "ir_script", "ir_json", "ir_missing")
"""What a ``compile_failure`` of ``stage`` ``"pass"`` captured."""
FAILED_CODEGEN_FIELDS: Final = (
    *PASS_CONTEXT_FIELDS,
    "source",
    "source_missing",
    "compiler_output",
    "nvcc_format",
    "nvcc_arch",
    "nvcc_options",
    "nvcc_command",
    "tilelang_paths",
)
"""What a ``compile_failure`` of ``stage`` ``"codegen"`` captured; see ``docs/protocol.md``."""


def compile_failure(
    *,
    compile: int,
    stage: str,
    seq: int | None,
    name: str,
    error: str | None,
    error_type: str | None,
    t_ns: int,
    **captured: Any,
) -> Message:
    """What the agent captured of a failed compile, sent just before its ``compile_end``.

    ``stage`` ``"pass"``: the failed pass ``name`` numbered ``seq``, with :data:`FAILED_PASS_FIELDS`
    (the module it was given, the target, the pass-context configuration). ``stage``
    ``"codegen"``: the codegen step ``name`` (``seq`` null), with :data:`FAILED_CODEGEN_FIELDS`
    (the source nvcc was given, nvcc's arguments and output). A field not given is null.
    """
    fields = FAILED_CODEGEN_FIELDS if stage == "codegen" else FAILED_PASS_FIELDS
    unknown = captured.keys() - set(fields)
    if unknown:
        raise TypeError(f"a {stage} compile_failure has no field {', '.join(sorted(unknown))}")
    return {
        "type": COMPILE_FAILURE,
        "compile": compile,
        "stage": stage,
        "seq": seq,
        "name": name,
        "error": error,
        "error_type": error_type,
        **{key: captured.get(key) for key in fields},
        "t_ns": t_ns,
    }


def recording(
    *, created_unix: float, software_version: str, source: str, context_until_ns: int | None = None
) -> Message:
    """First frame of a recording, after the file magic. ``context_until_ns``: where a cut's own
    stretch begins in stream time (what comes before it is only the context the stretch needs)."""
    header: Message = {
        "type": RECORDING,
        "proto": list(PROTOCOL_VERSION),
        "created_unix": created_unix,
        "version": software_version,
        "source": source,
    }
    if context_until_ns is not None:
        header["context_until_ns"] = context_until_ns
    return header


PROCESS_ENDED: Final = "ended"
PROCESS_FAILED: Final = "failed"


def process(*, pid: int, start_time: int, state: str | None = None, reason: str | None = None) -> Message:
    """In a stream that merges the streams of several processes (``iket-tui attach PID PID``,
    ``run`` following a program's children) and in its recording: the messages that follow, up
    to the next ``process``, come from the agent of process ``pid``. With ``state``
    (:data:`PROCESS_ENDED` or :data:`PROCESS_FAILED`), that process's stream ended, ``reason``
    saying why; the stream of the others goes on."""
    msg: Message = {"type": PROCESS, "pid": pid, "start_time": start_time}
    if state is not None:
        msg["state"] = state
        msg["reason"] = reason or state
    return msg


def checkpoint(*, messages: int, dropped: int, t_ns: int) -> Message:
    """Periodic in a recording: messages written so far, drops seen so far."""
    return {"type": CHECKPOINT, "messages": messages, "dropped": dropped, "t_ns": t_ns}


def end(*, messages: int, dropped: int, t_ns: int, reason: str) -> Message:
    """Last frame of a cleanly closed recording."""
    return {"type": END, "messages": messages, "dropped": dropped, "t_ns": t_ns, "reason": reason}


def request(*, id: int, what: str, **fields: Any) -> Message:
    """A client asks the agent for ``what`` (:data:`WHAT_STACKS`, :data:`WHAT_IR` with its
    fields); the answer carries ``id``."""
    return {"type": REQUEST, "id": id, "what": what, **fields}


def response(*, id: int, what: str, t_ns: int, ok: bool, error: str | None = None, **fields: Any) -> Message:
    """The agent's answer to request ``id``: ``ok`` with the fields ``what`` defines, or ``error``
    (one line). For :data:`WHAT_STACKS`: ``threads``, a list of ``{"id", "name", "daemon",
    "agent", "frames"}`` with frames ``{"file", "line", "function", "code"}``, innermost last."""
    return {"type": RESPONSE, "id": id, "what": what, "t_ns": t_ns, "ok": ok, "error": error, **fields}
