"""The wire format: round trips, golden fixtures, schema, and clear errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import orjson
import pytest

from codexcore import protocol as p
from codexcore.protocol._codec import MAX_DEPTH
from codexcore.protocol._wire import CONNECTION_MSGS, EVENT_MSGS, OPS

from .protocol_samples import CONNECTION_MSGS as SAMPLE_CONNECTION_MSGS
from .protocol_samples import EVENT_MSGS as SAMPLE_EVENT_MSGS
from .protocol_samples import OPS as SAMPLE_OPS

GOLDEN = Path(__file__).parent / "golden"
SCHEMA_FILE = Path(__file__).parent.parent / "docs" / "protocol.schema.json"


def _tag(value: Any) -> str:
    return str(type(value).TYPE)


def test_every_variant_has_a_sample() -> None:
    assert sorted(map(_tag, SAMPLE_OPS)) == sorted(OPS.by_tag)
    assert sorted(map(_tag, SAMPLE_EVENT_MSGS)) == sorted(EVENT_MSGS.by_tag)
    assert sorted(map(_tag, SAMPLE_CONNECTION_MSGS)) == sorted(CONNECTION_MSGS.by_tag)


@pytest.mark.parametrize("op", SAMPLE_OPS, ids=_tag)
def test_submission_round_trip(op: Any) -> None:
    submission = p.Submission("sub-1", op)
    assert p.decode_submission(p.encode_submission(submission)) == submission


@pytest.mark.parametrize("msg", SAMPLE_EVENT_MSGS, ids=_tag)
def test_event_round_trip(msg: Any) -> None:
    event = p.Event("sub-1", 42, msg)
    assert p.decode_event(p.encode_event(event)) == event


def _golden(kind: str, tag: str) -> Any:
    return json.loads((GOLDEN / kind / f"{tag}.json").read_text())


@pytest.mark.parametrize("op", SAMPLE_OPS, ids=_tag)
def test_op_matches_golden_fixture(op: Any) -> None:
    """A renamed field or tag breaks the wire: the fixture catches it."""
    wire = _golden("ops", _tag(op))
    assert json.loads(p.encode_submission(p.Submission("sub-1", op))) == wire
    assert p.decode_submission(wire) == p.Submission("sub-1", op)


@pytest.mark.parametrize("msg", SAMPLE_EVENT_MSGS, ids=_tag)
def test_event_matches_golden_fixture(msg: Any) -> None:
    wire = _golden("events", _tag(msg))
    assert json.loads(p.encode_event(p.Event("sub-1", 42, msg))) == wire
    assert p.decode_event(wire) == p.Event("sub-1", 42, msg)


@pytest.mark.parametrize("msg", SAMPLE_CONNECTION_MSGS, ids=_tag)
def test_connection_msg_matches_golden_fixture(msg: Any) -> None:
    wire = _golden("handshake", _tag(msg))
    assert json.loads(p.encode_connection_msg(msg)) == wire
    assert p.decode_connection_msg(wire) == msg
    assert p.decode_server_message(p.encode_connection_msg(msg)) == msg


def test_server_lines_are_told_apart_by_their_keys() -> None:
    event = p.Event("s1", 3, p.TaskStarted())
    assert p.decode_server_message(p.encode_event(event)) == event
    assert isinstance(
        p.decode_server_message('{"type": "closing", "code": "x", "message": ""}'), p.Closing
    )


def test_hello_defaults_and_errors() -> None:
    hello = p.decode_hello(
        '{"type": "hello", "protocol_version": 1, "client": {"name": "a", "version": "1"}}'
    )
    assert hello == p.Hello(1, p.Peer("a", "1"))
    assert (hello.token, hello.session_id, hello.last_seq, hello.control) == (
        None,
        None,
        None,
        True,
    )
    with pytest.raises(p.ProtocolError, match="expected 'hello'"):
        p.decode_hello('{"type": "welcome"}')
    with pytest.raises(p.ProtocolError, match=r"hello\.client: missing required field"):
        p.decode_hello('{"type": "hello", "protocol_version": 1}')
    with pytest.raises(p.ProtocolError, match=r"hello\.last_seq: expected an integer"):
        p.decode_hello(
            '{"type": "hello", "protocol_version": 1, "client": {"name": "a", "version": "1"},'
            ' "last_seq": "5"}'
        )


def test_codex_wire_forms_for_shared_variants() -> None:
    """The examples from the issue, byte for byte: Codex UIs speak this already."""
    sub = p.decode_submission(
        '{"id":"s1","op":{"type":"user_input","items":[{"type":"text","text":"hi"}]}}'
    )
    assert sub == p.Submission("s1", p.UserInput((p.TextInput("hi"),)))
    event = p.Event("s1", 0, p.AgentMessage("..."))
    codex_form = '{"id":"s1","seq":0,"msg":{"type":"agent_message","message":"..."}}'
    assert p.decode_event(codex_form) == event
    # Issue 13 item 10 added the optional refusal marker; Codex UIs ignore a field
    # they do not know, so this is still their form.
    assert p.encode_event(event) == (
        b'{"id":"s1","seq":0,"msg":{"type":"agent_message","message":"...","refusal":false}}'
    )


def test_output_chunk_is_base64_on_the_wire() -> None:
    event = p.Event("s", 0, p.ExecCommandOutputDelta("c", "stderr", b"\x00\xffok"))
    assert json.loads(p.encode_event(event))["msg"]["chunk"] == "AP9vaw=="


def test_unknown_extra_fields_are_tolerated() -> None:
    sub = p.decode_submission(
        {"id": "s", "extra": 1, "op": {"type": "interrupt", "future_field": [1, 2]}}
    )
    assert sub == p.Submission("s", p.Interrupt())


@pytest.mark.parametrize(
    ("line", "sub_id", "message"),
    [
        ("{", "", "invalid JSON"),
        ("[1, 2]", "", "must be a JSON object, got an array"),
        ('"text"', "", "must be a JSON object, got a string"),
        ('{"op": {"type": "interrupt"}}', "", "id: missing required field"),
        ('{"id": 5, "op": {"type": "interrupt"}}', "", "id: expected a string"),
        ('{"id": "a"}', "a", "op: missing required field"),
        ('{"id": "a", "op": {}}', "a", "op.type: missing required field"),
        ('{"id": "a", "op": {"type": "dance"}}', "a", "unknown Op type 'dance'"),
        ('{"id": "a", "op": {"type": "user_input"}}', "a", "op.items: missing required field"),
        (
            '{"id": "a", "op": {"type": "user_input", "items": "hi"}}',
            "a",
            "op.items: expected an array, got a string",
        ),
        (
            '{"id": "a", "op": {"type": "user_input", "items": [{"type": "text", "text": 3}]}}',
            "a",
            "op.items[0].text: expected a string, got a number",
        ),
        (
            '{"id": "a", "op": {"type": "exec_approval", "id": "c", "decision": "yes"}}',
            "a",
            "op.decision: 'yes' is not one of approved",
        ),
        (
            '{"id": "a", "op": {"type": "configure_session", "sandbox_policy": {"type": "jail"}}}',
            "a",
            "op.sandbox_policy.type: 'jail' is not one of read-only",
        ),
        (
            '{"id": "a", "op": {"type": "configure_session", "sandbox_policy": '
            '{"network_access": 1}}}',
            "a",
            "op.sandbox_policy.network_access: expected a boolean, got a number",
        ),
    ],
)
def test_bad_submissions_name_the_problem(line: str, sub_id: str, message: str) -> None:
    with pytest.raises(p.ProtocolError) as info:
        p.decode_submission(line)
    assert message in info.value.message
    assert info.value.submission_id == sub_id


@pytest.mark.parametrize(
    ("msg", "message"),
    [
        (
            {"type": "apply_patch_approval_request", "call_id": "c", "changes": {"/a": {}}},
            "event.msg.changes./a.type: missing required field",
        ),
        (
            {
                "type": "apply_patch_approval_request",
                "call_id": "c",
                "changes": {"/a": {"type": "add", "content": "x"}, "/b": {"type": "add"}},
            },
            "event.msg.changes./b.content: missing required field",
        ),
        (
            {"type": "exec_command_output_delta", "call_id": "c", "stream": "stdout", "chunk": "%"},
            "event.msg.chunk: not valid base64",
        ),
        ({"type": "token_count", "input_tokens": True}, "event.msg.input_tokens: expected an"),
    ],
)
def test_bad_events_name_the_path_through_maps_and_bytes(
    msg: dict[str, object], message: str
) -> None:
    with pytest.raises(p.ProtocolError) as info:
        p.decode_event({"id": "t", "seq": 0, "msg": msg})
    assert message in info.value.message


def test_invalid_utf8_is_a_protocol_error() -> None:
    with pytest.raises(p.ProtocolError, match="invalid JSON"):
        p.decode_submission(b'{"id": "\xff"}')


def test_committed_schema_is_current() -> None:
    """docs/protocol.schema.json is generated; regenerate with `codexcore schema`."""
    committed = json.loads(SCHEMA_FILE.read_text())
    assert committed == json.loads(json.dumps(p.protocol_schema()))


def _validator(definition: str) -> jsonschema.Draft202012Validator:
    schema = {**p.protocol_schema(), "oneOf": None, "$ref": f"#/$defs/{definition}"}
    del schema["oneOf"]
    return jsonschema.Draft202012Validator(schema)


def test_schema_is_valid_draft_2020_12() -> None:
    jsonschema.Draft202012Validator.check_schema(p.protocol_schema())


@pytest.mark.parametrize("path", sorted(GOLDEN.glob("*/*.json")), ids=lambda f: f.stem)
def test_golden_fixtures_validate_against_schema(path: Path) -> None:
    definition = {"ops": "Submission", "events": "Event", "handshake": "ConnectionMsg"}[
        path.parent.name
    ]
    _validator(definition).validate(json.loads(path.read_text()))


def test_schema_rejects_what_the_decoder_rejects() -> None:
    bad = {"id": "a", "op": {"type": "exec_approval", "id": "c", "decision": "yes"}}
    assert not _validator("Submission").is_valid(bad)


def test_a_patch_request_without_resolved_paths_still_decodes() -> None:
    """resolved_paths was added to a published event: wire from before it decodes."""
    wire = _golden("events", "apply_patch_approval_request")
    del wire["msg"]["resolved_paths"]
    wire["msg"]["grant_root"] = "/srv"
    assert _validator("Event").is_valid(wire)
    msg = p.decode_event(wire).msg
    assert isinstance(msg, p.ApplyPatchApprovalRequest)
    assert msg.resolved_paths == {}
    assert msg.grant_root == "/srv"


def test_lines_from_before_the_new_optional_fields_still_decode() -> None:
    """Older peers send approvals without ``reason`` and read task_complete without
    ``stopped_by``: both default to null."""
    approval = {"id": "a1", "op": {"type": "exec_approval", "id": "c1", "decision": "denied"}}
    assert p.decode_submission(approval) == p.Submission("a1", p.ExecApproval("c1", "denied"))
    done = {"id": "t1", "seq": 3, "msg": {"type": "task_complete", "last_agent_message": "ok"}}
    assert p.decode_event(done).msg == p.TaskComplete("ok", None, None)


def _mcp_event_nested(depth: int) -> bytes:
    """An ``mcp_tool_call_begin`` event whose JSON nests ``depth`` containers deep in all:
    the event, its msg, the invocation, then arguments holding the rest."""
    arguments = b"[" * (depth - 3) + b"0" + b"]" * (depth - 3)
    return (
        b'{"id":"s","seq":1,"msg":{"type":"mcp_tool_call_begin","call_id":"c",'
        b'"invocation":{"server":"srv","tool":"t","arguments":' + arguments + b"}}}"
    )


def test_the_decoder_refuses_what_the_encoder_cannot_write() -> None:
    """One limit for both sides: an event the decoder accepts encodes back."""
    deepest: list[Any] = [0]
    for _ in range(MAX_DEPTH - 1):
        deepest = [deepest]
    orjson.dumps(deepest)  # the encoder's limit, exactly
    with pytest.raises(orjson.JSONEncodeError):
        orjson.dumps([deepest])

    event = p.decode_event(_mcp_event_nested(MAX_DEPTH))
    assert p.decode_event(p.encode_event(event)) == event
    for depth in (MAX_DEPTH + 1, 300):
        with pytest.raises(p.ProtocolError, match=f"nested more than {MAX_DEPTH} levels deep"):
            p.decode_event(_mcp_event_nested(depth))


def _user_input_with_schema_nested(depth: int) -> bytes:
    """A ``user_input`` whose output schema makes the whole line ``depth`` levels deep."""
    # The line's own levels: the submission, its op; the schema adds the rest.
    schema = b"[" * (depth - 2) + b"{}" + b"]" * (depth - 2)
    return b'{"id":"s","op":{"type":"user_input","items":[],"output_schema":' + schema + b"}}"


def test_a_submission_too_deep_to_write_back_is_refused() -> None:
    """The fuzz suite's find under the ci profile: an output schema nested 255+
    levels was accepted, and writing the Submission back then failed."""
    for depth in (MAX_DEPTH + 1, 300):
        with pytest.raises(p.ProtocolError, match=f"nested more than {MAX_DEPTH} levels deep"):
            p.decode_submission(_user_input_with_schema_nested(depth))
    ok = p.decode_submission(_user_input_with_schema_nested(MAX_DEPTH - 1))
    assert p.decode_submission(p.encode_submission(ok)) == ok
