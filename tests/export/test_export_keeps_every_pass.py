"""An export writes every pass of its recording: the UI's bound on passes held does not apply
to the sessions an export reads a recording into, streamed or whole."""

from __future__ import annotations

from iket_tui.export.common import recording_session
from iket_tui.export.stream import CompileStream
from iket_tui.model.pass_bound import DEFAULT_MAX_PASSES
from iket_tui.model.synthetic import agent_hello, lowerings


def test_a_whole_recording_keeps_every_pass() -> None:
    session = recording_session([agent_hello(), *(msg for spec in lowerings(6) for msg in spec.messages())])
    assert session.max_passes > DEFAULT_MAX_PASSES * 1000
    assert session.tree.summarised == 0
    assert len(session.tree.passes) > 400


def test_a_streamed_export_is_not_bounded_either() -> None:
    assert CompileStream().session.max_passes > DEFAULT_MAX_PASSES * 1000
