"""The JSON codec of the wire types: the choice of encoder and JSON library, measured.

Encoding an ``Event`` to compact JSON bytes, five ways, for three events: a
small ``agent_message_delta``, an ``exec_command_output_delta`` carrying an
8 KiB chunk (base64 on the wire) and a ``session_configured`` (nested record,
a tuple, optionals):

* codexcore: ``codexcore.protocol.encode_event`` (a per-class encoder
  generated from the fields, then orjson);
* ``attrs.asdict`` + orjson (bytes to base64 through orjson's ``default``);
* the generated encoder + stdlib ``json`` (``separators`` compact, UTF-8 out);
* the generated encoder + ``msgspec.json.encode`` (msgspec as the JSON library);
* msgspec all the way: a ``msgspec.Struct`` mirror of the event classes, encoded
  with a reused ``msgspec.json.Encoder`` (what the wire types would cost if they
  were Structs: the floor).

Every way must produce the same JSON (checked). Then decoding a ``user_input``
submission: ``decode_submission`` (parse, then validate field by field) beside
``orjson.loads`` alone and a typed ``msgspec`` decode of a Struct mirror.

Run ``.venv/bin/python bench/bench_protocol.py`` (``--quick`` for a smoke run).
"""

from __future__ import annotations

import base64
import json
import os
import time
import timeit
from collections.abc import Callable
from typing import Any

import attrs
import msgspec
import orjson
from _common import Table, fmt_rate, fmt_ratio, header, paired_ratio, paired_rounds, parse_args

from codexcore.protocol import (
    AgentMessageDelta,
    Event,
    ExecCommandOutputDelta,
    SandboxPolicy,
    SessionConfigured,
    Submission,
    TextInput,
    UserInput,
    decode_submission,
    encode_event,
    encode_submission,
)
from codexcore.protocol._codec import encoder_for

# --- msgspec mirrors of the measured types ---------------------------------------------


class SandboxPolicyS(msgspec.Struct):
    type: str
    writable_roots: tuple[str, ...]
    network_access: bool


class AgentMessageDeltaS(msgspec.Struct, tag="agent_message_delta", tag_field="type"):
    delta: str


class ExecCommandOutputDeltaS(msgspec.Struct, tag="exec_command_output_delta", tag_field="type"):
    call_id: str
    stream: str
    chunk: bytes


class SessionConfiguredS(msgspec.Struct, tag="session_configured", tag_field="type"):
    session_id: str
    model: str
    cwd: str
    approval_policy: str
    sandbox_policy: SandboxPolicyS
    history_mode: str
    reasoning_effort: str | None
    sandbox: str
    sandbox_reason: str | None


class EventS(msgspec.Struct):
    id: str
    seq: int
    msg: AgentMessageDeltaS | ExecCommandOutputDeltaS | SessionConfiguredS


class TextInputS(msgspec.Struct, tag="text", tag_field="type"):
    text: str


class UserInputS(msgspec.Struct, tag="user_input", tag_field="type"):
    items: tuple[TextInputS, ...]
    last_response_id: str | None = None


class SubmissionS(msgspec.Struct):
    id: str
    op: UserInputS


def mirror(event: Event) -> EventS:
    msg = event.msg
    converted: AgentMessageDeltaS | ExecCommandOutputDeltaS | SessionConfiguredS
    if isinstance(msg, AgentMessageDelta):
        converted = AgentMessageDeltaS(msg.delta)
    elif isinstance(msg, ExecCommandOutputDelta):
        converted = ExecCommandOutputDeltaS(msg.call_id, msg.stream, msg.chunk)
    else:
        assert isinstance(msg, SessionConfigured)
        p = msg.sandbox_policy
        converted = SessionConfiguredS(
            msg.session_id,
            msg.model,
            msg.cwd,
            msg.approval_policy,
            SandboxPolicyS(p.type, p.writable_roots, p.network_access),
            msg.history_mode,
            msg.reasoning_effort,
            msg.sandbox,
            msg.sandbox_reason,
        )
    return EventS(event.id, event.seq, converted)


# --- the encoders ----------------------------------------------------------------------


def _bytes_default(value: object) -> str:
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    raise TypeError(type(value).__name__)


def asdict_orjson(event: Event) -> bytes:
    msg = event.msg
    data = {"type": msg.TYPE, **attrs.asdict(msg)}
    return orjson.dumps({"id": event.id, "seq": event.seq, "msg": data}, default=_bytes_default)


_dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


def generated_stdlib(event: Event) -> bytes:
    msg = encoder_for(type(event.msg))(event.msg)
    return _dumps({"id": event.id, "seq": event.seq, "msg": msg}).encode()


_msgspec_encode = msgspec.json.Encoder().encode


def generated_msgspec(event: Event) -> bytes:
    msg = encoder_for(type(event.msg))(event.msg)
    return _msgspec_encode({"id": event.id, "seq": event.seq, "msg": msg})


