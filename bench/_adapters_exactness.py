"""The adapters benchmark's section 6: nothing lost at a stop or a disconnect, every event
the engine numbered read by the client exactly once (see ``bench_adapters.py``)."""

from __future__ import annotations

import asyncio
import collections
import signal
import threading
import time
from typing import Any

from _adapters_procs import TOKEN, LineConn, Procs, submission, user_input
from _common import Table

from codexcore.adapters.client import RemoteCodex
from codexcore.protocol import ConfigureSession, TextInput, UserInput

# --- 6. nothing lost ---------------------------------------------------------------------------


class Check:
    def __init__(self, name: str) -> None:
        self.name = name
        self.numbered = 0
        self.received = 0
        self.deltas = 0
        self.wanted_deltas = 0
        self.exact = False
        self.detail = ""


def judge(check: Check, events: list[dict[str, Any]], *, shutdown: bool = True) -> Check:
    """Exact when the seqs run 0, 1, … without a gap or a repeat and end as they must."""
    seqs = [int(e["seq"]) for e in events]
    check.received = len(events)
    check.numbered = seqs[-1] + 1 if seqs else 0
    check.deltas = sum(1 for e in events if e["msg"]["type"] == "agent_message_delta")
    last = events[-1]["msg"]["type"] if events else "nothing"
    problems = []
    if seqs != list(range(len(seqs))):
        missing = sorted(set(range(check.numbered)) - set(seqs))
        if missing:
            problems.append(f"seq {', '.join(map(str, missing[:5]))} never arrived")
        counts = collections.Counter(seqs)
        for seq in sorted(s for s, c in counts.items() if c > 1)[:3]:
            types = [e["msg"]["type"] for e in events if e["seq"] == seq]
            problems.append(f"seq {seq} twice ({' and '.join(types)})")
    if shutdown and last != "shutdown_complete":
        problems.append(f"last event {last}")
    if check.wanted_deltas and check.deltas != check.wanted_deltas:
        problems.append(f"{check.deltas} deltas of {check.wanted_deltas}")
    check.exact = not problems
    check.detail = "; ".join(problems)
    return check


