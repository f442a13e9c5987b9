"""``codexcore schema``: print the protocol's JSON Schema, or (``--openrpc``) the
OpenRPC document of the JSON-RPC dialect."""

from __future__ import annotations

import argparse
import json
from typing import Any

from . import SUMMARIES


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "schema",
        help=SUMMARIES["schema"],
        description=(
            "Print the JSON Schema (draft 2020-12) of the whole native protocol, or with "
            "--openrpc the OpenRPC 1.3 document of the JSON-RPC dialect."
        ),
        epilog="example: codexcore schema > protocol.schema.json",
    )
    parser.add_argument(
        "--openrpc",
        action="store_true",
        help="print the OpenRPC document of the JSON-RPC dialect (every method, "
        "notification and error code) instead",
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.openrpc:
        # Only here: the dialect's methods live in the adapters, which plain `schema` never loads.
        from ..adapters.jsonrpc._openrpc import openrpc_document

        print(json.dumps(openrpc_document(), indent=2))
        return 0
    from ..protocol import protocol_schema

    print(json.dumps(protocol_schema(), indent=2))
    return 0
