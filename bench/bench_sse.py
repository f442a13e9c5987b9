"""SSE decoding: events per second, codexcore's decoder beside a bare split-and-parse loop.

The bytes are real: the steps of ``codexcore.testing.text_response`` (a
reasoning summary, then a long message, each streamed as many deltas) and a
``function_call_response``, exactly as the scripted server sends them.

* codexcore: ``SSEDecoder.feed`` then the Responses event mapping
  (``codexcore.model._wire.decode_event``: orjson, checks, a typed event), the
  work ``ModelClient`` does per chunk;
* the bare limit: append the chunk to a buffer, split it on blank lines, and
  ``orjson.loads`` each ``data:`` line. No field checks, no typed events, no
  CR handling, no UTF-8 split handling.

Fed one event per chunk (how the streams arrive) and, as a second case, in
1,460-byte pieces (TCP segments that cut events anywhere). A third case keeps
only the text-delta events: the steady state while a model talks, without
the few large events (``output_item.done``, ``response.completed`` …) that
repeat the whole text and cost both decoders the same JSON parsing.

Run ``.venv/bin/python bench/bench_sse.py`` (``--quick`` for a smoke run).
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Sequence

import orjson
from _common import (
    Table,
    fmt_rate,
    fmt_ratio,
    header,
    paired_ratio,
    paired_rounds,
    parse_args,
    verdict,
)

from codexcore.model import ServerSentEvent, SSEDecoder
from codexcore.model._wire import decode_data, decode_event
from codexcore.testing import function_call_response, text_response


def stream_steps(deltas: int) -> list[bytes]:
    text = "".join(f"tok{i % 1000:03d} " for i in range(deltas))
    reasoning = "".join(f"why{i % 1000:03d} " for i in range(deltas // 4))
    steps = [
        *text_response(text, chunks=deltas, reasoning=reasoning).steps,
        *function_call_response("shell", {"command": ["ls", "-la"]}).steps,
    ]
    return [step for step in steps if isinstance(step, bytes)]


def resegment(steps: Sequence[bytes], size: int) -> list[bytes]:
    body = b"".join(steps)
    return [body[i : i + size] for i in range(0, len(body), size)]


def codexcore_decode(chunks: Sequence[bytes]) -> int:
    """What the model client does per chunk: ``feed_raw`` then ``decode_data``."""
    decoder = SSEDecoder()
    feed = decoder.feed_raw
    count = 0
    for chunk in chunks:
        for kind, data in feed(chunk):
            decode_data(kind, data)
            count += 1
    return count


def codexcore_sse_only(chunks: Sequence[bytes]) -> int:
    decoder = SSEDecoder()
    feed = decoder.feed
    count = 0
    for chunk in chunks:
        count += len(feed(chunk))
    return count


def bare_decode(chunks: Sequence[bytes]) -> int:
    """Split on blank lines, parse each data line: the least a client can do."""
    loads = orjson.loads
    buffer = b""
    count = 0
    for chunk in chunks:
        buffer += chunk
        *blocks, buffer = buffer.split(b"\n\n")
        for block in blocks:
            for line in block.split(b"\n"):
                if line.startswith(b"data: "):
                    loads(line[6:])
                    count += 1
    return count


def cpu_rate(run: Callable[[], int]) -> float:
    """Events per CPU second of one call.

    CPU time of this thread, not wall time: the decoders are single-threaded
    and CPU-bound, and load from other processes then stretches them less.
    """
    gc.collect()
    t0 = time.thread_time()
    count = run()
    return count / (time.thread_time() - t0)


def map_only(parsed: Sequence[ServerSentEvent]) -> int:
    for sse in parsed:
        decode_event(sse)
    return len(parsed)


def main() -> None:
    args = parse_args(__doc__.split("\n\n")[0] if __doc__ else "")
    deltas, repeat = (2_000, 3) if args.quick else (10_000, 7)
    header("bench_sse", args.quick, f"{deltas:,} text deltas per stream, best of {repeat}")

    per_event = stream_steps(deltas)
    segments = resegment(per_event, 1460)
    only_deltas = [step for step in per_event if b".delta\n" in step.partition(b"\n")[0] + b"\n"]
    events = SSEDecoder()
    parsed: list[ServerSentEvent] = [e for chunk in per_event for e in events.feed(chunk)]
    # The three decoders must agree on what the stream holds.
    expected = len(parsed)
    for chunks in (per_event, segments, only_deltas):
        counts = {codexcore_decode(chunks), codexcore_sse_only(chunks), bare_decode(chunks)}
        if len(counts) != 1:
            raise RuntimeError(f"decoders disagree: {counts} events")
    if codexcore_decode(per_event) != expected:
        raise RuntimeError("the per-event stream lost events")

    table = Table(
        f"3. SSE decoding ({expected:,} events, {sum(map(len, per_event)) / 1e6:.1f} MB; "
        f"events per CPU second, best of {repeat} rounds)",
        ["chunking", "decoder", "events/s", "÷ bare", "goal"],
    )
    # Paired rounds: each variant once per round, the order rotated, so the
    # ratio of two variants compares runs made moments apart.
    variants: list[tuple[str, Callable[[], float]]] = [
        ("one/codexcore", lambda: cpu_rate(lambda: codexcore_decode(per_event))),
        ("one/sse", lambda: cpu_rate(lambda: codexcore_sse_only(per_event))),
        ("one/bare", lambda: cpu_rate(lambda: bare_decode(per_event))),
        ("seg/codexcore", lambda: cpu_rate(lambda: codexcore_decode(segments))),
        ("seg/sse", lambda: cpu_rate(lambda: codexcore_sse_only(segments))),
        ("seg/bare", lambda: cpu_rate(lambda: bare_decode(segments))),
        ("delta/codexcore", lambda: cpu_rate(lambda: codexcore_decode(only_deltas))),
        ("delta/bare", lambda: cpu_rate(lambda: bare_decode(only_deltas))),
        ("mapping", lambda: cpu_rate(lambda: map_only(parsed))),
    ]
    runs = paired_rounds(variants, repeat)
    rates = {key: max(values) for key, values in runs.items()}
    mapping = rates["mapping"]

    def ratio(key: str, limit: str) -> float:
        return paired_ratio(runs[key], runs[limit])

    one = ratio("one/codexcore", "one/bare")
    table.add(
        "one event per chunk",
        "codexcore: `SSEDecoder.feed_raw` + `decode_data` (the client's path)",
        fmt_rate(rates["one/codexcore"]),
        fmt_ratio(one),
        f"≥ 0.67: {verdict(one >= 2 / 3)}",
    )
    table.add(
        "one event per chunk",
        "codexcore `SSEDecoder.feed` alone",
        fmt_rate(rates["one/sse"]),
        fmt_ratio(ratio("one/sse", "one/bare")),
        "",
    )
    table.add(
        "one event per chunk",
        "bare: split on blank lines, `orjson.loads` each data line",
        fmt_rate(rates["one/bare"]),
        "1.00",
        "",
    )
    seg = ratio("seg/codexcore", "seg/bare")
    table.add(
        "1,460-byte segments",
        "codexcore: `SSEDecoder.feed_raw` + `decode_data` (the client's path)",
        fmt_rate(rates["seg/codexcore"]),
        fmt_ratio(seg),
        "",
    )
    table.add(
        "1,460-byte segments",
        "codexcore `SSEDecoder.feed` alone",
        fmt_rate(rates["seg/sse"]),
        fmt_ratio(ratio("seg/sse", "seg/bare")),
        "",
    )
    table.add(
        "1,460-byte segments",
        "bare: split on blank lines, `orjson.loads` each data line",
        fmt_rate(rates["seg/bare"]),
        "1.00",
        "",
    )
    table.add(
        "text deltas only, one per chunk",
        "codexcore: `SSEDecoder.feed_raw` + `decode_data` (the client's path)",
        fmt_rate(rates["delta/codexcore"]),
        fmt_ratio(ratio("delta/codexcore", "delta/bare")),
        "",
    )
    table.add(
        "text deltas only, one per chunk",
        "bare: split on blank lines, `orjson.loads` each data line",
        fmt_rate(rates["delta/bare"]),
        "1.00",
        "",
    )
    table.add(
        "(already split)",
        "`decode_event` alone on the `ServerSentEvent`s",
        fmt_rate(mapping),
        "",
        "",
    )
    table.note(
        "Rates: the best round. ÷ bare: the median over the rounds of the ratio to the bare "
        "loop's run in the same round (the order of the variants rotated each round)."
    )
    table.print()


if __name__ == "__main__":
    main()
