"""A function's JSON Schema from its hints and docstring, and the model's arguments back.

Every strict schema is checked against what the Responses API's strict mode takes
(each object closed, every property required, no ``default``), and every schema
is a valid JSON Schema whose examples validate (jsonschema)."""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Sequence
from typing import Annotated, Any, Literal

import attrs
import jsonschema
import pytest

from codexcore import FunctionTool, function_tool
from codexcore.tools.function_schema import ArgumentError, SchemaError, function_schema


class Severity(enum.Enum):
    ERROR = "error"
    WARNING = "warning"


@attrs.define
class Position:
    """A place in a file.

    Attributes:
        line: 1-based line number.
        column: 0-based column.
    """

    line: int
    column: int = 0


@attrs.define
class Span:
    start: Position
    end: Annotated[Position | None, "where it ends, if anywhere"] = None


@dataclasses.dataclass
class Query:
    text: str
    limit: int = 10
    kinds: list[Literal["class", "function"]] = dataclasses.field(default_factory=list)


class Opaque:
    pass


@attrs.define
class Tree:
    children: list[Tree]


def assert_strict(schema: dict[str, Any]) -> None:
    """What the Responses API's strict mode demands of a function's parameters."""
    jsonschema.Draft202012Validator.check_schema(schema)
    if schema.get("type") == "object" or "properties" in schema:
        assert schema["additionalProperties"] is False, schema
        assert schema["required"] == list(schema["properties"]), schema
    assert "default" not in schema, schema
    for key in ("properties",):
        for sub in schema.get(key, {}).values():
            assert_strict(sub)
    for sub in schema.get("anyOf", ()):
        assert_strict(sub)
    if isinstance(schema.get("items"), dict):
        assert_strict(schema["items"])


def test_required_defaults_and_docstring_descriptions() -> None:
    def find(path: str, line: int, whole_word: bool = False) -> str:
        """Find a symbol in a file.

        More text about it.

        Args:
            path: The file, relative to the
                project's root.
            line (int): Where to start.
            whole_word: Match whole words only.

        Returns:
            What was found.
        """
        return path

    schema = function_schema(find)
    assert schema.name == "find"
    assert schema.description == "Find a symbol in a file.\n\nMore text about it."
    assert schema.strict
    props = schema.parameters["properties"]
    assert props["path"] == {
        "type": "string",
        "description": "The file, relative to the project's root.",
    }
    assert props["line"] == {"type": "integer", "description": "Where to start."}
    # Strict: every property required, a default made nullable (null: the default).
    assert props["whole_word"]["type"] == ["boolean", "null"]
    assert "(null: the default, False)" in props["whole_word"]["description"]
    assert schema.parameters["required"] == ["path", "line", "whole_word"]
    assert_strict(schema.parameters)


def test_non_strict_requires_only_what_has_no_default() -> None:
    def grep(pattern: str, flags: dict[str, bool], limit: int = 5) -> str:
        return pattern

    schema = function_schema(grep)  # a dict is an open object: strict cannot take it
    assert not schema.strict
    assert schema.parameters["required"] == ["pattern", "flags"]
    assert schema.parameters["properties"]["limit"] == {"type": "integer", "default": 5}
    with pytest.raises(SchemaError, match="strict mode cannot take an open object"):
        function_schema(grep, strict=True)


def test_enums_literals_optionals_and_sphinx_params() -> None:
    def report(
        severity: Severity,
        kind: Literal["lint", "type"],
        code: Literal[1, 2, 3] | None,
        note: Annotated[str | None, "a note for the user"] = None,
    ) -> None:
        """Report a diagnostic.

        :param severity: How bad it is.
        """

    schema = function_schema(report)
    props = schema.parameters["properties"]
    assert props["severity"] == {
        "type": "string",
        "enum": ["error", "warning"],
        "description": "How bad it is.",
    }
    assert props["kind"] == {"type": "string", "enum": ["lint", "type"]}
    assert props["code"] == {"type": ["integer", "null"], "enum": [1, 2, 3, None]}
    assert props["note"] == {"type": ["string", "null"], "description": "a note for the user"}
    assert schema.description == "Report a diagnostic."
    assert_strict(schema.parameters)
    validator = jsonschema.Draft202012Validator(schema.parameters)
    assert validator.is_valid({"severity": "error", "kind": "lint", "code": None, "note": None})
    assert not validator.is_valid({"severity": "fatal", "kind": "lint", "code": 1, "note": None})


