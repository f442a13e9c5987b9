"""codexcore.tools.sandbox: real bubblewrap, real processes.

Tests that start sandboxes skip (with the probe's reason) only where
``probe_sandbox()`` finds no working bwrap, so CI with bwrap runs them all.
"""

from __future__ import annotations

import os
import platform
import signal
import socket
import stat
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import attrs
import pytest

from codexcore.tools import _seccomp, sandbox
from codexcore.tools.sandbox import (
    SandboxSpec,
    SandboxStatus,
    confine,
    is_likely_sandbox_denial,
    probe_sandbox,
    wrap_command,
)

RUN_TIMEOUT = 20.0

READ_ONLY = SandboxSpec(mode="read-only")
WORKSPACE = SandboxSpec(mode="workspace-write")
NET_ON = SandboxSpec(mode="workspace-write", network_access=True)

Runner = Callable[..., "subprocess.CompletedProcess[str]"]


@pytest.fixture
def bwrap() -> str:
    """The probed bwrap executable, or skip the test with the probe's reason."""
    status = probe_sandbox()
    if status.kind != "bwrap" or status.executable is None:
        pytest.skip(f"no working bubblewrap here: {status.reason}")
    return status.executable


@pytest.fixture
def run(bwrap: str) -> Runner:
    """Run ``argv`` confined by ``spec`` in ``cwd``; stdout and stderr merged."""

    def _run(argv: list[str], spec: SandboxSpec, cwd: Path) -> subprocess.CompletedProcess[str]:
        with confine(argv, spec, str(cwd), bwrap=bwrap) as command:
            return subprocess.run(
                command.argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                timeout=RUN_TIMEOUT,
                check=False,
                pass_fds=command.pass_fds,
            )

    return _run


def sh(script: str) -> list[str]:
    return ["sh", "-c", script]


# --- argv ------------------------------------------------------------------


def test_danger_full_access_returns_argv_unchanged() -> None:
    argv = ("ls", "-la", "--", "-weird name")
    wrapped = wrap_command(argv, SandboxSpec(mode="danger-full-access"), "/", seccomp_fd=None)
    assert wrapped == list(argv)


@pytest.mark.parametrize(
    ("argv", "cwd"),
    [([], "/"), (["true"], "relative/dir")],
)
def test_wrap_command_rejects_empty_argv_and_relative_cwd(argv: list[str], cwd: str) -> None:
    with pytest.raises(ValueError, match=r"argv|cwd"):
        wrap_command(argv, READ_ONLY, cwd, seccomp_fd=None)


def test_spec_rejects_unknown_mode() -> None:
    with pytest.raises(ValueError, match="mode"):
        SandboxSpec(mode="full-access")  # type: ignore[arg-type]


def test_read_only_argv_shape(tmp_path: Path) -> None:
    wrapped = wrap_command(
        ["-dash", "x"], READ_ONLY, str(tmp_path), bwrap="/opt/bwrap", seccomp_fd=7
    )
    assert wrapped[0] == "/opt/bwrap"
    assert wrapped[-3:] == ["--", "-dash", "x"]
    options = wrapped[1:-3]
    for flag in ("--unshare-net", "--unshare-pid", "--die-with-parent", "--new-session"):
        assert flag in options
    assert "--bind" not in options
    assert "--tmpfs" not in options
    assert options[options.index("--chdir") + 1] == str(tmp_path)
    assert options[options.index("--cap-drop") + 1] == "ALL"
    assert options[:2] == ["--seccomp", "7"]


