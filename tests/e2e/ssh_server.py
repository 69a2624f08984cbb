"""A real OpenSSH server on loopback, for the tests of ``HOST:PID``: started by the test, as this user.

:func:`start_sshd` writes a host key, a user key, an sshd configuration and an ssh client
configuration in a temporary directory, starts ``/usr/sbin/sshd -D`` on two free ports of
127.0.0.1 and returns once both accept connections. The client configuration names the
machine as a user would in ``~/.ssh/config``:

- ``box``: logs in with the user key; this checkout's iket-tui is on the session's PATH, as
  it would be on a machine where it is installed;
- ``bare``: the same machine through the second port, whose sessions have no iket-tui on PATH;
- ``stranger``: the first port with a key the server does not know (the login is refused);
- ``nowhere``: a port of 127.0.0.1 where nothing listens (the host is unreachable).

Both ports' sessions get the test's ``XDG_RUNTIME_DIR``, where the agents there listen.

With ``hosts`` (a name and a runtime directory each), every name is one more machine of a job
across machines: a port of its own whose sessions get that runtime directory, so that each
"host" sees only its own agents, as on a cluster.
"""

from __future__ import annotations

import contextlib
import functools
import getpass
import importlib.util
import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

SSHD = Path("/usr/sbin/sshd")
START_S = 30.0


class NoSshd(Exception):
    """An ssh server cannot be had here; the message says why (the test skips with it)."""


@dataclass
class Sshd:
    process: subprocess.Popen[bytes]
    client_config: Path
    log: Path

    def sessions(self) -> list[int]:
        """The pids of the server's processes that serve one connection each (its children)."""
        children = Path(f"/proc/{self.process.pid}/task/{self.process.pid}/children")
        try:
            return [int(pid) for pid in children.read_text().split()]
        except OSError:
            return []

    def stop(self) -> None:
        for pid in self.sessions():
            with contextlib.suppress(OSError):
                os.kill(pid, 9)
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start_sshd(home: Path, *, iket_bin: Path, runtime_dir: Path, hosts: dict[str, Path] | None = None) -> Sshd:
    """An sshd for this user on loopback (see the module's docstring); raises :class:`NoSshd`."""
    for tool in ("ssh", "ssh-keygen"):
        if shutil.which(tool) is None:
            raise NoSshd(f"no {tool}: install openssh-client (and openssh-server; .ci/run does)")
    if not SSHD.exists():
        raise NoSshd(f"no {SSHD}: install openssh-server (apt-get install -y openssh-server; .ci/run does)")
    if os.getuid() == 0:
        # sshd run by root separates privileges, in this directory (the package makes it at boot).
        with contextlib.suppress(OSError):
            Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
    for name in ("host_key", "user_key", "stranger_key"):
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", str(home / name)],
            check=True,
            capture_output=True,
        )
    authorized = home / "authorized_keys"
    shutil.copy(home / "user_key.pub", authorized)
    authorized.chmod(0o600)
    box_port, bare_port, nowhere_port = free_port(), free_port(), free_port()
    host_ports = {name: free_port() for name in hosts or {}}
    runtime = f"XDG_RUNTIME_DIR={runtime_dir}"
    host_ports_config = "".join(f"Port {port}\n" for port in host_ports.values())
    host_matches = "".join(
        f"Match LocalPort {port}\n    SetEnv PATH={iket_bin}:/usr/bin:/bin XDG_RUNTIME_DIR={(hosts or {})[name]}\n"
        for name, port in host_ports.items()
    )
    server_config = home / "sshd_config"
    server_config.write_text(
        f"""\
HostKey {home / "host_key"}
ListenAddress 127.0.0.1
Port {box_port}
Port {bare_port}
{host_ports_config}AuthorizedKeysFile {authorized}
AllowUsers {getpass.getuser()}
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PermitRootLogin prohibit-password
PidFile none
SetEnv PATH={iket_bin}:/usr/bin:/bin {runtime}
Match LocalPort {bare_port}
    SetEnv PATH=/usr/bin:/bin {runtime}
{host_matches}"""
    )
    host_key = (home / "host_key.pub").read_text().split()
    ports = (box_port, bare_port, *host_ports.values())
    known = "".join(f"[127.0.0.1]:{port} {host_key[0]} {host_key[1]}\n" for port in ports)
    (home / "known_hosts").write_text(known)
    client_config = home / "ssh_config"
    common = f"""\
    HostName 127.0.0.1
    User {getpass.getuser()}
    IdentitiesOnly yes
    UserKnownHostsFile {home / "known_hosts"}
    StrictHostKeyChecking yes
    PasswordAuthentication no
    KbdInteractiveAuthentication no
    ConnectTimeout 10
    LogLevel ERROR
"""
    client_config.write_text(
        f"Host box\n    Port {box_port}\n    IdentityFile {home / 'user_key'}\n{common}"
        f"Host bare\n    Port {bare_port}\n    IdentityFile {home / 'user_key'}\n{common}"
        f"Host stranger\n    Port {box_port}\n    IdentityFile {home / 'stranger_key'}\n{common}"
        f"Host nowhere\n    Port {nowhere_port}\n    IdentityFile {home / 'user_key'}\n{common}"
        + "".join(
            f"Host {name}\n    Port {port}\n    IdentityFile {home / 'user_key'}\n{common}"
            for name, port in host_ports.items()
        )
    )
    log = home / "sshd.log"
    process = subprocess.Popen(
        [str(SSHD), "-D", "-e", "-f", str(server_config)],
        stdout=subprocess.DEVNULL,
        stderr=log.open("wb"),
        stdin=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + START_S
    while not all(_accepts(port) for port in ports):
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            process.wait()
            raise NoSshd(f"sshd did not start: {log.read_text(errors='replace').strip()[-500:]}")
        time.sleep(0.05)
    return Sshd(process, client_config, log)


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


@functools.cache
def cli_helpers() -> ModuleType:
    """tests/cli/cli_helpers.py (``run_iket`` and the one-line error checks), loaded by its path
    for the ssh tests here: tests/cli is not on this directory's import path."""
    path = Path(__file__).resolve().parents[1] / "cli" / "cli_helpers.py"
    spec = importlib.util.spec_from_file_location("ssh_cli_helpers", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
