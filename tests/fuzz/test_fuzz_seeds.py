"""Every kept input, and the real recordings the fuzzer grows its inputs from, through every target."""

from __future__ import annotations

from pathlib import Path

import pytest
from fuzz_inputs import EXAMPLE, seeds
from fuzz_targets import TARGETS
from fuzzing import seed_files

from iket_tui.protocol.recording import MAGIC


def _recordings() -> list[tuple[str, bytes]]:
    grown_from = [(name, MAGIC + b"".join(frames)) for name, frames in seeds().items()]
    return [("h200-demo.msgpack", EXAMPLE.read_bytes()), *grown_from]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("seed", seed_files(), ids=lambda path: path.stem)
def test_a_kept_input_keeps_the_contract(seed: Path, target: str) -> None:
    TARGETS[target](seed.read_bytes())


@pytest.mark.parametrize("target", TARGETS)
def test_the_real_recordings_keep_the_contract(target: str) -> None:
    for _name, data in _recordings():
        TARGETS[target](data)
