"""Putting the runtime into generated CUDA: event tables, module-wide ids, per-kernel warp logs,
clear refusals, and code nvcc accepts for sm_90a."""

from __future__ import annotations

import base64
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from iket_tui.ring.device import (
    MARKER,
    RUNTIME_RESOURCE,
    WARP_VARIABLE,
    InjectionError,
    RingTarget,
    inject,
    recover_events,
    runtime_cuh,
    runtime_defines,
)
from iket_tui.ring.events import EventInfo, decode_token
from iket_tui.ring.layout import RingGeometry

RING = RingTarget(0x7F0000000000, RingGeometry(8192, 256), ring_id=0xABC)


def token(name: str, kind: str = "mark", payload: str = "NoPayload", event_id: int = 1) -> str:
    """A token as TileLang's IKET frontend writes it."""
    ids = {"NoPayload": 0, "int32": 5, "uint32": 6, "float32": 13}
    data = {
        "event_id": event_id,
        "kind": kind,
        "name": name,
        "payload_iket_id": ids[payload],
        "payload_type": payload,
        "range_id": 7 if kind == "range" else 0,
        "version": 1,
    }
    raw = json.dumps(data, sort_keys=True, separators=(",", ":")).encode()
    return "__tl_iket_v1_" + base64.urlsafe_b64encode(raw).decode().rstrip("=")


KERNELS = f"""#include <cuda_runtime.h>

extern "C" __global__ void first(float* __restrict__ out);
extern "C" __global__ void __launch_bounds__(128, 1) first(float* __restrict__ out) {{
  TL_IKET_EVENT(7, "{token("start", event_id=7)}");
  for (int i = 0; i < 4; ++i) {{
    TL_IKET_EVENT_PAYLOAD_U32(3, i, "{token("step", "range", "uint32", 3)}");
    TL_IKET_EVENT(31);
  }}
  TL_IKET_EVENT_PAYLOAD_F32(9, out[0], "{token("value", "mark", "float32", 9)}");
  out[threadIdx.x] = 1.0f;
}}

extern "C" __global__ void untraced(float* __restrict__ out) {{
  out[threadIdx.x] = 2.0f;
}}

extern "C" __global__ void __launch_bounds__(64) second(int* __restrict__ out) {{
  TL_IKET_EVENT(2, "{token("start", event_id=2)}");
  TL_IKET_EVENT_PAYLOAD_U32(4, (int)blockIdx.x, "{token("block", "mark", "int32", 4)}");
  out[threadIdx.x] = 3;
}}
"""


def test_events_get_module_wide_ids_and_the_table_names_them() -> None:
    code, table = recover_events(KERNELS, module=5)
    assert table.module == 5 and table.id_bits == 5 and table.range_end_id == 31
    assert table.kernels == ("first", "untraced", "second")
    assert table.events == (
        EventInfo(1, "start", "mark"),
        EventInfo(2, "step", "range", "uint32", 7),
        EventInfo(3, "value", "mark", "float32"),
        EventInfo(4, "block", "mark", "int32"),
    )
    assert code.count("TL_IKET_EVENT(1, ") == 2  # "start" in both kernels is one event
    assert "TL_IKET_EVENT(31);" in code


def test_the_runtime_goes_in_before_the_kernels_and_each_traced_kernel_opens_a_warp_log() -> None:
    injected = inject(KERNELS, RING, module=5)
    code = injected.code
    assert code.index(MARKER) < code.index('extern "C" __global__')
    assert code.index("#include <cuda_runtime.h>") < code.index(MARKER)
    assert f"iket_tui::Warp {WARP_VARIABLE}(0u);" in code
    assert f"iket_tui::Warp {WARP_VARIABLE}(2u);" in code
    assert f"{WARP_VARIABLE}(1u)" not in code  # the kernel without events is left alone
    assert "#define IKET_TUI_RING_ADDRESS 0x7f0000000000ull" in code
    assert "ring 0xabc" in code
    runtime = runtime_cuh()
    assert runtime in code and not re.search(r"^\s*#\s*include", runtime, re.MULTILINE)  # nvcc needs no include path
    assert injected.events.kernels == ("first", "untraced", "second")


