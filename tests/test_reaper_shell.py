"""The reaper (``codexcore/tools/_reaper.py``, a shell script): what it holds, whom it kills.

tests/test_exec.py covers the groups (registered, unregistered, a killed
reaper replaced, a fork); tests/test_die_with_server.py a SIGKILLed server.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess

from codexcore.tools._reaper import REAPER_ENV_VAR, Reaper

WAIT_S = 10.0


def test_the_reaper_holds_no_descriptor_this_process_inherited() -> None:
    """An editor's pipe this process inherited must see EOF when we close it, reaper or not."""
    read_end, write_end = os.pipe()
    os.set_inheritable(write_end, True)  # as a descriptor handed down by a parent is
    reaper = Reaper()
    try:
        reaper.ensure_started()
        os.close(write_end)
        ready, _, _ = select.select([read_end], [], [], WAIT_S)
        assert ready, "the reaper kept a copy of an inherited write end open"
        assert os.read(read_end, 1) == b""
    finally:
        reaper.close()
        os.close(read_end)


def test_a_marked_process_that_left_its_group_is_killed() -> None:
    """A daemon (own session, own group) that still carries the token dies with us."""
    reaper = Reaper()
    env = {**os.environ, REAPER_ENV_VAR: reaper.token}
    daemon = subprocess.Popen(["sleep", "60"], env=env, start_new_session=True)
    bystander = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        reaper.ensure_started()
        reaper.close()  # what our death does: EOF on the reaper's pipe
        assert daemon.wait(timeout=WAIT_S) == -signal.SIGKILL
        # close() waited for the reaper to exit: its sweep is over.
        assert bystander.poll() is None, "a process without the token was killed"
    finally:
        for process in (daemon, bystander):
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            process.wait()
