"""``codexcore schema``: print the protocol's JSON Schema."""

from __future__ import annotations

import argparse
import json
from typing import Any


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "schema",
        help="print the JSON Schema (draft 2020-12) of every Submission and Event",
        description="Print the JSON Schema (draft 2020-12) of the whole protocol.",
        epilog="example: codexcore schema > protocol.schema.json",
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..protocol import protocol_schema

    print(json.dumps(protocol_schema(), indent=2))
    return 0