class Timed:
    """Calls of ``op`` per CPU second over about ``seconds``: one timing per call.

    Timed with this thread's CPU time, so load from other processes on a
    shared machine stretches the timings less. The number of calls per
    timing is fixed on construction (which also warms ``op`` up).
    """

    def __init__(self, op: Callable[[], object], seconds: float) -> None:
        self.timer = timeit.Timer(op, timer=time.thread_time)
        trial = self.timer.timeit(number=200)
        self.number = max(1, int(200 * seconds / max(trial, 1e-9)))

    def __call__(self) -> float:
        return self.number / self.timer.timeit(number=self.number)


def compare(ways: dict[str, Callable[[], object]], seconds: float, rounds: int) -> RatesRatios:
    """Best rate of each way, and its median paired ratio to the first way."""
    runs = paired_rounds([(name, Timed(op, seconds)) for name, op in ways.items()], rounds)
    first = runs[next(iter(ways))]
    return {name: (max(rates), paired_ratio(rates, first)) for name, rates in runs.items()}


RatesRatios = dict[str, tuple[float, float]]


def samples() -> list[tuple[str, Event]]:
    return [
        ("`agent_message_delta` (7 chars)", Event("s12", 4321, AgentMessageDelta("tok042 "))),
        (
            "`exec_command_output_delta` (8 KiB)",
            Event("s12", 4322, ExecCommandOutputDelta("call_8f3a", "stdout", os.urandom(8192))),
        ),
        (
            "`session_configured`",
            Event(
                "s1",
                0,
                SessionConfigured(
                    "3f1e9c2a-7b4d-4c55-9a0e-2d8f6b1c0e47",
                    "gpt-5-codex",
                    "/home/user/project",
                    "on-request",
                    SandboxPolicy("workspace-write", ("/home/user/.cache",), False),
                    "server",
                    "medium",
                    "bwrap",
                    None,
                ),
            ),
        ),
    ]


def encoders(event: Event) -> dict[str, Callable[[], bytes]]:
    """The five ways to encode ``event``, each a call without arguments."""
    mirrored = mirror(event)
    return {
        "codexcore `encode_event`: generated encoder + orjson": lambda: encode_event(event),
        "`attrs.asdict` + orjson": lambda: asdict_orjson(event),
        "generated encoder + stdlib `json`": lambda: generated_stdlib(event),
        "generated encoder + `msgspec.json`": lambda: generated_msgspec(event),
        "msgspec `Struct` mirror + `msgspec.json` (the floor)": lambda: _msgspec_encode(mirrored),
    }


def bench_encode(seconds: float, repeat: int) -> None:
    table = Table(
        f"7. Encoding one Event to JSON bytes (events per CPU second, best of {repeat} rounds)",
        ["encoder", *(name for name, _ in samples())],
    )
    columns: dict[str, list[tuple[float, float]]] = {}
    for _, event in samples():
        ways = encoders(event)
        expected = orjson.loads(encode_event(event))
        for name, way in ways.items():
            if orjson.loads(way()) != expected:
                raise RuntimeError(f"{name} encodes {event.msg.TYPE} differently")
        for name, result in compare(dict(ways), seconds, repeat).items():
            columns.setdefault(name, []).append(result)
    for name, results in columns.items():
        table.add(name, *(f"{r:,.0f}/s ({fmt_ratio(ratio)}x)" for r, ratio in results))
    table.note(
        "In brackets: the rate over codexcore's `encode_event` on the same event (the median "
        "of the round-by-round ratios; the ways run in turn, the order rotated each round)."
    )
    table.print()


def bench_decode(seconds: float, repeat: int) -> None:
    submission = Submission("s7", UserInput((TextInput("Fix the failing test in tests/"),)))
    data = encode_submission(submission)
    if decode_submission(data) != submission:
        raise RuntimeError("decode_submission does not round-trip")
    typed = msgspec.json.Decoder(SubmissionS).decode
    if typed(data).op.items[0].text != "Fix the failing test in tests/":
        raise RuntimeError("the msgspec mirror does not decode the submission")
    # The limit first: compare() gives every ratio to the first way.
    ways: dict[str, Callable[[], Any]] = {
        "bare: `orjson.loads` alone": lambda: orjson.loads(data),
        "codexcore `decode_submission` (parse + validate + build)": lambda: decode_submission(data),
        "msgspec typed decode into a `Struct` mirror": lambda: typed(data),
        "stdlib `json.loads` alone": lambda: json.loads(data),
    }
    results = compare(ways, seconds, repeat)
    table = Table(
        f"7b. Decoding a `user_input` submission ({len(data)} bytes; per CPU second, "
        f"best of {repeat} rounds)",
        ["decoder", "submissions/s", "÷ orjson.loads"],
    )
    order = [1, 0, 2, 3]  # codexcore first in the table
    names = list(results)
    for name in (names[i] for i in order):
        r, ratio = results[name]
        table.add(name, fmt_rate(r), fmt_ratio(ratio))
    table.print()


def main() -> None:
    args = parse_args(__doc__.split("\n\n")[0] if __doc__ else "")
    seconds, repeat = (0.01, 3) if args.quick else (0.1, 7)
    header("bench_protocol", args.quick, f"timings of ~{seconds:g} s, best of {repeat}")
    bench_encode(seconds, repeat)
    bench_decode(seconds, repeat)


if __name__ == "__main__":
    main()