def test_code_without_events_comes_back_unchanged() -> None:
    plain = 'extern "C" __global__ void k(float* out) { out[0] = 1.0f; }\n'
    assert inject(plain, RING, module=1).code == plain


def test_without_a_ring_events_compile_to_nothing_but_the_table_is_kept() -> None:
    injected = inject(KERNELS, None, module=2)
    assert "#define TL_IKET_EVENT(ID, ...) ((void)0)" in injected.code
    assert WARP_VARIABLE + "(" not in injected.code
    assert [event.name for event in injected.events.events] == ["start", "step", "value", "block"]


@pytest.mark.parametrize(
    ("code", "message"),
    [
        ('  TL_IKET_EVENT(1, "' + token("x") + '");\n  foo("' + token("y") + '");\n', "not attached to a TL_IKET"),
        ("  TL_IKET_EVENT(3);\n", "carries no token"),
        ('  TL_IKET_EVENT(1, "' + token("x", payload="int32") + '");\n', "does not match payload int32"),
        (
            '  TL_IKET_EVENT(1, "'
            + token("x")
            + '");\n  TL_IKET_EVENT_PAYLOAD_U32(1, 2, "'
            + token("x", payload="int32")
            + '");\n',
            "used with payloads none and int32",
        ),
        ('  TL_IKET_EVENT(1, "__tl_iket_v1_bm90IGpzb24");\n', "undecodable IKET event token"),
    ],
)
def test_code_the_runtime_cannot_instrument_is_refused_in_one_line(code: str, message: str) -> None:
    source = 'extern "C" __global__ void k() {\n' + code + "}\n"
    with pytest.raises(InjectionError, match=message) as caught:
        inject(source, RING, module=1)
    assert "\n" not in str(caught.value)


def test_a_module_can_be_instrumented_only_once_and_holds_at_most_253_events() -> None:
    once = inject(KERNELS, RING, module=1).code
    with pytest.raises(InjectionError, match="already holds the iket-tui runtime"):
        inject(once, RING, module=2)
    calls = [f'  TL_IKET_EVENT(1, "{token(f"e{i}")}");\n' for i in range(254)]
    with pytest.raises(ValueError, match="too many IKET events in one module"):
        inject('extern "C" __global__ void k() {\n' + "".join(calls) + "}\n", RING, module=1)
    wide = inject('extern "C" __global__ void k() {\n' + "".join(calls[:40]) + "}\n", RING, module=1)
    assert wide.events.id_bits == 6
    assert [event.event_id for event in wide.events.events][29:32] == [30, 32, 33]  # 31 stays the range end


def test_tokens_read_back_as_tilelang_writes_them() -> None:
    event = decode_token(token("step", "range", "float32", 12))
    assert (event.name, event.kind, event.payload_type, event.range_id, event.frontend_id) == (
        "step",
        "range",
        "float32",
        7,
        12,
    )


needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc (the CUDA toolkit) on PATH")


