"""Running a fuzz target under hypothesis, and keeping the inputs that break it."""

from __future__ import annotations

import hashlib
from pathlib import Path

from fuzz_inputs import recordings
from fuzz_targets import TARGETS, Target
from hypothesis import HealthCheck, Phase, Verbosity, given, settings

SEEDS = Path(__file__).resolve().parent / "seeds"
"""Every input that ever broke a target, replayed by the suite through every target."""


class Found(Exception):
    """An input that breaks a target's contract: the smallest one hypothesis could shrink it to."""

    def __init__(self, target: str, data: bytes, error: BaseException) -> None:
        super().__init__(f"{target}: {type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}")
        self.target = target
        self.data = data
        self.error = error


def fuzz(target: str, examples: int) -> int:
    """Feed ``target`` ``examples`` generated recordings; returns how many ran. Raises
    :class:`Found` for one that breaks its contract."""
    check = TARGETS[target]
    last: list[bytes] = []
    ran = 0

    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        phases=(Phase.generate, Phase.shrink),
        suppress_health_check=list(HealthCheck),
        report_multiple_bugs=False,
        verbosity=Verbosity.quiet,
    )
    @given(recordings())
    def run(data: bytes) -> None:
        nonlocal ran
        ran += 1
        last[:] = [data]  # hypothesis runs the smallest failing input last
        check(data)

    try:
        run()
    except Exception as exc:
        if not last or _passes(check, last[0]):
            raise  # the harness broke (generating an input), not the target
        raise Found(target, last[0], exc) from exc
    return ran


def _passes(check: Target, data: bytes) -> bool:
    try:
        check(data)
    except Exception:
        return False
    return True


def keep(found: Found) -> Path:
    """Save a breaking input as a seed; returns its path."""
    SEEDS.mkdir(exist_ok=True)
    path = SEEDS / f"{found.target}-{hashlib.sha256(found.data).hexdigest()[:16]}.msgpack"
    path.write_bytes(found.data)
    return path


def seed_files() -> list[Path]:
    return sorted(SEEDS.glob("*.msgpack"))
