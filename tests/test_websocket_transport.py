"""The WebSocket listener on its own, as another dialect (the app-server protocol's
``--listen ws://``) uses it: any handler of a :class:`Conduit`, on a real socket."""

from __future__ import annotations

import asyncio
import json

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from codexcore.adapters.transports import (
    Conduit,
    Lines,
    WebSocketDoor,
    WebSocketListener,
    open_websocket,
    serve_websocket,
)
from codexcore.adapters.transports._websocket import parse_ws_url

pytestmark = pytest.mark.anyio


async def echo_lines(conduit: Conduit) -> None:
    """Answers each line with its length and text, written in two pieces; ``bye`` closes."""
    lines = Lines(conduit, 1 << 20)
    while (line := await lines.next()) is not None:
        assert isinstance(line, bytes)
        answer = json.dumps({"n": len(line), "text": line.decode()}).encode()
        conduit.write(answer[:5])  # half a line is not a message yet
        conduit.write(answer[5:] + b"\n")
        await conduit.drain()
        if line == b"bye":
            break
    await conduit.close(5.0)


async def test_a_message_is_a_line_each_way_and_close_is_a_close_frame() -> None:
    async with await open_websocket(echo_lines) as listener, connect(listener.url) as ws:
        await ws.send('{\n  "pretty": true\n}')  # one message, one line
        assert json.loads(await ws.recv()) == {"n": 20, "text": '{   "pretty": true }'}
        await ws.send("bye")
        assert json.loads(await ws.recv())["text"] == "bye"
        await ws.wait_closed()
        assert ws.close_code == 1000


async def test_serve_websocket_runs_until_told_and_takes_a_ws_url() -> None:
    stop = asyncio.Event()
    ready: asyncio.Future[WebSocketListener] = asyncio.get_running_loop().create_future()
    door = WebSocketDoor(token="s3cret")
    server = asyncio.create_task(
        serve_websocket(
            echo_lines, "ws://127.0.0.1:0", door, until=stop.wait(), on_listening=ready.set_result
        )
    )
    url = (await asyncio.wait_for(ready, 10)).url
    with pytest.raises(InvalidStatus):
        await connect(url)
    async with connect(url, additional_headers={"Authorization": "Bearer s3cret"}) as ws:
        await ws.send("hi")
        assert json.loads(await ws.recv())["text"] == "hi"
        await ws.send("bye")
        await ws.recv()
    stop.set()
    await asyncio.wait_for(server, 10)
    with pytest.raises(ConnectionRefusedError):
        await connect(url, open_timeout=5)


async def test_beyond_loopback_without_a_token_it_refuses_before_binding() -> None:
    with pytest.raises(ValueError, match="requires a token"):
        await open_websocket(echo_lines, "0.0.0.0", 0)
    with pytest.raises(ValueError, match="requires a token"):
        await serve_websocket(echo_lines, "ws://[::]:0")


def test_listen_addresses() -> None:
    assert parse_ws_url("ws://127.0.0.1:8765") == ("127.0.0.1", 8765)
    assert parse_ws_url("ws://[::1]:9/") == ("::1", 9)
    assert parse_ws_url(":0") == ("127.0.0.1", 0)
    with pytest.raises(ValueError, match="TLS belongs to a proxy"):
        parse_ws_url("wss://127.0.0.1:8765")
