"""A short fuzz run of every target in every test run (``just fuzz SECONDS`` runs longer).

``IKET_FUZZ_EXAMPLES`` sets the inputs per target (600 by default: about a minute in all). An
input that breaks a target is kept in ``tests/fuzz/seeds/``, where every later run replays it.
"""

from __future__ import annotations

import os

import pytest
from fuzz_targets import TARGETS
from fuzzing import Found, fuzz, keep

EXAMPLES = int(os.environ.get("IKET_FUZZ_EXAMPLES", "600"))


@pytest.mark.parametrize("target", TARGETS)
def test_no_generated_recording_breaks_the_contract(target: str) -> None:
    try:
        ran = fuzz(target, EXAMPLES)
    except Found as found:
        pytest.fail(f"{found} (an input of {len(found.data):,} bytes, kept in {keep(found)})")
    assert ran == EXAMPLES
