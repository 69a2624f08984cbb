"""The ways out of a stuck compile in a session of several processes: the pass is named with its
process, and the reproducer's directory with the process's pid (compile numbers are each
process's own)."""

from __future__ import annotations

from pathlib import Path

from iket_tui.ui.hang_screens import ReproPane, StuckPass


def test_a_stuck_pass_of_one_of_several_processes_is_named_with_it(tmp_path: Path) -> None:
    alone = StuckPass(2, 31, "tl.LayoutInference", "gemm", 5_000_000_000)
    ranked = StuckPass(2, 31, "tl.LayoutInference", "gemm", 5_000_000_000, pid=4242, who="rank 3")

    assert alone.what == "tl.LayoutInference (pass 31 of compile 2, gemm)"
    assert ranked.what == "tl.LayoutInference (pass 31 of compile 2, gemm in rank 3)"

    def unused_ask(what: str, *, timeout_s: float, **fields: object) -> int:
        raise AssertionError("not asked")

    assert ReproPane(unused_ask, alone, save_dir=tmp_path).directory == tmp_path / "iket-repro-c2-p31"
    assert ReproPane(unused_ask, ranked, save_dir=tmp_path).directory == tmp_path / "iket-repro-pid4242-c2-p31"
