"""The seeds' JSON-RPC methods: known by name at ``initialize``, loaded at their first call.

A :class:`MethodGroup` names a module's methods up front; the table imports the
module and builds its handlers at the first lookup of one of them. What a
client sees must not change: the real server answers a first ``run.start``,
``chat`` or a crowd of first calls as it did when everything was loaded at start
(``tests/test_import_guard.py`` checks that ``initialize`` loads none of them).
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from codexcore.adapters.jsonrpc._machine import RpcError
from codexcore.adapters.jsonrpc._methods import (
    STANDARD_GROUPS,
    Method,
    MethodGroup,
    MethodTable,
    decode_params,
    standard_methods,
)
from codexcore.testing import ScriptedModel, text_response

from .test_codelia import check_run, finish, req, serving, tui_initialize
from .test_seed001 import EXIT, INITIALIZE, chat, exits_cleanly, read_chat, serve

pytestmark = pytest.mark.anyio


def loaded_table() -> MethodTable:
    """The standard table with every group loaded: what a connection served before."""
    table = standard_methods()
    table.load_all()
    return table


# --- the table ------------------------------------------------------------------------------


class Counted:
    """A group's ``register`` that counts its runs (and can take its time)."""

    def __init__(self, delay: float = 0.0) -> None:
        self.runs = 0
        self.delay = delay

    def __call__(self, table: MethodTable) -> None:
        self.runs += 1
        time.sleep(self.delay)  # a slow import: the window another first call could hit
        table.add("a.go", _answer, dict, inline=True)
        table.add("a.end", _answer, dict, bounded=False)
        table.provide("supports_ui_requests")


async def _answer(ctx: Any, params: dict[str, Any]) -> str:
    return "answered"


def counted_table(register: Counted) -> MethodTable:
    table = MethodTable()
    table.add_group(
        MethodGroup(
            register, ("a.go", "a.end"), unbounded=("a.end",), features=("supports_ui_requests",)
        )
    )
    return table


def test_what_initialize_and_a_connection_read_loads_no_group() -> None:
    register = Counted()
    table = counted_table(register)
    assert "a.go" in table
    assert table.names == ["a.end", "a.go"]
    assert table.unbounded == {"a.end"}  # the bound on calls in flight, at connection start
    assert table.server_capabilities()["supports_ui_requests"]
    assert "no.such" not in table
    assert table.get("no.such") is None
    assert register.runs == 0
    assert table.runs_inline("a.go")  # a call about to run: its group is loaded for it
    assert register.runs == 1
    method = table.get("a.end")
    assert method is not None
    assert method.name == "a.end"
    assert not table.runs_inline("a.end")
    assert register.runs == 1  # once for the group, whichever of its methods comes first


