"""``codexcore serve`` speaking JSON-RPC 2.0: real processes on stdio, TCP and Unix sockets."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import orjson
import pytest

from codexcore import __version__
from codexcore.adapters.jsonrpc._methods import (
    SEED_METHODS,
    SERVER_CAPABILITIES,
    SERVER_FEATURES,
    standard_methods,
)
from codexcore.testing import ScriptedModel, ScriptedResponsesServer

from .server_helpers import (
    PY,
    TOKEN,
    LineLink,
    ServerProcess,
    StdioServer,
    hello,
    private_dir,
    server_env,
)

pytestmark = pytest.mark.anyio

CAPABILITIES = dict.fromkeys([*SERVER_CAPABILITIES, *SERVER_FEATURES], False) | {
    "supports_run_cancel": True,  # seed 000's run flow (tests/test_codelia.py)
    "supports_shell_exec": True,  # on the user's shell (tests/test_jsonrpc_shell.py)
    "supports_context_inspect": True,  # tests/test_codelia_context.py
    "supports_skills_list": True,  # tests/test_skills.py
    "supports_tool_call": True,  # tests/test_codelia_context.py, tests/test_codelia_patch.py
    "supports_mcp_list": True,  # tests/test_mcp_jsonrpc.py
    "supports_theme_set": True,  # tests/test_codelia_account.py
    "supports_ui_requests": True,
    "supports_permission_preflight_events": True,
    # Seed 003's control messages: announced, and refused here (no [control] table).
    "control_messages": {
        "v": 1,
        "stdin": False,
        "interrupt": False,
        "content_ref": False,
        "max_inline_bytes": 1024 * 1024,
    },
}

# The seeds' own example lines, as written (seed 001's, pretty-printed there, on one line).
SEED_000_INITIALIZE = (
    b'{"jsonrpc":"2.0","id":"1","method":"initialize","params":{"protocol_version":"0",'
    b'"client":{"name":"codelia-tui","version":"0.0.0"}}}\n'
)
SEED_000_RUN_START = (
    b'{"jsonrpc":"2.0","id":"2","method":"run.start","params":{"input":{"type":"text",'
    b'"text":"List TypeScript files"}}}\n'
)
SEED_001_INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "clientName": "experience-ui",
        "clientVersion": "1.0.0",
        "capabilities": {"streaming": True, "specFormats": ["openapi3", "swagger2", "graphql"]},
    },
}
SEED_004_GET_STATUS = {"jsonrpc": "2.0", "id": 1, "method": "get_status", "params": {}}


def req(rid: Any, method: str, **params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}


def not_found(rid: Any, method: str) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": rid,
        "error": {"code": -32601, "message": f"Method not found: {method}"},
    }


async def answer(link: LineLink) -> Any:
    message = await link.recv()
    assert message is not None, f"{link.name}: stream ended{link.context()}"
    return message


@asynccontextmanager
async def stdio(
    tmp_path: Path, *args: str, argv: list[str] | None = None
) -> AsyncIterator[StdioServer]:
    async with ScriptedResponsesServer(ScriptedModel([])) as http:
        server = await StdioServer.start(http.base_url, tmp_path, *args, argv=argv)
        try:
            yield server
        finally:
            await server.kill()


async def finish(server: StdioServer) -> None:
    """End of input: the server answers what it was asked, writes nothing else, exits 0."""
    await server.close_stdin()
    await server.to_end()
    assert await server.wait_exit() == 0, server.context()


# --- stdio ----------------------------------------------------------------------------------


async def test_seed_000_initialize_and_run_start_as_written(tmp_path: Path) -> None:
    async with stdio(tmp_path) as ui:
        await ui.send(SEED_000_INITIALIZE, SEED_000_RUN_START)
        assert await answer(ui) == {
            "jsonrpc": "2.0",
            "id": "1",
            "result": {
                "protocol_version": "0",
                "server": {"name": "codexcore", "version": __version__},
                "server_capabilities": CAPABILITIES,
            },
        }
        started = await answer(ui)
        assert started["id"] == "2"
        assert started["result"]["run_id"].startswith("run-")
        await finish(ui)  # the session ends with stdio: the run is cancelled, and says so
        statuses = [m["params"]["status"] for m in ui.seen if m.get("method") == "run.status"]
        assert statuses[0] == "running", ui.seen
        assert statuses[-1] in ("cancelled", "error"), ui.seen


async def test_seed_001_initialize_as_written(tmp_path: Path) -> None:
    async with stdio(tmp_path) as ui:
        await ui.send(SEED_001_INITIALIZE, req(2, "generate", format="react"))
        assert await answer(ui) == {
            "jsonrpc": "2.0",
            "id": 1,
            "result": {
                "serverName": "codexcore",
                "serverVersion": __version__,
                "capabilities": {
                    "codeGeneration": True,  # tests/test_chat_generate.py
                    "customization": True,
                    "streaming": True,  # chat streams (tests/test_seed001.py)
                },
            },
        }
        error = (await answer(ui))["error"]
        assert error["message"] == "Invalid params: params.spec: missing required field"
        await finish(ui)


async def test_every_error_and_the_connection_goes_on(tmp_path: Path) -> None:
    async with stdio(tmp_path, "--max-line-bytes", "2000") as ui:
        await ui.send(
            req(0, "initialize", client={"version": "1"}, protocol_version="0"),
            b"x" * 5000 + b"\n",
            b'{"jsonrpc":"2.0","id":"u","method":"\xff"}\n',
            b"[]\n",
            b"42\n",
            b'"str"\n',
            b'{"jsonrpc": "2.0", "id": 1,\n',
            b'{"jsonrpc":"2.0","id":7}\n',
            req(8, "no.such.method"),
            req(9, "initialize", protocol_version="0", client={"name": "t", "version": "1"}),
        )
        got = [await answer(ui) for _ in range(9)]
        errors = [(m["id"], m["error"]["code"]) for m in got[:8]]
        assert errors == [
            (0, -32602),
            (None, -32600),
            (None, -32700),
            (None, -32600),
            (None, -32600),
            (None, -32600),
            (None, -32700),
            (7, -32600),
        ]
        assert got[0]["error"]["message"] == (
            "Invalid params: params.client.name: missing required field"
        )
        assert "longer than 2000 bytes" in got[1]["error"]["message"]
        assert "not valid UTF-8" in got[2]["error"]["message"]
        assert "empty batch" in got[3]["error"]["message"]
        assert got[8] == not_found(8, "no.such.method")
        assert (await answer(ui))["result"]["server"]["name"] == "codexcore"  # still served
        await ui.send(SEED_000_INITIALIZE)  # once is enough
        again = await answer(ui)
        assert (again["id"], again["error"]["code"]) == ("1", -32600)
        assert "already initialized" in again["error"]["message"]
        await finish(ui)


async def test_ids_are_echoed_exactly_and_notifications_are_silent(tmp_path: Path) -> None:
    ids: list[Any] = [0, -1, 2**53, "1", "x y"]
    async with stdio(tmp_path) as ui:
        for rid in ids:
            await ui.send({"jsonrpc": "2.0", "method": "silent.one"}, req(rid, "m"))
        got = [await answer(ui) for _ in ids]
        assert [m["id"] for m in got] == ids
        assert all(type(m["id"]) is type(rid) for m, rid in zip(got, ids, strict=True))
        await finish(ui)
        assert len(ui.seen) == len(ids)  # nothing for the notifications, not even errors


async def test_a_batch_over_stdio(tmp_path: Path) -> None:
    init = req("i", "initialize", protocol_version="0", client={"name": "t", "version": "1"})
    async with stdio(tmp_path) as ui:
        await ui.send(
            orjson.dumps([init, {"jsonrpc": "2.0", "method": "n"}, 5, req("m", "nope")]) + b"\n",
            orjson.dumps([{"jsonrpc": "2.0", "method": "a"}, {"jsonrpc": "2.0", "method": "b"}])
            + b"\n",
            req("last", "nope"),
        )
        batch = await answer(ui)
        assert isinstance(batch, list)
        by_id = {m["id"]: m for m in batch}
        assert set(by_id) == {"i", None, "m"}
        assert len(batch) == 3
        assert by_id["i"]["result"]["server"]["name"] == "codexcore"
        assert by_id[None]["error"]["code"] == -32600
        assert by_id["m"] == not_found("m", "nope")
        assert await answer(ui) == not_found("last", "nope")  # the all-notification batch: nothing
        await finish(ui)


def test_every_method_the_source_documents_name_is_served() -> None:
    """Each protocol's document names its methods; none is left to "method not found"."""
    served = set(standard_methods().names)
    named = {m for names in SEED_METHODS.values() for m in names}
    assert sorted(named - served) == []
    assert {"generate", "customize", "set_interactive_mode", "write_pty"} <= served