def events_of(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [m for m in messages if "seq" in m]


def kind_of(message: dict[str, Any]) -> str:
    return str(message["msg"]["type"] if "seq" in message else message["type"])


def stop_check(
    procs: Procs, channel: str, n: int, *, stop: str, delay: float, reading: bool
) -> Check:
    """``bench-emit n``; ``delay`` seconds later the server is stopped (``stop``:
    ``eof``, stdin closed, or ``sigterm``); the client reads at once (``reading``) or
    only 0.3 s after the stop, with a 4 KiB receive buffer on sockets; then to the end."""
    when = "right after" if delay == 0 else f"{delay * 1000:.0f} ms after"
    how = "end of input" if stop == "eof" else "SIGTERM"
    client = "client reading" if reading else "client not reading until 0.3 s after the stop"
    check = Check(f"{channel}, {how} {when} `bench-emit {n:,}`, {client}")
    stdio = channel == "stdio"
    proc = procs.helper(f"{channel} check", "host", stdio=stdio)
    rcvbuf = None if reading else 4096
    if stdio:
        conn = LineConn.pipes(proc)
    elif channel == "Unix":
        assert proc.unix is not None
        conn = LineConn.unix(proc.unix, rcvbuf=rcvbuf)
    else:
        assert proc.tcp is not None
        conn = LineConn.tcp(proc.tcp, rcvbuf=rcvbuf)
    if not stdio:
        conn.greet()
    seen: list[dict[str, Any]] = []
    conn.send(submission("cfg", "configure_session"))
    while not seen or kind_of(seen[-1]) != "session_configured":
        seen.append(conn.message())

    def stop_it() -> None:
        if stop == "eof":
            assert proc.popen.stdin is not None
            proc.popen.stdin.close()
        else:
            proc.popen.send_signal(signal.SIGTERM)

    conn.send(user_input("big", f"bench-emit {n}"))
    timer = threading.Timer(delay, stop_it)
    timer.start()
    if not reading:
        timer.join()
        time.sleep(0.3)
    rest, reset = conn.to_end()
    timer.join()
    code = proc.popen.wait(60)
    proc.stop()
    if stop == "eof" or delay >= 0.5:
        check.wanted_deltas = n  # the emission was over before the stop
    judge(check, events_of(seen + rest))
    if code != 0 or reset:
        check.exact = False
        check.detail += f"; exit code {code}, reset {reset}"
    return check


def reattach(procs: Procs, n: int) -> Check:
    """Drop the connection (a reset) mid-stream; reattach with ``last_seq``; read to the end."""
    check = Check(
        f"TCP, connection reset after a third of `bench-emit {n:,}`, reattached with `last_seq`"
    )
    check.wanted_deltas = n
    proc = procs.helper("reattach check", "host")
    assert proc.tcp is not None
    first = LineConn.tcp(proc.tcp)
    session_id = first.greet()["session_id"]
    seen: list[dict[str, Any]] = []
    first.send(submission("cfg", "configure_session"))
    first.send(user_input("big", f"bench-emit {n}"))
    while len(seen) < n // 3:
        seen.append(first.message())
    first.abort()
    last_seq = max(int(m["seq"]) for m in seen if "seq" in m)
    second = LineConn.tcp(proc.tcp)
    second.greet(session_id=session_id, last_seq=last_seq)
    got = second.events("task_complete")
    del got
    # events() does not keep the messages; read again through a fresh attach for the rest
    third = LineConn.tcp(proc.tcp)
    welcome = third.greet(session_id=session_id, last_seq=last_seq)
    rest: list[dict[str, Any]] = []
    while not rest or kind_of(rest[-1]) != "task_complete":
        rest.append(third.message())
    second.close()
    third.close()
    proc.stop()
    judge(check, events_of(seen + rest), shutdown=False)
    if welcome.get("replay_from") != last_seq + 1 or not welcome.get("replay_complete"):
        check.exact = False
        check.detail += f" welcome {welcome}"
    return check


async def remote_reconnect(procs: Procs, n: int) -> Check:
    """The client library: ``reconnect()`` mid-stream; the UI must see every event once."""
    check = Check(
        f"TCP, `RemoteCodex.reconnect()` after a third of `bench-emit {n:,}` (the client "
        "library: replay, resend, deduplication)"
    )
    check.wanted_deltas = n
    proc = procs.helper("client check", "host")
    assert proc.tcp is not None
    events: list[dict[str, Any]] = []
    async with RemoteCodex.connect_tcp(*proc.tcp, token=TOKEN) as codex:
        await codex.submit(ConfigureSession())
        await codex.submit(UserInput((TextInput(f"bench-emit {n}"),)))
        while True:
            event = await codex.next_event()
            events.append({"seq": event.seq, "msg": {"type": event.msg.TYPE}})
            if len(events) == n // 3:
                await codex.reconnect()
            if event.msg.TYPE == "task_complete":
                break
    proc.stop()
    return judge(check, events, shutdown=False)


def bench_exactness(procs: Procs, quick: bool) -> bool:
    big = 20_000 if quick else 100_000
    small = 2_000
    checks = [
        stop_check(procs, "stdio", big, stop="eof", delay=0, reading=False),
        stop_check(procs, "stdio", big, stop="sigterm", delay=0.1, reading=True),
        stop_check(procs, "stdio", big, stop="sigterm", delay=0.1, reading=False),
        stop_check(procs, "TCP", big, stop="sigterm", delay=0.1, reading=True),
        stop_check(procs, "TCP", small, stop="sigterm", delay=0.5, reading=False),
        stop_check(procs, "Unix", small, stop="sigterm", delay=0.5, reading=False),
        reattach(procs, 3 * small),
        asyncio.run(remote_reconnect(procs, 3 * small)),
    ]
    table = Table(
        "6. Nothing lost: every event the engine numbered reaches the client, exactly once",
        ["case", "numbered (in)", "received (out)", "deltas", "exact?"],
    )
    for check in checks:
        table.add(
            check.name,
            f"{check.numbered:,}",
            f"{check.received:,}",
            f"{check.deltas:,}" + (f" of {check.wanted_deltas:,}" if check.wanted_deltas else ""),
            "yes" if check.exact else f"**NO**: {check.detail}",
        )
    table.note(
        "in: the events the engine numbered (the last `seq` + 1); out: the events the client "
        "read, checked to run 0, 1, 2 … with no gap and no repeat, ending with "
        "`shutdown_complete` where the session ended. A stop cancels an emission under way: "
        "deltas never numbered are not owed (the SIGTERM rows)."
    )
    table.print()
    return all(c.exact for c in checks)
