"""attach's targets for a job across machines: ``node[1-8]:`` ranges (zero-padded, lists),
``@hosts.txt`` and ``--hosts FILE`` host lists, mixed with local pids; a bad one is one line and
exit code 2, before any ssh runs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from cli_helpers import assert_one_line_error, run_iket

from iket_tui.cli.errors import UsageError
from iket_tui.cli.targets import expand_hosts, hosts_file, job_targets


def test_host_ranges_name_one_host_per_number_in_order() -> None:
    assert expand_hosts("node[1-3]") == ["node1", "node2", "node3"]
    assert expand_hosts("node[08-10]") == ["node08", "node09", "node10"]  # zero-padded as written
    assert expand_hosts("node[1,3,5]") == ["node1", "node3", "node5"]
    assert expand_hosts("gpu[1-2,7].lab") == ["gpu1.lab", "gpu2.lab", "gpu7.lab"]
    assert expand_hosts("rack[1-2]-node[1-2]") == ["rack1-node1", "rack1-node2", "rack2-node1", "rack2-node2"]
    assert expand_hosts("gpu-box") == ["gpu-box"]


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("node[8-1]", "the range 8-1 runs backwards"),
        ("node[1-x]", "1-x is not a number or a range like 1-8"),
        ("node[]", "an empty part is not a number"),
        ("node[1-3", "an unclosed host range"),
        ("node[1-100000]", "names more than 4096 hosts"),
    ],
)
def test_a_bad_host_range_says_what_is_wrong_with_it(text: str, said: str) -> None:
    with pytest.raises(UsageError, match=said.replace("[", r"\[")):
        expand_hosts(text)


def test_a_host_list_names_one_host_a_line_with_comments_and_ranges(tmp_path: Path) -> None:
    listed = tmp_path / "hosts.txt"
    listed.write_text("# the job's machines\nnode1\n\nnode2:   # with a colon, as attach takes it\nnode[3-4]\n")
    assert hosts_file(listed) == ["node1", "node2", "node3", "node4"]


def test_targets_mix_hosts_host_pids_and_local_pids(tmp_path: Path) -> None:
    listed = tmp_path / "hosts.txt"
    listed.write_text("node5\n")
    job = job_targets(["node[1-2]:", "node3:41", "node3:42", "123", f"@{listed}"], hosts_from=None)
    assert job.local == ["123"]
    assert job.hosts == {"node1": None, "node2": None, "node3": {41, 42}, "node5": None}
    assert job.across_hosts
    assert job_targets(["node1:"]).across_hosts  # every agent there: one connection for them all
    assert not job_targets(["node1:41"]).across_hosts  # one process there: its own bridge, as before
    assert not job_targets(["123", "456"]).across_hosts


def test_every_host_of_a_hosts_file_is_watched_whole(tmp_path: Path) -> None:
    listed = tmp_path / "hosts.txt"
    listed.write_text("node[01-02]\n")
    assert job_targets([], hosts_from=listed).hosts == {"node01": None, "node02": None}


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["node[8-1]:"], "node[8-1]: the range 8-1 runs backwards"),
        (["node[1-4]"], "node[1-4]: a host range needs a colon after it"),
        (["@missing-hosts.txt"], "missing-hosts.txt: cannot read the host list"),
        (["--hosts", "empty.txt"], "empty.txt: names no host"),
        (["--hosts", "spaced.txt"], "spaced.txt:2: 'node2 node3' is not a host"),
    ],
)
def test_attach_says_a_bad_target_in_one_line_before_any_ssh(
    args: list[str], said: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("IKET_TUI_SSH", str(tmp_path / "no-ssh-may-run"))
    (tmp_path / "empty.txt").write_text("# nothing yet\n")
    (tmp_path / "spaced.txt").write_text("node1\nnode2 node3\n")
    assert_one_line_error(run_iket("attach", *args), said)


@pytest.mark.parametrize(
    ("content", "said"),
    [(b"node1\n\xff\xfe\x00garbage\n", "not a host list (byte 6 is not UTF-8 text)"), (b"node1\n\x00\x01\n", ":2: ")],
)
def test_a_binary_file_is_not_a_host_list(content: bytes, said: str, tmp_path: Path) -> None:
    listed = tmp_path / "hosts.bin"
    listed.write_bytes(content)
    with pytest.raises(UsageError, match=re.escape(said)):
        hosts_file(listed)