async def test_the_protocol_flag_forces_a_dialect(tmp_path: Path) -> None:
    async with stdio(tmp_path, "--protocol", "jsonrpc") as ui:
        await ui.send(hello())
        error = await answer(ui)
        assert (error["id"], error["error"]["code"]) == (None, -32600)
        await finish(ui)
    async with stdio(tmp_path, "--protocol", "native") as ui:
        await ui.send(SEED_000_INITIALIZE)
        event = await answer(ui)
        assert (event["msg"]["type"], event["msg"]["code"]) == ("error", "bad_submission")
        await finish(ui)


async def test_a_native_hello_still_selects_the_native_dialect(tmp_path: Path) -> None:
    async with stdio(tmp_path) as ui:
        await ui.send(hello(token=None))
        assert (await answer(ui))["type"] == "welcome"
        await ui.close_stdin()
        await ui.to_end()
        assert ui.types()[-1] == "shutdown_complete"
        assert await ui.wait_exit() == 0


async def test_sigterm_before_the_first_line_exits_0(tmp_path: Path) -> None:
    argv = [PY, "-m", "codexcore", "--log-level", "info", "serve", "--stdio"]
    async with stdio(tmp_path, argv=argv) as ui:
        await ui.wait_stderr("serving stdio")
        assert ui.process is not None
        ui.process.send_signal(signal.SIGTERM)
        assert await ui.wait_exit() == 0, ui.context()


