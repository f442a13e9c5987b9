"""The JSON-RPC machine and method table, with no I/O: bytes in, bytes and values out."""

from __future__ import annotations

from typing import Any

import attrs
import orjson
import pytest

from codexcore.adapters.jsonrpc._machine import (
    Answered,
    Call,
    Close,
    Ignored,
    Input,
    RpcError,
    RpcMachine,
    Send,
)
from codexcore.adapters.jsonrpc._methods import (
    SERVER_CAPABILITIES,
    SERVER_FEATURES,
    MethodTable,
    decode_params,
    initialize,
    standard_methods,
)
from codexcore.adapters.transports._framing import LineTooLong


def line(message: Any) -> bytes:
    return orjson.dumps(message)


def request(rid: Any, method: str, **params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}


def notify(method: str, **params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": method, "params": params}


def sent(inputs: list[Input]) -> Any:
    """The one message the machine wants written."""
    assert len(inputs) == 1, inputs
    assert isinstance(inputs[0], Send | Close), inputs
    return orjson.loads(inputs[0].data)


def only_call(inputs: list[Input]) -> Call:
    assert len(inputs) == 1, inputs
    assert isinstance(inputs[0], Call), inputs
    return inputs[0]


@pytest.mark.parametrize("rid", [0, -1, 2**53, 2**64 + 1, -(2**70), 1.5, "1", "x y", "", None])
def test_ids_are_echoed_exactly(rid: Any) -> None:
    machine = RpcMachine()
    text = str(rid) if isinstance(rid, int) else orjson.dumps(rid).decode()
    call = only_call(machine.receive(b'{"jsonrpc":"2.0","id":%s,"method":"m"}' % text.encode()))
    assert call.id == rid
    assert type(call.id) is type(rid)
    answer = machine.reply(call, {"ok": True})
    assert b'"id":%s,' % text.encode() in answer, answer  # big integers too, digit for digit


def test_a_notification_never_gets_a_response_not_even_an_error() -> None:
    machine = RpcMachine()
    call = only_call(machine.receive(line(notify("no.such.method"))))
    assert call.notification
    assert machine.reply(call, error=RpcError(-32601, "Method not found: no.such.method")) == b""
    assert machine.pending == 0


def test_a_batch_mixing_requests_notifications_and_invalid_entries() -> None:
    machine = RpcMachine()
    batch = [
        request(1, "a"),
        notify("n"),
        42,
        {"jsonrpc": "2.0", "method": 7, "id": "bad-method"},
        {"jsonrpc": "1.0", "method": "x", "id": "old"},
        request("two", "b"),
        {"jsonrpc": "2.0", "id": "never-sent", "result": 1},
    ]
    inputs = machine.receive(line(batch))
    calls = [i for i in inputs if isinstance(i, Call)]
    assert [(c.method, c.notification) for c in calls] == [("a", False), ("n", True), ("b", False)]
    assert [type(i) for i in inputs if not isinstance(i, Call)] == [Ignored]
    assert machine.reply(calls[1]) == b""  # the notification
    assert machine.reply(calls[2], "B") == b""  # the batch is not whole yet
    whole = orjson.loads(machine.reply(calls[0], "A"))
    assert isinstance(whole, list)
    by_id = {entry["id"]: entry for entry in whole}
    assert by_id[1]["result"] == "A"
    assert by_id["two"]["result"] == "B"
    assert by_id[None]["error"]["code"] == -32600  # 42: its id cannot be read
    assert by_id["bad-method"]["error"]["code"] == -32600
    assert by_id["old"]["error"]["code"] == -32600
    assert len(whole) == 5  # nothing for the notification
    assert machine.pending == 0


def test_a_batch_of_notifications_is_answered_by_nothing() -> None:
    machine = RpcMachine()
    calls = machine.receive(line([notify("a"), notify("b")]))
    assert all(isinstance(c, Call) and c.notification for c in calls)
    assert [machine.reply(c) for c in calls if isinstance(c, Call)] == [b"", b""]


def test_a_batch_of_only_invalid_entries_is_answered_at_once() -> None:
    whole = sent(RpcMachine().receive(b"[1, 2, 3]"))
    assert [(e["id"], e["error"]["code"]) for e in whole] == [(None, -32600)] * 3


@pytest.mark.parametrize(
    ("frame", "code", "says"),
    [
        (b"[]", -32600, "empty batch"),
        (b"42", -32600, "got a number"),
        (b'"str"', -32600, "got a string"),
        (b"null", -32600, "got null"),
        (b'{"jsonrpc": "2.0", "id": 1,', -32700, "Parse error"),
        (b'{"jsonrpc": "2.0", "id": true, "method": "m"}', -32600, "id must be"),
        (b'{"jsonrpc": "2.0", "id": 3, "method": "m", "params": 5}', -32600, '"params"'),
        (b'{"jsonrpc": "2.0", "id": 3}', -32600, '"method" is missing'),
        (b'{"id": 3, "method": "m"}', -32600, '"jsonrpc" must be "2.0"'),
        (b'{"jsonrpc": "2.0", "method": "\xff"}', -32700, "not valid UTF-8 (byte 0xff"),
    ],
)
def test_bad_frames_get_one_error_and_the_machine_goes_on(
    frame: bytes, code: int, says: str
) -> None:
    machine = RpcMachine()
    error = sent(machine.receive(frame))
    assert error["error"]["code"] == code, error
    assert says in error["error"]["message"], error
    expected_id = 3 if b'"id": 3' in frame else None
    assert error["id"] == expected_id
    assert only_call(machine.receive(line(request(9, "next")))).id == 9


def test_an_over_long_line_is_an_error_with_id_null() -> None:
    error = sent(RpcMachine().receive(LineTooLong(100)))
    assert error == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32600, "message": error["error"]["message"]},
    }
    assert "longer than 100 bytes" in error["error"]["message"]