def test_workspace_argv_binds_after_tmpfs_and_dedupes(tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    link = tmp_path / "link"
    link.symlink_to(other)
    spec = SandboxSpec(
        mode="workspace-write",
        writable_roots=(str(other), str(link), "other", str(tmp_path / "missing")),
        network_access=True,
    )
    options = wrap_command(["true"], spec, str(tmp_path), seccomp_fd=None)
    binds = [options[i + 1] for i, arg in enumerate(options) if arg == "--bind"]
    # Shallowest first; the symlink, the relative root and the real path are one root.
    assert binds == [str(tmp_path), str(other)]
    # The private /tmp comes before the binds, or a cwd under /tmp would vanish.
    assert options.index("--tmpfs") < options.index("--bind")
    assert "--unshare-net" not in options


def test_read_only_ignores_network_access_and_writable_roots(tmp_path: Path) -> None:
    spec = SandboxSpec(mode="read-only", writable_roots=(str(tmp_path),), network_access=True)
    options = wrap_command(["true"], spec, str(tmp_path), seccomp_fd=None)
    assert "--unshare-net" in options
    assert "--bind" not in options


# --- workspace-write -------------------------------------------------------


def test_workspace_write_inside_cwd_is_visible_on_host(run: Runner, tmp_path: Path) -> None:
    result = run(sh("echo hello > made.txt && mkdir -p sub && echo x > sub/f"), WORKSPACE, tmp_path)
    assert result.returncode == 0, result.stdout
    assert (tmp_path / "made.txt").read_text() == "hello\n"
    assert (tmp_path / "sub" / "f").exists()


def _host_dirs_outside_tmp() -> list[Path]:
    """Directories a host process may write to that are not under /tmp."""
    candidates = [Path.home().resolve(), Path(__file__).resolve().parent]
    return [
        d
        for d in candidates
        if d.is_dir() and os.access(d, os.W_OK) and not d.is_relative_to("/tmp")
    ]


@pytest.mark.parametrize("outside", _host_dirs_outside_tmp(), ids=str)
def test_workspace_write_outside_cwd_is_read_only(
    run: Runner, tmp_path: Path, outside: Path
) -> None:
    target = outside / f"codexcore-sandbox-{uuid.uuid4().hex}"
    try:
        result = run(sh(f"echo nope > '{target}'"), WORKSPACE, tmp_path)
        assert result.returncode != 0
        assert "Read-only file system" in result.stdout
        assert not target.exists()
    finally:
        target.unlink(missing_ok=True)


def test_workspace_write_to_declared_root(
    run: Runner, tmp_path_factory: pytest.TempPathFactory
) -> None:
    cwd = tmp_path_factory.mktemp("cwd")
    extra = tmp_path_factory.mktemp("extra")
    spec = SandboxSpec(mode="workspace-write", writable_roots=(str(extra),))
    result = run(sh(f"echo ok > '{extra}/f'"), spec, cwd)
    assert result.returncode == 0, result.stdout
    assert (extra / "f").read_text() == "ok\n"


def test_workspace_tmp_is_private(run: Runner, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Writes to /tmp stay inside; what the host keeps in /tmp is readable, never writable."""
    cwd = tmp_path_factory.mktemp("cwd")
    sibling = tmp_path_factory.mktemp("sibling")
    (sibling / "host-file").write_text("host data")
    inside_name = f"/tmp/codexcore-sandbox-{uuid.uuid4().hex}"
    script = (
        f"echo x > {inside_name} && cat {inside_name} && cat '{sibling}/host-file' && "
        f"! (echo changed > '{sibling}/host-file') 2>/dev/null && "
        f"! touch '{sibling}/new-file' 2>/dev/null"
    )
    try:
        result = run(sh(script), WORKSPACE, cwd)
        assert result.returncode == 0, result.stdout
        assert "host data" in result.stdout
        assert not Path(inside_name).exists()
        assert (sibling / "host-file").read_text() == "host data"
        assert not (sibling / "new-file").exists()
    finally:
        Path(inside_name).unlink(missing_ok=True)


def test_workspace_symlinked_cwd_is_writable(run: Runner, tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "link"
    link.symlink_to(real)
    result = run(sh("echo x > f && pwd"), WORKSPACE, link)
    assert result.returncode == 0, result.stdout
    # The link itself lives in the host's /tmp, which the sandbox hides.
    assert result.stdout.strip() == str(real)
    assert (real / "f").exists()


# --- .git protection -------------------------------------------------------


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    (tmp_path / ".git" / "hooks").mkdir(parents=True)
    (tmp_path / ".git" / "config").write_text("[core]\n")
    return tmp_path


def test_workspace_git_dir_stays_read_only(run: Runner, repo: Path) -> None:
    for script in (
        "echo evil >> .git/config",
        "echo evil > .git/hooks/pre-commit",
        "mv .git moved",
        "rm -rf .git",
    ):
        result = run(sh(script), WORKSPACE, repo)
        assert result.returncode != 0, script
        assert is_likely_sandbox_denial(result.returncode, result.stdout, WORKSPACE), result.stdout
    assert (repo / ".git" / "config").read_text() == "[core]\n"
    assert not (repo / ".git" / "hooks" / "pre-commit").exists()
    assert run(sh("echo fine > tracked.txt"), WORKSPACE, repo).returncode == 0


def test_workspace_git_pointer_file_stays_read_only(run: Runner, tmp_path: Path) -> None:
    (tmp_path / ".git").write_text("gitdir: /somewhere/else\n")
    result = run(sh("echo 'gitdir: /evil' > .git"), WORKSPACE, tmp_path)
    assert result.returncode != 0
    assert (tmp_path / ".git").read_text() == "gitdir: /somewhere/else\n"


def test_listing_git_as_writable_root_opts_out(run: Runner, repo: Path) -> None:
    spec = SandboxSpec(mode="workspace-write", writable_roots=(str(repo / ".git"),))
    result = run(sh("echo '# ok' >> .git/config"), spec, repo)
    assert result.returncode == 0, result.stdout


# --- read-only -------------------------------------------------------------


def test_read_only_can_read_and_run(run: Runner, tmp_path: Path) -> None:
    (tmp_path / "hello.txt").write_text("hi there\n")
    assert run(["ls"], READ_ONLY, tmp_path).stdout.split() == ["hello.txt"]
    result = run(["cat", "hello.txt"], READ_ONLY, tmp_path)
    assert (result.returncode, result.stdout) == (0, "hi there\n")


@pytest.mark.parametrize("target", ["made.txt", "/tmp/codexcore-sandbox-ro"])
def test_read_only_cannot_write(run: Runner, tmp_path: Path, target: str) -> None:
    result = run(sh(f"echo x > {target}"), READ_ONLY, tmp_path)
    assert result.returncode != 0
    assert "Read-only file system" in result.stdout
    assert not (tmp_path / target).exists()


def test_sandboxed_command_has_no_capabilities(run: Runner, tmp_path: Path) -> None:
    # Matters when the engine runs as root: with capabilities the command
    # could remount / read-write and leave the sandbox.
    result = run(["grep", "CapEff", "/proc/self/status"], WORKSPACE, tmp_path)
    assert result.returncode == 0, result.stdout
    assert int(result.stdout.split()[1], 16) == 0


# --- network ---------------------------------------------------------------


@pytest.fixture
def listening_port() -> Iterator[int]:
    """A TCP port on the host's 127.0.0.1 that accepts connections (via the backlog)."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        yield server.getsockname()[1]


@pytest.mark.parametrize(
    ("spec", "reachable"),
    [
        (WORKSPACE, False),
        (SandboxSpec(mode="workspace-write", network_access=True), True),
        (SandboxSpec(mode="read-only", network_access=True), False),
    ],
    ids=["workspace-no-net", "workspace-net", "read-only"],
)
def test_network(
    run: Runner, tmp_path: Path, listening_port: int, spec: SandboxSpec, reachable: bool
) -> None:
    code = f"import socket; socket.create_connection(('127.0.0.1', {listening_port}), timeout=2)"
    result = run([sys.executable, "-c", code], spec, tmp_path)
    assert (result.returncode == 0) is reachable, result.stdout
    if not reachable:
        assert "Connection refused" in result.stdout
        assert is_likely_sandbox_denial(result.returncode, result.stdout, spec)


# --- Unix sockets: the syscall filter --------------------------------------

SOCKET_PROBE = r"""
import ctypes, errno, os, socket, sys

def attempt(name, action):
    try:
        action()
        print(name, "ok")
    except OSError as exc:
        print(name, errno.errorcode.get(exc.errno, exc.errno))

def connect(address):
    with socket.socket(socket.AF_UNIX) as sock:
        sock.connect(address)

def dgram_to(path):
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    a.sendto(b"x", path)

def io_uring():
    params = ctypes.create_string_buffer(120)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.syscall(425, 4, params) < 0:
        raise OSError(ctypes.get_errno(), "io_uring_setup")

attempt("stream", lambda: connect(sys.argv[1]))
attempt("abstract", lambda: connect("\0" + sys.argv[3]))
attempt("dgram", lambda: dgram_to(sys.argv[2]))
attempt("io_uring", io_uring)
attempt("vsock", lambda: socket.socket(40, socket.SOCK_STREAM).close())
attempt("pair", lambda: socket.socketpair()[0].close())
attempt("seqpacket_pair", lambda: socket.socketpair(type=socket.SOCK_SEQPACKET)[0].close())
attempt("inet", lambda: socket.socket(socket.AF_INET).close())
attempt("pipe", lambda: os.close(os.pipe()[0]))
"""


@pytest.fixture
def host_sockets(tmp_path: Path) -> Iterator[list[str]]:
    """A listening stream socket and a datagram socket in the host's /tmp, plus an abstract one."""
    stream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dgram = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    abstract = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    name = f"codexcore-test-{uuid.uuid4().hex}"
    try:
        stream.bind(str(tmp_path / "stream.sock"))
        stream.listen()
        dgram.bind(str(tmp_path / "dgram.sock"))
        abstract.bind("\0" + name)
        abstract.listen()
        yield [str(tmp_path / "stream.sock"), str(tmp_path / "dgram.sock"), name]
    finally:
        for sock in (stream, dgram, abstract):
            sock.close()


@pytest.mark.parametrize("spec", [READ_ONLY, WORKSPACE, NET_ON], ids=["read-only", "ws", "net"])
def test_confined_commands_reach_no_unix_socket(
    run: Runner, tmp_path: Path, host_sockets: list[str], spec: SandboxSpec
) -> None:
    # The sockets sit in the cwd, a writable root: the closest a socket can be.
    result = run([sys.executable, "-c", SOCKET_PROBE, *host_sockets], spec, tmp_path)
    assert result.returncode == 0, result.stdout
    outcome = dict(line.split() for line in result.stdout.splitlines())
    assert outcome == {
        "stream": "EPERM",
        "abstract": "EPERM",
        "dgram": "EPERM",
        "io_uring": "EPERM",
        "vsock": "EPERM",
        "pair": "ok",
        "seqpacket_pair": "ok",
        "inet": "ok",
        "pipe": "ok",
    }, result.stdout


def test_the_probe_script_reaches_the_sockets_unconfined(
    tmp_path: Path, host_sockets: list[str]
) -> None:
    """The control: without the filter the same script connects, so EPERM above is the filter's."""
    result = subprocess.run(
        [sys.executable, "-c", SOCKET_PROBE, *host_sockets],
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
        check=True,
    )
    outcome = dict(line.split() for line in result.stdout.splitlines())
    assert (outcome["stream"], outcome["abstract"], outcome["dgram"]) == ("ok", "ok", "ok")


def test_a_python_socket_refusal_counts_as_a_denial(run: Runner, tmp_path: Path) -> None:
    script = "import socket; socket.socket(socket.AF_UNIX).connect('/nowhere')"
    result = run([sys.executable, "-c", script], WORKSPACE, tmp_path)
    assert result.returncode == 1
    assert "Operation not permitted" in result.stdout
    assert is_likely_sandbox_denial(result.returncode, result.stdout, WORKSPACE)
    assert is_likely_sandbox_denial(result.returncode, result.stdout, NET_ON)


def test_unknown_architecture_means_no_sandbox(bwrap: str, monkeypatch: pytest.MonkeyPatch) -> None:
    def clear() -> None:
        _seccomp.program.cache_clear()
        sandbox._probe_uncached.cache_clear()

    monkeypatch.setattr(platform, "machine", lambda: "riscv64")
    clear()
    try:
        status = probe_sandbox()
        assert status.kind == "none"
        assert status.reason is not None
        assert "riscv64" in status.reason
        with (
            pytest.raises(_seccomp.UnsupportedArchitecture),
            confine(["true"], READ_ONLY, "/", bwrap=bwrap),
        ):
            pass
    finally:
        monkeypatch.undo()
        clear()
    assert probe_sandbox().kind == "bwrap"


def test_the_filter_descriptor_is_closed_after_the_block(bwrap: str, tmp_path: Path) -> None:
    with confine(["true"], WORKSPACE, str(tmp_path), bwrap=bwrap) as command:
        (fd,) = command.pass_fds
        assert command.argv[1:3] == ["--seccomp", str(fd)]
        os.fstat(fd)
    with pytest.raises(OSError, match="Bad file descriptor"):
        os.fstat(fd)


# --- process lifetime ------------------------------------------------------


def _pids_running(argv: list[str]) -> list[int]:
    """Host pids whose command line is exactly ``argv``."""
    wanted = "\0".join(argv).encode() + b"\0"
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if (entry / "cmdline").read_bytes() == wanted:
                pids.append(int(entry.name))
        except OSError:
            continue  # exited while we looked
    return pids


def _wait_for(predicate: Callable[[], bool], timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def test_killing_bwrap_group_kills_everything_inside(bwrap: str, tmp_path: Path) -> None:
    # An unusual duration marks this test's sleeps in /proc.
    sleep = ["sleep", f"31.{os.getpid()}{uuid.uuid4().int % 1000}"]
    # The inner setsid sleep leaves bwrap's process group; only the PID
    # namespace dying with bwrap can reach it.
    script = f"{' '.join(sleep)} & setsid {' '.join(sleep)} & {' '.join(sleep)}"
    with confine(sh(script), WORKSPACE, str(tmp_path), bwrap=bwrap) as command:
        proc = subprocess.Popen(
            command.argv,
            start_new_session=True,
            stdin=subprocess.DEVNULL,
            pass_fds=command.pass_fds,
        )
    try:
        assert _wait_for(lambda: len(_pids_running(sleep)) == 3), "sleeps never started"
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=RUN_TIMEOUT)
        assert _wait_for(lambda: not _pids_running(sleep)), _pids_running(sleep)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for pid in _pids_running(sleep):
            os.kill(pid, signal.SIGKILL)


# --- probe -----------------------------------------------------------------


def test_probe_finds_working_bwrap(bwrap: str) -> None:
    status = probe_sandbox()
    assert status == SandboxStatus(kind="bwrap", reason=None, executable=bwrap)
    assert os.path.isabs(bwrap)
    assert probe_sandbox() is status  # cached


def test_probe_env_var_forces_none(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CODEXCORE_SANDBOX", "none")
    status = probe_sandbox()
    assert status.kind == "none"
    assert status.executable is None
    assert status.reason is not None
    assert "CODEXCORE_SANDBOX" in status.reason


def test_probe_missing_bwrap(tmp_path: Path) -> None:
    missing = str(tmp_path / "no-such-bwrap")
    status = probe_sandbox(missing)
    assert status.kind == "none"
    assert status.reason is not None
    assert "not found" in status.reason


def _fake_bwrap(path: Path, body: str) -> str:
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def test_probe_reports_stderr_of_failing_bwrap(tmp_path: Path) -> None:
    fake = _fake_bwrap(
        tmp_path / "bwrap",
        "echo 'bwrap: No permissions to create new namespace' >&2; exit 1",
    )
    status = probe_sandbox(fake)
    assert status.kind == "none"
    assert status.reason is not None
    assert "No permissions to create new namespace" in status.reason
    assert "exit 1" in status.reason


def test_probe_times_out_on_hanging_bwrap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sandbox, "PROBE_TIMEOUT_SECONDS", 0.3)
    fake = _fake_bwrap(tmp_path / "bwrap", "exec sleep 30")
    status = probe_sandbox(fake)
    assert status.kind == "none"
    assert status.reason is not None
    assert "did not finish" in status.reason


def test_status_is_a_frozen_value() -> None:
    status = SandboxStatus(kind="none", reason="r")
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        status.kind = "bwrap"  # type: ignore[misc]


# --- denial heuristic ------------------------------------------------------

DANGER = SandboxSpec(mode="danger-full-access")


@pytest.mark.parametrize(
    ("exit_code", "output", "spec", "expected"),
    [
        # Filesystem: EROFS is what a blocked write looks like under bwrap.
        (1, "touch: cannot touch '/etc/x': Read-only file system", None, True),
        (2, "sh: 1: cannot create /x: Read-only file system", WORKSPACE, True),
        (1, "OSError: [Errno 30] Read-only file system: '/usr/lib/x'", NET_ON, True),
        (1, "npm ERR! code EROFS\nnpm ERR! erofs: read-only file system", NET_ON, True),
        (1, "mv: cannot move '.git' to 'x': Device or resource busy", WORKSPACE, True),
        # Too generic: ordinary failures print these outside any sandbox.
        (1, "cat: secret: Permission denied", WORKSPACE, False),
        (126, "sh: 1: ./run.sh: Permission denied", WORKSPACE, False),
        (255, "git@github.com: Permission denied (publickey).", WORKSPACE, False),
        (1, "kill: (1234) - Operation not permitted", WORKSPACE, False),
        (1, "chmod: changing permissions of 'x': Operation not permitted", None, False),
        # EPERM from making a socket: the filter refuses Unix sockets, network or not.
        (
            1,
            "  _socket.socket.__init__(self)\nPermissionError: [Errno 1] Operation not permitted",
            NET_ON,
            True,
        ),
        (1, "dial unix /var/run/docker.sock: socket: operation not permitted", WORKSPACE, True),
        (1, "Error: socket EPERM", READ_ONLY, True),
        (
            1,
            "socket.socket(...)\nPermissionError: [Errno 1] Operation not permitted",
            DANGER,
            False,
        ),
        (1, "sendto: Operation not permitted\nping: socket ok", WORKSPACE, False),
        # Network, while the network is off.
        (1, "OSError: [Errno 101] Network is unreachable", WORKSPACE, True),
        (1, "socket.gaierror: [Errno -3] Temporary failure in name resolution", READ_ONLY, True),
        (6, "curl: (6) Could not resolve host: example.com", WORKSPACE, True),
        (128, "fatal: unable to access 'https://x/': Could not resolve host: x", None, True),
        (1, "Error: getaddrinfo EAI_AGAIN registry.npmjs.org", WORKSPACE, True),
        (1, "psycopg.OperationalError: connection failed: Connection refused", WORKSPACE, True),
        # The same with network allowed: the sandbox did not cause them.
        (1, "OSError: [Errno 101] Network is unreachable", NET_ON, False),
        (6, "curl: (6) Could not resolve host: example.com", NET_ON, False),
        (1, "ConnectionRefusedError: [Errno 111] Connection refused", NET_ON, False),
        # bwrap itself failed.
        (1, "bwrap: Can't chdir to /gone: No such file or directory", NET_ON, True),
        (1, "bwrap: Creating new namespace failed: No space left on device", None, True),
        (1, "error: see `bwrap: foo` in the docs", WORKSPACE, False),
        # Success, signals and unconfined runs are never denials.
        (0, "touch: cannot touch 'x': Read-only file system", WORKSPACE, False),
        (-9, "Temporary failure in name resolution", WORKSPACE, False),
        (1, "touch: cannot touch 'x': Read-only file system", DANGER, False),
        # Plain failures.
        (1, "AssertionError: 1 != 2", WORKSPACE, False),
        (127, "sh: 1: frobnicate: not found", WORKSPACE, False),
        (1, "", None, False),
    ],
)
def test_is_likely_sandbox_denial(
    exit_code: int, output: str, spec: SandboxSpec | None, expected: bool
) -> None:
    assert is_likely_sandbox_denial(exit_code, output, spec) is expected