def test_nested_attrs_and_dataclass_classes_become_closed_objects() -> None:
    def select(span: Span, query: Query) -> None:
        pass

    schema = function_schema(select)
    assert schema.strict
    span = schema.parameters["properties"]["span"]
    assert span["type"] == "object"
    assert span["additionalProperties"] is False
    start = span["properties"]["start"]
    assert start["description"] == "A place in a file."
    assert start["properties"]["line"] == {"type": "integer", "description": "1-based line number."}
    end = span["properties"]["end"]
    assert end["description"] == "where it ends, if anywhere"
    assert {"type": "null"} in end["anyOf"]
    kinds = schema.parameters["properties"]["query"]["properties"]["kinds"]
    assert kinds["anyOf"][0]["items"] == {"type": "string", "enum": ["class", "function"]}
    assert_strict(schema.parameters)


def test_arguments_become_the_hinted_values() -> None:
    seen: list[Any] = []

    @function_tool
    def select(span: Span, query: Query, severity: Severity = Severity.ERROR) -> None:
        seen.append((span, query, severity))

    args, kwargs = select.bind(
        {
            "span": {"start": {"line": 3, "column": None}, "end": None},
            "query": {"text": "foo", "limit": None, "kinds": ["class"]},
            "severity": "warning",
        }
    )
    select(*args, **kwargs)
    assert seen == [
        (Span(Position(3, 0), None), Query("foo", 10, ["class"]), Severity.WARNING),
    ]
    # null for a parameter with a default means the default.
    assert (
        select.bind(
            {
                "span": {"start": {"line": 1, "column": 2}, "end": None},
                "query": {"text": "x", "limit": 1, "kinds": []},
                "severity": None,
            }
        )[1].get("severity")
        is None
    )


def test_bad_arguments_name_the_problem() -> None:
    @function_tool
    def go(line: int, where: Position, mode: Severity = Severity.ERROR) -> None:
        pass

    with pytest.raises(ArgumentError, match="missing required argument 'line'"):
        go.bind({"where": {"line": 1, "column": 0}})
    with pytest.raises(ArgumentError, match="unknown argument"):
        go.bind({"line": 1, "where": {"line": 1, "column": 0}, "colour": "red"})
    with pytest.raises(ArgumentError, match="argument 'mode'"):
        go.bind({"line": 1, "where": {"line": 1, "column": 0}, "mode": "fatal"})
    with pytest.raises(ArgumentError, match="Position has no field"):
        go.bind({"line": 1, "where": {"row": 1}})


def test_sequences_tuples_and_unions() -> None:
    def f(names: Sequence[str], pair: tuple[int, ...], either: int | str, xs: set[int]) -> None:
        pass

    schema = function_schema(f)
    props = schema.parameters["properties"]
    assert props["names"] == {"type": "array", "items": {"type": "string"}}
    assert props["either"] == {"anyOf": [{"type": "integer"}, {"type": "string"}]}
    tool = FunctionTool.of(f)
    _, kwargs = tool.bind({"names": ["a"], "pair": [1, 2], "either": "x", "xs": [1, 1]})
    assert kwargs == {"names": ["a"], "pair": (1, 2), "either": "x", "xs": {1}}


def test_what_cannot_be_described_is_refused_naming_it() -> None:
    def star(*paths: str) -> None:
        pass

    with pytest.raises(SchemaError, match=r"\*paths"):
        function_schema(star)

    def opaque(thing: Opaque) -> None:
        pass

    with pytest.raises(SchemaError, match=r"opaque\.thing: cannot describe the type"):
        function_schema(opaque)

    def tree(root: Tree) -> None:
        pass

    with pytest.raises(SchemaError, match="contains itself"):
        function_schema(tree)


def test_explicit_name_description_and_schema() -> None:
    def raw(**kwargs: Any) -> str:
        return str(kwargs)

    params = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
    tool = FunctionTool.of(raw, name="search_docs", description="Search.", parameters=params)
    assert tool.spec == {
        "type": "function",
        "name": "search_docs",
        "description": "Search.",
        "strict": False,
        "parameters": params,
    }
    assert tool.bind({"q": "x"}) == ([], {"q": "x"})
    with pytest.raises(ValueError, match="1 to 64 letters"):
        FunctionTool.of(raw, name="has space", parameters=params)


def test_async_and_sync_are_told_apart() -> None:
    async def later() -> str:
        return "x"

    def now() -> str:
        return "y"

    assert function_tool(later).is_async
    assert not function_tool(now).is_async
    assert function_tool(needs_approval=True)(now).needs_approval