def test_blank_lines_mean_nothing() -> None:
    assert RpcMachine().receive(b"   ") == []


def test_calls_in_flight_are_bounded() -> None:
    machine = RpcMachine(max_pending=2)
    first = only_call(machine.receive(line(request(1, "slow"))))
    only_call(machine.receive(line(request(2, "slow"))))
    over = sent(machine.receive(line(request(3, "slow"))))
    assert over["id"] == 3
    assert over["error"]["code"] == -32004
    assert "too many requests" in over["error"]["message"]
    dropped = machine.receive(line(notify("n")))
    assert len(dropped) == 1
    assert isinstance(dropped[0], Ignored)
    batch = sent(machine.receive(line([request(4, "x")])))
    assert [e["error"]["code"] for e in batch] == [-32004]
    machine.reply(first, None)
    assert only_call(machine.receive(line(request(5, "ok")))).id == 5


def test_exempt_methods_get_through_a_full_connection() -> None:
    machine = RpcMachine(max_pending=1, exempt=frozenset({"exit"}))
    only_call(machine.receive(line(request(1, "chat"))))
    assert sent(machine.receive(line(request(2, "chat"))))["error"]["code"] == -32004
    assert only_call(machine.receive(line(notify("exit")))).method == "exit"
    assert only_call(machine.receive(line(request(3, "exit")))).id == 3
    assert machine.pending == 3


def test_before_initialize_only_initialize_is_accepted() -> None:
    def gated() -> RpcMachine:
        return RpcMachine(require_initialize=True)

    closed = gated().receive(line(request("2", "run.start")))
    assert isinstance(closed[0], Close)
    error = orjson.loads(closed[0].data)
    assert error["id"] == "2"
    assert error["error"]["code"] == -32010
    assert isinstance(gated().receive(line([request(1, "initialize")]))[0], Close)
    assert isinstance(gated().receive(b"not json")[0], Close)
    assert isinstance(gated().receive(line(notify("initialize")))[0], Close)
    assert isinstance(gated().receive(line({"jsonrpc": "2.0", "id": "1", "result": 1}))[0], Close)
    machine = gated()
    call = only_call(machine.receive(line(request("1", "initialize"))))
    machine.reply(call, {})
    machine.initialized()
    assert only_call(machine.receive(line(request("2", "run.start")))).method == "run.start"