# --- sockets -------------------------------------------------------------------------------


@asynccontextmanager
async def sockets(
    tmp_path: Path,
    *args: str,
    unix: Path | None = None,
    tcp: bool = True,
    token: str | None = TOKEN,
) -> AsyncIterator[ServerProcess]:
    async with ScriptedResponsesServer(ScriptedModel([])) as http:
        tokens = {} if token is None else {"CODEXCORE_TOKEN": token}
        env = server_env(http.base_url, CODEXCORE_LOG="info", **tokens)
        server = await ServerProcess.start(
            http.base_url, tmp_path, *args, unix=unix, tcp=tcp, env=env
        )
        try:
            yield server
        finally:
            await server.kill()


def initialize(token: str | None) -> dict[str, Any]:
    message = orjson.loads(SEED_000_INITIALIZE)
    if token is not None:
        message["params"]["auth"] = {"token": token}
    return dict(message)


async def test_tcp_requires_initialize_with_the_token_first(tmp_path: Path) -> None:
    async with sockets(tmp_path) as server:

        async def refused(*lines: dict[str, Any] | bytes) -> Any:
            client = await server.client()
            await client.send(*lines)
            await client.to_end()  # the server closes the connection
            assert len(client.seen) == 1, client.seen
            return client.seen[0]

        missing = await refused(initialize(None), req("2", "run.start"))
        wrong = await refused(initialize("guess"))
        assert (
            missing
            == wrong
            == {
                "jsonrpc": "2.0",
                "id": "1",
                "error": {"code": -32011, "message": "unauthorized: the token is missing or wrong"},
            }
        )
        early = await refused(req("2", "run.start"), initialize(TOKEN))
        assert (early["id"], early["error"]["code"]) == ("2", -32010)
        assert "before initialize" in early["error"]["message"]

        ui = await server.client()
        await ui.send(initialize(TOKEN), req("2", "run.start"))
        assert (await answer(ui))["result"]["server"]["name"] == "codexcore"
        error = (await answer(ui))["error"]  # served now: its params are checked
        assert (error["code"], error["message"]) == (
            -32602,
            "Invalid params: params.input: missing required field",
        )
        native = await server.client()
        assert (await native.greet())["type"] == "welcome"  # the same port, the other dialect
        await ui.close()
        await native.close()


async def test_tcp_forced_to_json_rpc_times_out_and_refuses_in_json_rpc(tmp_path: Path) -> None:
    async with sockets(tmp_path, "--protocol", "jsonrpc", "--handshake-timeout", "0.3") as server:
        silent = await server.client()
        await silent.to_end()  # say nothing
        assert silent.seen == [
            {
                "jsonrpc": "2.0",
                "id": None,
                "error": {"code": -32010, "message": "no initialize within 0.3 seconds"},
            }
        ]
        native = await server.client()
        await native.send(hello())
        await native.to_end()
        (refusal,) = native.seen  # not a JSON-RPC request: -32600, and closed
        assert (refusal["id"], refusal["error"]["code"]) == (None, -32600)
        assert '"jsonrpc" must be "2.0"' in refusal["error"]["message"]


async def test_unix_needs_no_initialize_and_serves_both_dialects(tmp_path: Path) -> None:
    with private_dir() as run:
        # No token: the peer checks alone admit a client, as seed 004's never initializes.
        async with sockets(tmp_path, unix=run / "s.sock", tcp=False, token=None) as server:
            ui = await server.client(unix=True)
            await ui.send(SEED_004_GET_STATUS)
            status = (await answer(ui))["result"]
            assert (status["agent"], status["status"]) == ("codexcore", "idle")
            await ui.send(orjson.dumps(SEED_001_INITIALIZE) + b"\n")
            assert (await answer(ui))["result"]["serverName"] == "codexcore"
            native = await server.client(unix=True)
            assert (await native.greet())["type"] == "welcome"
            # The server stops: get_status gave the connection its session, which ends.
            assert await server.stop(within=10) == 0
            await ui.to_end(within=5)