def test_two_threads_first_lookups_load_a_group_once() -> None:
    register = Counted(delay=0.05)
    table = counted_table(register)
    start = threading.Barrier(2)
    found: list[Method[Any] | None] = []

    def first_call() -> None:
        start.wait()
        found.append(table.get("a.go"))

    threads = [threading.Thread(target=first_call) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert register.runs == 1
    assert len(found) == 2
    assert found[0] is not None
    assert found[0] is found[1]


def test_each_standard_group_declares_exactly_what_its_module_registers() -> None:
    for group in STANDARD_GROUPS:
        table = MethodTable()
        table.add_group(group)
        table.load_all()  # raises when the module registers other names than declared
        assert table.names == sorted(group.methods)
        assert all(table.get(name) is not None for name in group.methods)
    everything = loaded_table()
    assert everything.names == standard_methods().names
    assert everything.unbounded == standard_methods().unbounded == {"exit", "$/cancelRequest"}
    assert everything.server_capabilities() == standard_methods().server_capabilities()


def test_a_group_that_drifted_from_its_module_fails_at_its_first_call_naming_both() -> None:
    (seed001,) = [g for g in STANDARD_GROUPS if "chat" in g.methods]
    for drifted in (
        MethodGroup(seed001.register, ("chat",), unbounded=("exit",)),  # exit forgotten
        MethodGroup(
            seed001.register,
            ("chat", "exit", "generate", "customize", "clarify"),
            unbounded=("exit",),
        ),
        MethodGroup(seed001.register, ("chat", "exit")),  # exit's bound forgotten
    ):
        table = MethodTable()
        table.add_group(drifted)
        with pytest.raises(
            RuntimeError, match=r"jsonrpc\.chat\._chat registered .* but its MethodGroup"
        ):
            table.get("chat")


def test_a_name_is_registered_once_whether_by_group_or_by_hand() -> None:
    table = counted_table(Counted())
    with pytest.raises(ValueError, match=r"'a\.go' is already registered"):
        table.add("a.go", _answer, dict)
    with pytest.raises(ValueError, match=r"\['a\.end'\] are already registered"):
        table.add_group(MethodGroup(Counted(), ("a.end",)))


def test_the_openrpc_document_loads_every_group() -> None:
    from codexcore.adapters.jsonrpc._openrpc import openrpc_document

    lazy = openrpc_document(standard_methods())
    assert lazy == openrpc_document(loaded_table())
    assert {m["name"] for m in lazy["methods"]} == set(standard_methods().names)
    assert "stream/chunk" in {n["name"] for n in lazy["x-notifications"]}


# --- a real server: every call below is its method's first ----------------------------------


async def test_a_first_run_start_runs_seed_000s_flow(tmp_path: Path) -> None:
    model = ScriptedModel([text_response("Loaded at the first call.")])
    async with serving(tmp_path, model) as (ui, _):
        await ui.server.send(
            tui_initialize(supports_confirm=True),
            req("2", "run.start", input={"type": "text", "text": "hi"}),
        )
        init = (await ui.answer("1"))["result"]
        capabilities = loaded_table().server_capabilities()
        assert {k: init["server_capabilities"][k] for k in capabilities} == capabilities
        run_id = (await ui.answer("2"))["result"]["run_id"]
        assert await ui.run_to_end(run_id) == "completed"
        check_run(ui, run_id)
        events = [e["event"]["type"] for e in ui.events(run_id)]
        assert events == ["step_start", "text", "step_complete", "final"]
        assert ui.events(run_id)[-1]["event"]["content"] == "Loaded at the first call."
        # Other seed 000 groups, each loaded by its own first call.
        await ui.server.send(req("3", "model.list"), req("4", "session.list"))
        assert (await ui.answer("3"))["result"]["provider"] == "openai"
        assert "sessions" in (await ui.answer("4"))["result"]
        await finish(ui)


async def test_a_first_chat_streams_seed_001s_answer(tmp_path: Path) -> None:
    async with serve(tmp_path, [text_response("Streamed.", chunks=3)]) as (ui, _):
        await ui.send(INITIALIZE, chat(4, "Formats?"))
        init = await ui.recv()
        assert init is not None
        assert init["result"]["capabilities"] == loaded_table().capabilities_001()
        answer = await read_chat(ui, 4)
        answer.check(4)
        assert answer.text == "Streamed."
        assert answer.response["result"] == {"message": "Streamed.", "suggestions": []}
        await ui.send(EXIT)  # unbounded, declared so before seed 001 was loaded
        await exits_cleanly(ui)


async def test_concurrent_first_calls_all_answer_as_a_loaded_table_would(tmp_path: Path) -> None:
    crowd = [
        req("m1", "model.list"),
        req("s1", "session.list"),
        req("s2", "session.list"),
        req("k1", "skills.list"),
        req("g1", "get_status"),
        req("p1", "mcp.list"),
        req("m2", "model.list"),
    ]
    async with serving(tmp_path, ScriptedModel([])) as (ui, _):
        # One write: every call is read, and the non-inline ones are in flight together,
        # before any of them is answered; then the same in one batch.
        await ui.server.send(b"".join(orjson.dumps(m) + b"\n" for m in [tui_initialize(), *crowd]))
        await ui.answer("1")
        single = {a["id"]: a for a in [await ui.next() for _ in crowd]}  # in any order
        batch = [{**c, "id": f"b-{c['id']}"} for c in crowd]
        await ui.server.send(orjson.dumps(batch) + b"\n")
        answers: Any = await ui.next()
        await finish(ui)
    assert isinstance(answers, list)
    assert len(answers) == len(batch)
    assert all("result" in a for a in single.values()), single
    assert single["m1"]["result"] == single["m2"]["result"]
    assert single["s1"]["result"] == single["s2"]["result"]
    assert single["g1"]["result"]["agent"] == "codexcore"
    by_id = {a["id"]: a for a in answers}
    for rid in ("m1", "s1", "k1", "p1"):  # what does not change between two asks
        assert by_id[f"b-{rid}"]["result"] == single[rid]["result"], rid


async def test_a_first_calls_params_errors_are_the_loaded_tables(tmp_path: Path) -> None:
    table = loaded_table()
    expected: dict[str, str] = {}
    for name in table.names:
        method = table.get(name)
        assert method is not None
        try:
            decode_params(method.params, {})
        except RpcError as exc:
            expected[name] = exc.message
    assert {"run.start", "chat", "inject_prompt"} <= expected.keys(), expected
    assert expected["run.start"] == "Invalid params: params.input: missing required field"
    async with serving(tmp_path, ScriptedModel([])) as (ui, _):
        await ui.server.send(tui_initialize(), *(req(name, name) for name in expected))
        await ui.answer("1")
        got = {a["id"]: a for a in [await ui.next() for _ in expected]}
        await finish(ui)
    assert {name: a["error"]["message"] for name, a in got.items()} == expected, json.dumps(got)
    assert {a["error"]["code"] for a in got.values()} == {-32602}
