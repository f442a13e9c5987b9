"""``codexcore schema --openrpc``: the OpenRPC document of the JSON-RPC dialect.

The document is checked against the OpenRPC 1.3 meta-schema (vendored in
``tests/data/openrpc-meta-schema.json``: the npm package
``@open-rpc/meta-schema`` 1.14.9, Apache-2.0, its ``openrpcDocument`` object
as JSON), against the method table, and against a real ``codexcore serve
--stdio``: every method is called with the smallest params its own schema
allows, and the answer validates against the result schema the document gives,
or is an error the document lists for it.
"""

from __future__ import annotations

import copy
import importlib
import json
import pkgutil
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import referencing
from referencing.jsonschema import DRAFT7

from codexcore import adapters
from codexcore.adapters.jsonrpc._errors import ERRORS
from codexcore.adapters.jsonrpc._methods import standard_methods
from codexcore.adapters.jsonrpc._openrpc import openrpc_document
from codexcore.testing import ScriptedModel, ScriptedResponsesServer, text_response

from .server_helpers import PY, StdioServer

pytestmark = pytest.mark.anyio

META_SCHEMA = Path(__file__).parent / "data" / "openrpc-meta-schema.json"


def cli_document() -> dict[str, Any]:
    out = subprocess.run(
        [PY, "-m", "codexcore", "schema", "--openrpc"],
        capture_output=True,
        check=True,
        timeout=60,
    )
    document: dict[str, Any] = json.loads(out.stdout)
    return document


@pytest.fixture(scope="module")
def document() -> dict[str, Any]:
    return cli_document()


def meta_validator() -> jsonschema.Draft7Validator:
    """The OpenRPC meta-schema; its JSON Schema parts refer to a draft-07 meta-schema online,
    given here from jsonschema's own copy (plus the one definition the OpenRPC one names)."""
    json_schema = copy.deepcopy(jsonschema.Draft7Validator.META_SCHEMA)
    json_schema.pop("$id")
    json_schema["definitions"]["JSONSchemaObject"] = {"properties": {"$ref": {"type": "string"}}}
    resource = referencing.Resource.from_contents(json_schema, default_specification=DRAFT7)
    registry: referencing.Registry[Any] = referencing.Registry().with_resources(
        [
            ("https://meta.json-schema.tools", resource),
            ("https://meta.json-schema.tools/", resource),
        ]
    )
    meta = json.loads(META_SCHEMA.read_text())
    return jsonschema.Draft7Validator(meta, registry=registry)


def test_the_document_is_valid_openrpc(document: dict[str, Any]) -> None:
    errors = [
        f"{list(e.absolute_path)}: {e.message}" for e in meta_validator().iter_errors(document)
    ]
    assert errors == []
    broken = copy.deepcopy(document)
    del broken["methods"][0]["params"]
    assert not meta_validator().is_valid(broken), "the meta-schema checks nothing"


def refs(value: Any) -> list[str]:
    if isinstance(value, dict):
        own = [value["$ref"]] if isinstance(value.get("$ref"), str) else []
        return own + [ref for item in value.values() for ref in refs(item)]
    if isinstance(value, list):
        return [ref for item in value for ref in refs(item)]
    return []


def resolve(document: dict[str, Any], ref: str) -> Any:
    assert ref.startswith("#/"), ref
    found: Any = document
    for part in ref[2:].split("/"):
        found = found[part]
    return found


def test_every_method_once_every_ref_resolves_every_notification_declared(
    document: dict[str, Any],
) -> None:
    names = [method["name"] for method in document["methods"]]
    assert names == sorted(set(names))
    assert names == standard_methods().names
    for ref in refs(document):
        assert resolve(document, ref) is not None
    sent = {n["name"] for n in document["x-notifications"]}
    assert {"stream/chunk", "event"} <= sent
    for method in document["methods"]:
        assert set(method.get("x-notifications", [])) <= sent, method["name"]


def test_every_method_registers_its_result_schema(document: dict[str, Any]) -> None:
    """A method registered without ``result=`` is documented as answering anything: named here."""
    lacking = [m["name"] for m in document["methods"] if m["result"]["schema"] == {}]
    assert lacking == [], f"register a result schema (MethodTable.add(result=...)) for {lacking}"


def test_the_error_table_has_every_code_the_adapters_define() -> None:
    """Every ``-32xxx`` constant of an adapters module is in the one table, so in the document."""
    codes = {error.code for error in ERRORS}
    missing = []
    for info in pkgutil.walk_packages(adapters.__path__, "codexcore.adapters."):
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            constant = name.isupper() and type(value) is int
            if constant and -32768 <= value <= -32000 and value not in codes:
                missing.append(f"{info.name}.{name} = {value}")
    assert missing == []
    document = openrpc_document()
    assert {e["code"] for e in document["components"]["errors"].values()} == codes
    assert document["components"]["errors"]["MethodNotFound"]["code"] == -32601