async def test_unix_with_a_token_asks_json_rpc_for_it_as_native_asks_in_hello(
    tmp_path: Path,
) -> None:
    with private_dir() as run:
        async with sockets(tmp_path, unix=run / "s.sock") as server:
            early = await server.client(unix=True)
            await early.send(SEED_004_GET_STATUS)
            refused = await answer(early)
            assert refused["error"]["code"] == -32010, refused
            await early.to_end(within=5)
            wrong = await server.client(unix=True)
            await wrong.send(initialize("not-the-token"))
            assert (await answer(wrong))["error"]["code"] == -32011
            await wrong.to_end(within=5)
            ui = await server.client(unix=True)
            await ui.send(initialize(TOKEN))
            assert (await answer(ui))["result"]["server"]["name"] == "codexcore"
            await ui.send(SEED_004_GET_STATUS)
            assert (await answer(ui))["result"]["agent"] == "codexcore"


NOBODY_RPC_CLIENT = """
import json, socket, sys
with socket.socket(socket.AF_UNIX) as sock:
    sock.settimeout(10)
    sock.connect(sys.argv[1])
    sock.sendall(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "get_status"}).encode() + b"\\n")
    sys.stdout.write(sock.makefile("rb").readline().decode())
"""


@pytest.mark.skipif(
    os.geteuid() != 0 or not os.path.exists("/usr/bin/python3"),
    reason="needs root, to run a client as another user",
)
@pytest.mark.parametrize("protocol", ["jsonrpc", "auto"])
async def test_unix_refuses_another_user_in_json_rpc_too(tmp_path: Path, protocol: str) -> None:
    with private_dir() as run:
        path = run / "s.sock"
        async with sockets(tmp_path, "--protocol", protocol, unix=path, tcp=False) as server:
            # Loosened permissions: only the peer check stands between the socket and nobody.
            os.chmod(run, 0o755)
            os.chmod(path, 0o666)
            process = await asyncio.create_subprocess_exec(
                "/usr/bin/python3",
                "-c",
                NOBODY_RPC_CLIENT,
                str(path),
                user=65534,
                group=65534,
                extra_groups=[],
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env={},
            )
            stdout, stderr = await asyncio.wait_for(process.communicate(), 15)
            assert process.returncode == 0, stderr.decode()
            refusal = orjson.loads(stdout)
            if protocol == "jsonrpc":
                assert refusal["id"] is None
                assert refusal["error"]["code"] == -32011
                assert "uid 65534" in refusal["error"]["message"]
            else:  # before reading anything from it, the peer is refused natively
                assert (refusal["type"], refusal["code"]) == ("refused", "unauthorized")
            assert await server.stop() == 0


def _flood_until_blocked(address: tuple[str, int], line: bytes, cap: int) -> int:
    """Send ``line`` over and over, never reading, until the server stops taking them
    (a send blocks for 2 s) or ``cap`` bytes went out; returns the bytes sent."""
    with socket.create_connection(address, timeout=10) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.sendall(orjson.dumps(initialize(TOKEN)) + b"\n")
        sock.settimeout(2)
        sent = 0
        chunk = line * 16
        try:
            while sent < cap:
                sock.sendall(chunk)
                sent += len(chunk)
        except TimeoutError:
            pass
        return sent


async def test_a_client_that_floods_without_reading_is_slowed_not_buffered(
    tmp_path: Path,
) -> None:
    """Each request's error names its 8 KB method, so answers are as big as requests:
    a client that never reads them is stopped by TCP flow control, not buffered."""
    method = "m" * 8192
    line = orjson.dumps(req(1, method)) + b"\n"
    cap = 256 * 1024 * 1024
    async with sockets(tmp_path, "--send-buffer-bytes", "262144") as server:
        assert server.tcp is not None
        baseline = server.memory_kib()
        sent = await asyncio.to_thread(_flood_until_blocked, server.tcp, line, cap)
        peak = server.memory_kib("VmHWM")
        # The server still serves others.
        other = await server.client()
        await other.send(initialize(TOKEN))
        assert (await answer(other))["result"]["server"]["name"] == "codexcore"
    assert sent < 64 * 1024 * 1024, f"{sent} bytes went out before the server pushed back"
    growth_mib = (peak - baseline) / 1024
    assert growth_mib < 32, f"server memory grew by {growth_mib:.1f} MiB"