def _nvcc(directory: Path, *args: str) -> None:
    result = subprocess.run(
        ["nvcc", "-arch=sm_90a", "-std=c++17", "-O3", *args],
        cwd=directory,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert "warning" not in result.stderr


def _ptx_kernels(ptx: str) -> dict[str, str]:
    """Each kernel's PTX, by name."""
    parts = re.split(r"^\.visible \.entry (\w+)\(", ptx, flags=re.MULTILINE)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


_TIMER_READ = re.compile(r"\bmov\.u64\s+%rd\d+, %globaltimer;")
_RECORD_STORE = re.compile(r"\bst\.global\.v4\.u32 \[%rd\d+\], \{%r\d+, %r\d+, %r\d+, %r\d+\};")
_CLAIM = "@p atom.relaxed.gpu.global.add.u64"
_WARP_COUNT = "@p red.relaxed.gpu.global.add.u64"


@needs_nvcc
def test_nvcc_accepts_the_runtime_for_sm_90a_in_every_ring_size(tmp_path: Path) -> None:
    sources = []
    for chunks in (1, 16, 64):
        ring = RingTarget(0x7F0000000000, RingGeometry(8192, 16 * chunks), ring_id=1)
        path = tmp_path / f"ring{chunks}.cu"
        path.write_text(inject(KERNELS, ring, module=3).code)
        sources.append(path.name)
    (tmp_path / "no_ring.cu").write_text(inject(KERNELS, None, module=3).code)
    sources.append("no_ring.cu")
    _nvcc(tmp_path, "-c", *sources)
    assert sorted(p.name for p in tmp_path.glob("*.o")) == ["no_ring.o", "ring1.o", "ring16.o", "ring64.o"]


@needs_nvcc
def test_the_ptx_of_traced_kernels_stores_one_record_per_event_with_no_fence(tmp_path: Path) -> None:
    geometry = RingGeometry(8192, 256)
    ring = RingTarget(0x7F0000000000, geometry, ring_id=1)
    (tmp_path / "traced.cu").write_text(inject(KERNELS, ring, module=3).code)
    (tmp_path / "no_ring.cu").write_text(inject(KERNELS, None, module=3).code)
    _nvcc(tmp_path, "--ptx", "traced.cu", "no_ring.cu")
    kernels = _ptx_kernels((tmp_path / "traced.ptx").read_text())
    assert sorted(kernels) == ["first", "second", "untraced"]

    counters = str(ring.address + geometry.descriptors_offset)
    records = str(ring.address + geometry.records_offset)
    for name, events in (("first", 10), ("second", 2)):  # first's loop of 4 ranges is unrolled
        ptx = kernels[name]
        assert len(_TIMER_READ.findall(ptx)) == events + 2  # every event, and the warp's begin and end
        assert "%globaltimer_lo" not in ptx and "%globaltimer_hi" not in ptx  # all 64 bits at once
        assert counters in ptx and records in ptx  # the ring's address is compiled in
        assert ptx.count(_CLAIM) == 1  # the warp claims its region: one atomic, one lane, no branch
        assert "shfl.sync" in ptx  # and hands the claim to the other lanes
        # one 16-byte store per event, three descriptor parts at the warp's begin, one at its end
        assert len(_RECORD_STORE.findall(ptx)) == events + 4
        assert ptx.count(_WARP_COUNT) == 2  # warps and records ended, one lane each
        assert "ld.global" not in ptx.split("%globaltimer")[0]  # nothing is loaded before the first event
        assert "fence" not in ptx and "membar" not in ptx and ".sys" not in ptx  # nothing waits on the host
    untraced = kernels["untraced"]
    assert "%globaltimer" not in untraced and counters not in untraced
    no_ring = (tmp_path / "no_ring.ptx").read_text()
    assert "%globaltimer" not in no_ring and "red." not in no_ring


@needs_nvcc
def test_the_runtime_resource_compiles_as_a_header_only_with_its_defines(tmp_path: Path) -> None:
    ring = RingTarget(0x7F0000000000, RingGeometry(8192, 256), ring_id=1)
    header = tmp_path / RUNTIME_RESOURCE
    header.write_text(runtime_cuh())
    kernel = f'extern "C" __global__ void k() {{\n  iket_tui::Warp {WARP_VARIABLE}(0u);\n  TL_IKET_EVENT(1);\n}}\n'
    included = runtime_defines(ring, module=3, id_bits=5) + f'#include "{RUNTIME_RESOURCE}"\n' + kernel
    (tmp_path / "included.cu").write_text(included)
    _nvcc(tmp_path, "--ptx", "included.cu")
    assert _TIMER_READ.search((tmp_path / "included.ptx").read_text())

    (tmp_path / "bare.cu").write_text(f'#include "{RUNTIME_RESOURCE}"\n')
    result = subprocess.run(["nvcc", "-arch=sm_90a", "--ptx", "bare.cu"], cwd=tmp_path, capture_output=True, text=True)
    assert result.returncode != 0 and "needs the ring's, the layout's and the module's #defines" in result.stderr
