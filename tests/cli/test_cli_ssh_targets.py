"""``attach HOST:`` where this directory holds a file named like one of its ``HOST:PID``
targets: the remote agents stay remote, and a host that cannot be reached is one line.

The ssh is a real program named by ``IKET_TUI_SSH``: it lists one agent when asked for the
remote targets and fails as ssh does (exit 255) when asked for a bridge, which ``HOST:`` asks
for once, for every agent there.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_helpers import assert_one_line_error, run_iket

from iket_tui.sources.ssh import SSH_VARIABLE

SSH = """#!/bin/sh
echo "$@" >> {log}
case "$*" in
  *completion*) printf '123\\tpython train.py\\n'; exit 0 ;;
  *) echo "ssh: connect to host gpu-box port 22: Connection refused" >&2; exit 255 ;;
esac
"""


def test_attach_host_colon_with_a_local_file_named_like_its_target_stays_remote(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ssh, log = tmp_path / "ssh", tmp_path / "ssh.log"
    ssh.write_text(SSH.format(log=log))
    ssh.chmod(0o755)
    monkeypatch.setenv(SSH_VARIABLE, str(ssh))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "gpu-box:123").write_text("a file, not a target")
    result = run_iket("attach", "gpu-box:")
    assert_one_line_error(result, "gpu-box: ssh cannot reach it", "Connection refused")
    asked = log.read_text().splitlines()
    assert len(asked) == 1 and "bridge --all" in asked[0]  # one connection for every agent there


OLD_IKET = """#!/bin/sh
echo "iket-tui: unrecognized arguments: --all" >&2
exit 2
"""


def test_attach_host_colon_where_the_iket_tui_there_is_older_says_to_upgrade_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ssh = tmp_path / "ssh"
    ssh.write_text(OLD_IKET)
    ssh.chmod(0o755)
    monkeypatch.setenv(SSH_VARIABLE, str(ssh))
    result = run_iket("attach", "node[1-2]:")
    assert_one_line_error(result, "node1: its iket-tui has no bridge --all", "upgrade it there", "(and 1 more hosts)")
