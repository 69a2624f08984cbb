"""Tests marked ``tilelang`` skip, with the reason, where the ``tilelang`` extra is not installed;
the slowest end-to-end tests are marked ``slow``: a lane of their own (``just slow``), which the
README's test command leaves out (``-m "not slow"`` in pyproject.toml) and CI runs after it."""

from __future__ import annotations

import importlib.util

import pytest

HAS_TILELANG = importlib.util.find_spec("tilelang") is not None
"""Whether TileLang can be imported here; looked up without importing it (that takes seconds)."""


SLOW = (
    # Generated recordings by the thousand through every reader (the seeds stay in the main lane).
    "tests/fuzz/test_fuzz.py::",
    # Pools terminated under spawn and fork, ten processes each.
    "tests/e2e/test_pool_failures.py::",
    # An OpenSSH server of its own and the bridge at the other end, test by test.
    "tests/e2e/test_ssh_bridge.py::",
    "tests/e2e/test_job_across_hosts.py::",
    "tests/web/test_web_view.py::test_the_pass_tree_in_a_browser_folds_and_unfolds_with_keys",
    "tests/e2e/test_made_passes.py::test_an_argument_without_a_literal_form_is_named_and_given_on_the_command_line",
    "tests/e2e/test_hangs.py::test_a_pass_in_the_programs_main_script_is_reproduced_without_running_the_program",
    "tests/e2e/test_inject.py::test_a_program_started_without_the_agent_is_attached_and_its_compiles_observed",
    "tests/e2e/test_processes.py::test_run_headless_records_workers_of_the_fork_server_told_apart",
    "tests/e2e/test_repro.py::test_a_codegen_reproducer_compiles_against_this_tilelangs_headers",
    "tests/cli/test_cli_ranks.py::test_run_ranks_over_torchrun_names_the_rank_behind_the_others",
    "tests/protocol/test_frame_limits.py::test_a_live_reader_refuses_a_frame_beyond_the_object_limit",
    "tests/ring/test_ring_tilelang.py::test_the_runtime_variants_the_h200_measures_still_apply_and_compile",
)
"""Node ids (or their prefixes) of the tests in the slow lane: the slowest end-to-end ones, each
several times the suite's median, whose behaviour other tests of the main lane touch more cheaply."""


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # (first, so that -m sees the slow marks it adds)
    slow = pytest.mark.slow
    for item in items:
        if item.nodeid.startswith(SLOW):
            item.add_marker(slow)
    if HAS_TILELANG:
        return
    skip = pytest.mark.skip(reason="needs TileLang: install the tilelang extra (pip install -e '.[tilelang,test]')")
    for item in items:
        if item.get_closest_marker("tilelang") is not None:
            item.add_marker(skip)