def test_two_machines_paired_runtime_requests_carry_string_ids_and_are_correlated() -> None:
    runtime, ui = RpcMachine(), RpcMachine()
    rid, data = runtime.request("ui.confirm.request", {"title": "Run?", "message": "ls"})
    assert isinstance(rid, str)
    call = only_call(ui.receive(data))
    assert (call.id, call.method, call.params) == (
        rid,
        "ui.confirm.request",
        {
            "title": "Run?",
            "message": "ls",
        },
    )
    answer = ui.reply(call, {"ok": True, "remember": False, "reason": None})
    assert runtime.receive(answer) == [
        Answered(rid, result={"ok": True, "remember": False, "reason": None})
    ]
    # The same answer again, one to an id never sent, one with a number id: ignored.
    for stray in (answer, line({"jsonrpc": "2.0", "id": "999", "result": 1})):
        ignored = runtime.receive(stray)
        assert len(ignored) == 1, ignored
        assert isinstance(ignored[0], Ignored), ignored
    numeric = runtime.receive(line({"jsonrpc": "2.0", "id": 1, "result": 1}))
    assert isinstance(numeric[0], Ignored)
    rid2, data2 = runtime.request("ui.pick.request", {})
    assert rid2 != rid
    failed = ui.reply(only_call(ui.receive(data2)), error=RpcError(-32003, "user cancelled"))
    (answered,) = runtime.receive(failed)
    assert isinstance(answered, Answered)
    assert answered.error is not None
    assert (answered.error.code, answered.error.message) == (-32003, "user cancelled")
    rid3, _ = runtime.request("ui.prompt.request", {})
    assert runtime.close() == [rid3]


def test_a_result_that_is_not_json_changes_nothing() -> None:
    machine = RpcMachine()
    call = only_call(machine.receive(line(request(1, "m"))))
    with pytest.raises(TypeError):
        machine.reply(call, object())
    assert machine.pending == 1
    assert orjson.loads(machine.reply(call, error=RpcError(-32603, "Internal error")))["id"] == 1


# --- params and the table --------------------------------------------------------------


@attrs.frozen
class Inner:
    name: str
    size: int = 0


@attrs.frozen
class Params:
    inner: Inner
    camel: str = attrs.field(default="", metadata={"wire": "camelName"})
    ratio: float | None = None
    tags: list[Any] | None = None


def test_params_decode_ignoring_unknown_fields() -> None:
    decoded = decode_params(
        Params, {"inner": {"name": "a", "extra": 1}, "camelName": "c", "ratio": 2, "future": True}
    )
    assert decoded == Params(Inner("a"), camel="c", ratio=2)


@pytest.mark.parametrize(
    ("params", "says"),
    [
        ({}, "params.inner: missing required field"),
        ({"inner": {}}, "params.inner.name: missing required field"),
        ({"inner": {"name": 1}}, "params.inner.name: expected a string"),
        ({"inner": {"name": "a", "size": True}}, "params.inner.size: expected an integer"),
        ({"inner": {"name": "a"}, "camelName": 3}, "params.camelName: expected a string"),
        ({"inner": {"name": "a"}, "tags": {}}, "params.tags: expected an array"),
        ([1, 2], "params: expected an object"),
    ],
)
def test_bad_params_are_32602_naming_the_field(params: Any, says: str) -> None:
    with pytest.raises(RpcError) as caught:
        decode_params(Params, params)
    assert caught.value.code == -32602
    assert says in caught.value.message, caught.value.message


async def _nothing(ctx: Any, params: Any) -> None:
    return None


def test_capabilities_are_true_exactly_for_what_is_registered() -> None:
    served = standard_methods()
    on = {k for k, v in served.server_capabilities().items() if v}
    assert on == {
        "supports_run_cancel",
        "supports_shell_exec",
        "supports_context_inspect",
        "supports_tool_call",
        "supports_mcp_list",
        "supports_skills_list",
        "supports_theme_set",
        "supports_ui_requests",
        "supports_permission_preflight_events",
    }
    table = MethodTable()
    table.add("initialize", initialize, dict)
    assert table.names == ["initialize"]
    assert set(table.server_capabilities()) == {*SERVER_CAPABILITIES, *SERVER_FEATURES}
    assert not any(table.server_capabilities().values())
    assert table.capabilities_001() == {
        "codeGeneration": False,
        "customization": False,
        "streaming": False,
    }
    table.add("run.cancel", _nothing, dict)
    table.add("chat", _nothing, dict)
    table.provide("supports_ui_requests")
    on = {k for k, v in table.server_capabilities().items() if v}
    assert on == {"supports_run_cancel", "supports_ui_requests"}
    assert table.capabilities_001()["streaming"] is True
    with pytest.raises(ValueError, match="already registered"):
        table.add("chat", _nothing, dict)
    with pytest.raises(ValueError, match="unknown feature"):
        MethodTable().provide("supports_everything")