def test_plain_schema_does_not_import_the_adapters() -> None:
    probe = (
        "import sys, contextlib, io\n"
        "from codexcore.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    main(['schema'])\n"
        "print(sorted(m for m in sys.modules if 'adapters' in m))\n"
    )
    out = subprocess.run([PY, "-c", probe], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


# --- against the server -----------------------------------------------------------------------


def minimal(schema: dict[str, Any], document: dict[str, Any]) -> Any:
    """The smallest value ``schema`` accepts (first choice of each union, required fields only)."""
    if "$ref" in schema:
        return minimal(resolve(document, schema["$ref"]), document)
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return schema["enum"][0]
    for union in ("anyOf", "oneOf"):
        if union in schema:
            return minimal(schema[union][0], document)
    kind = schema.get("type")
    kind = kind[0] if isinstance(kind, list) else kind
    if kind == "object":
        properties = schema.get("properties", {})
        return {name: minimal(properties[name], document) for name in schema.get("required", [])}
    simplest: dict[Any, Any] = {"array": [], "string": "x", "integer": 0, "number": 0}
    return simplest.get(kind, False if kind == "boolean" else None)


def minimal_params(method: dict[str, Any], document: dict[str, Any]) -> dict[str, Any]:
    return {d["name"]: minimal(d["schema"], document) for d in method["params"] if d["required"]}


def validates(schema: dict[str, Any], value: Any, document: dict[str, Any]) -> None:
    rooted = {**schema, "components": document["components"]}
    jsonschema.Draft202012Validator(rooted).validate(value)


def as_object(params: list[dict[str, Any]]) -> dict[str, Any]:
    properties = {d["name"]: d["schema"] for d in params}
    return {
        "type": "object",
        "properties": properties,
        "required": [d["name"] for d in params if d["required"]],
    }


def call_order(document: dict[str, Any]) -> list[dict[str, Any]]:
    """``initialize`` first, ``exit`` (it ends the server) last, the rest by name."""
    methods = {m["name"]: m for m in document["methods"]}
    middle = [name for name in methods if name not in ("initialize", "exit")]
    return [methods[name] for name in ["initialize", *middle, "exit"] if name in methods]


async def test_every_method_answers_as_the_document_says(tmp_path: Path) -> None:
    document = cli_document()
    errors = {
        f"#/components/errors/{n}": e["code"] for n, e in document["components"]["errors"].items()
    }
    notifications = {n["name"]: n for n in document["x-notifications"]}
    model = ScriptedModel([text_response(f"answer {n}") for n in range(8)])
    async with ScriptedResponsesServer(model) as http:
        argv = [PY, "-m", "codexcore", "serve", "--stdio"]
        server = await StdioServer.start(http.base_url, tmp_path, argv=argv)
        try:
            answered: list[tuple[str, int | None]] = []
            for rid, method in enumerate(call_order(document), start=1):
                params = minimal_params(method, document)
                await server.send(
                    {"jsonrpc": "2.0", "id": rid, "method": method["name"], "params": params}
                )
                while (message := await server.recv()) is not None and (
                    "id" not in message or "method" in message
                ):
                    if "id" in message:  # the runtime asks the UI (auth.logout's confirm)
                        no = {"jsonrpc": "2.0", "id": message["id"], "result": {"ok": False}}
                        await server.send(no)
                        continue
                    note = notifications[message["method"]]  # only declared notifications come
                    validates(as_object(note["params"]), message["params"], document)
                assert message is not None, f"{method['name']}: no answer{server.context()}"
                assert message["id"] == rid, message
                if "error" in message:
                    listed = {errors[e["$ref"]] for e in method["errors"]}
                    assert message["error"]["code"] in listed, (method["name"], message)
                else:
                    validates(method["result"]["schema"], message["result"], document)
                answered.append((method["name"], message.get("error", {}).get("code")))
            assert await server.wait_exit() == 0, server.context()
        finally:
            await server.kill()
    # The params schema is exact: the smallest params it allows are never refused as invalid
    # (a method may still refuse them for the server's state, as an unknown run_id).
    refused = [name for name, code in answered if code == -32602]
    assert refused == [], f"the document's params of {refused} allow what the server refuses"
    assert any(code is None for _, code in answered), answered


async def test_each_shape_of_a_method_is_answered_as_the_document_says(tmp_path: Path) -> None:
    """Each shape a method lists (``initialize``: seed 000's and seed 001's), smallest, is answered
    with a result the document's schema takes (each on a connection of its own: once each)."""
    document = cli_document()
    shaped = [m for m in document["methods"] if "x-params-shapes" in m]
    assert "initialize" in [m["name"] for m in shaped]
    argv = [PY, "-m", "codexcore", "serve", "--stdio"]
    for method in shaped:
        for number, shape in enumerate(method["x-params-shapes"]):
            server = await StdioServer.start(None, tmp_path, argv=argv)
            try:
                params = minimal(shape, document)
                await server.send(
                    {"jsonrpc": "2.0", "id": number, "method": method["name"], "params": params}
                )
                answer = await server.recv()
                assert answer is not None, server.context()
                assert "result" in answer, (params, answer)
                validates(method["result"]["schema"], answer["result"], document)
            finally:
                await server.kill()
