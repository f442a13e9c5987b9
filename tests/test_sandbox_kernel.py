"""Issue 26, item 1: a confined command cannot change the host's kernel settings.

Root needs no capability to write most of /proc/sys: the kernel checks the
file mode, owned by uid 0. So a command run by root under ``read-only`` once
set the host's hostname through ``/proc/sys/kernel/hostname`` and had its
write to ``core_pattern`` accepted. Here the attack runs in real bubblewrap,
as root (this process, when it is root) and as an ordinary user
(``setpriv`` to nobody when we are root, this process otherwise).

Nothing here may damage the machine if the sandbox regresses: core_pattern
gets its own value back, the other files are only opened for writing, and
the hostname is restored (and the test failed) if it ever changes.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from codexcore.tools.sandbox import SandboxSpec, confine, probe_sandbox

RUN_TIMEOUT = 20.0
NOBODY = 65534

# /bin/sh, so it runs as any user. attempt NAME PATH [VALUE]: write VALUE, or
# with no VALUE only open PATH for writing (sysrq-trigger acts on any byte).
ATTACK = r"""
attempt() {
  [ -e "$2" ] || { echo "$1=absent"; return; }
  if [ $# -eq 3 ]; then out=$( (printf '%s\n' "$3" > "$2") 2>&1 )
  else out=$( (: >> "$2") 2>&1 ); fi
  if [ $? -eq 0 ]; then echo "$1=WRITTEN"; else echo "$1=refused:$out" | tr '\n' ' '; echo; fi
}
attempt hostname /proc/sys/kernel/hostname codexcore-attack
attempt core_pattern /proc/sys/kernel/core_pattern "$(cat /proc/sys/kernel/core_pattern)"
attempt ip_forward /proc/sys/net/ipv4/ip_forward
attempt sysrq /proc/sysrq-trigger
attempt irq /proc/irq/default_smp_affinity
attempt sysfs "$1"
if hostname codexcore-attack 2>/dev/null; then echo "sethostname=WRITTEN"
else echo "sethostname=refused"; fi
echo "uts=$(readlink /proc/self/ns/uts)"
echo "name=$(cat /proc/sys/kernel/hostname)"
"""
ATTACKED = ("hostname", "core_pattern", "ip_forward", "sysrq", "irq", "sysfs", "sethostname")
# Read-only mount (root), or the file mode (an ordinary user): either way, refused.
REFUSALS = ("Read-only file system", "Permission denied")

SPECS = {
    "read-only": SandboxSpec(mode="read-only"),
    "workspace-write": SandboxSpec(mode="workspace-write"),
    "workspace-write+net": SandboxSpec(mode="workspace-write", network_access=True),
    # A writable / must not make the kernel's files under /sys writable.
    "workspace-write+/": SandboxSpec(mode="workspace-write", writable_roots=("/",)),
}


@pytest.fixture
def bwrap() -> str:
    status = probe_sandbox()
    if status.kind != "bwrap" or status.executable is None:
        pytest.skip(f"no working bubblewrap here: {status.reason}")
    return status.executable


@pytest.fixture
def host_settings_kept() -> Iterator[None]:
    """Fail (after putting them back) if the host's hostname or core_pattern changed."""
    paths = [Path("/proc/sys/kernel/hostname"), Path("/proc/sys/kernel/core_pattern")]
    before = {path: path.read_text() for path in paths}
    yield
    changed = {path: path.read_text() for path in paths if path.read_text() != before[path]}
    for path in changed:  # a regression must not leave the machine renamed
        path.write_text(before[path])
    assert not changed, f"the attack changed the host's {sorted(map(str, changed))}"


@pytest.fixture
def shared_cwd() -> Iterator[Path]:
    """A directory every user may enter (pytest's tmp_path is private to its owner)."""
    path = Path(tempfile.mkdtemp(prefix="codexcore-kernel-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path)


def a_sysfs_file_root_may_write() -> str:
    """A regular file under /sys/kernel whose mode lets its owner (root) write it."""
    for directory, _, files in os.walk("/sys/kernel"):
        for name in sorted(files):
            path = os.path.join(directory, name)
            if os.stat(path).st_mode & 0o200:
                return path
    return "/sys/kernel/no-writable-file-found"


def as_user(user: str) -> list[str]:
    """The prefix that runs a command as ``user`` ("root" or "ordinary"), or skip."""
    if user == "root":
        if os.geteuid() != 0:
            pytest.skip("the root case needs root: as a user the file modes refuse already")
        return []
    if os.geteuid() != 0:
        return []  # this process is the ordinary user
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv: no way to become an ordinary user")
    return [setpriv, f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]


def run_attack(bwrap: str, spec: SandboxSpec, cwd: Path, prefix: list[str]) -> dict[str, str]:
    argv = ["/bin/sh", "-c", ATTACK, "attack", a_sysfs_file_root_may_write()]
    with confine(argv, spec, str(cwd), bwrap=bwrap) as command:
        result = subprocess.run(
            [*prefix, *command.argv],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT,
            check=False,
            pass_fds=command.pass_fds,
        )
    if prefix and result.stderr.startswith("bwrap: "):
        pytest.skip(f"bubblewrap cannot start a sandbox as uid {NOBODY}: {result.stderr.strip()}")
    assert result.returncode == 0, result.stdout + result.stderr
    return dict(line.split("=", 1) for line in result.stdout.splitlines())


@pytest.mark.usefixtures("host_settings_kept")
@pytest.mark.parametrize("user", ["root", "ordinary"])
@pytest.mark.parametrize("spec", SPECS.values(), ids=SPECS.keys())
def test_a_confined_command_cannot_change_the_hosts_kernel_settings(
    bwrap: str, shared_cwd: Path, spec: SandboxSpec, user: str
) -> None:
    report = run_attack(bwrap, spec, shared_cwd, as_user(user))
    assert report["hostname"] != "absent", report
    assert report["core_pattern"] != "absent", report
    for name in ATTACKED:
        outcome = report[name]
        assert outcome == "absent" or outcome.startswith("refused"), (name, report)
        if outcome.startswith("refused:"):
            assert any(refusal in outcome for refusal in REFUSALS), (name, outcome)


@pytest.mark.usefixtures("host_settings_kept")
@pytest.mark.parametrize("user", ["root", "ordinary"])
def test_the_sandbox_has_its_own_hostname_namespace(
    bwrap: str, shared_cwd: Path, user: str
) -> None:
    report = run_attack(bwrap, SPECS["read-only"], shared_cwd, as_user(user))
    # Its own UTS namespace: a name set there could never reach the host. The
    # name itself is the host's, so tools keyed on it behave as outside.
    assert report["uts"] != os.readlink("/proc/self/ns/uts")
    assert report["name"] == socket.gethostname()
