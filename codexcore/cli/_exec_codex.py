"""``codexcore exec``'s command line as the Codex CLI's: what OpenAI's TypeScript SDK
(``@openai/codex-sdk``) passes when it runs ``codex exec --experimental-json``.

The SDK runs ``exec --experimental-json [--config KEY=VALUE]... [--model M]
[--thread-source S] [--sandbox MODE] [--cd DIR] [--add-dir DIR]...
[--skip-git-repo-check] [--output-schema FILE] [--cyber-access-program P]
[resume THREAD_ID] [--image FILE]...`` with the prompt on stdin and the key in
``$CODEX_API_KEY``. Each is honoured as Codex honours it, or refused with a usage
error (exit 2) that names it: nothing is ignored silently.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from typing import Any

CODEX_KEY_VARIABLE = "CODEX_API_KEY"
"""Where the SDK puts its ``apiKey``; it wins over ``$OPENAI_API_KEY`` (as in Codex)."""

_NOT_HONOURED = {
    "thread_source": "--thread-source: codexcore records no thread source classification",
    "cyber_access_program": "--cyber-access-program: an experimental program of OpenAI's "
    "own provider, which codexcore does not request",
}


def add_codex_arguments(parser: argparse.ArgumentParser) -> None:
    """The Codex CLI's ``exec`` options that codexcore's own do not already cover."""
    out = parser.add_mutually_exclusive_group()
    out.add_argument(
        "--json",
        "--experimental-json",
        dest="thread_json",
        action="store_true",
        help="print Codex's thread events as JSON lines (what the Codex SDK reads)",
    )
    out.add_argument(
        "--events-json",
        dest="events_json",
        action="store_true",
        help="print codexcore's own events (the Submission/Event protocol) as JSON lines",
    )
    parser.add_argument(
        "-i",
        "--image",
        dest="images",
        metavar="FILE",
        action="append",
        default=[],
        help="attach an image file to the prompt (repeatable)",
    )
    parser.add_argument(
        "--add-dir",
        dest="add_dirs",
        metavar="DIR",
        action="append",
        default=[],
        help="another directory the model's commands may write (repeatable)",
    )
    parser.add_argument(
        "--skip-git-repo-check",
        action="store_true",
        help="accepted for Codex's command line: codexcore never requires a Git repository",
    )
    parser.add_argument("--thread-source", metavar="SOURCE", help=argparse.SUPPRESS)
    parser.add_argument("--cyber-access-program", metavar="PROGRAM", help=argparse.SUPPRESS)


def codex_usage_problem(args: argparse.Namespace) -> str | None:
    """What on the command line cannot be honoured (a usage error), or None.

    Also takes Codex's ``resume THREAD_ID [PROMPT]`` apart into ``args.resume`` and
    ``args.prompt``, and makes ``--add-dir`` and ``--image`` paths absolute.
    """
    for dest, why in _NOT_HONOURED.items():
        if getattr(args, dest, None) is not None:
            return f"{why} (leave it out)"
    words: list[str] = list(args.words)
    if words[:1] == ["resume"]:
        if len(words) < 2:
            return "resume takes the THREAD_ID that thread.started printed"
        if args.resume or args.fork:
            return "resume THREAD_ID and --resume/--fork exclude each other"
        args.resume, words = words[1], words[2:]
    if len(words) > 1:
        return f"one prompt only (quote it): got {len(words)} words, {words[:3]!r}"
    args.prompt = words[0] if words else None
    if args.prompt == "-":  # Codex's word for "read stdin"
        args.prompt = None
    base = args.cd or os.getcwd()
    args.add_dirs = [os.path.abspath(os.path.join(base, d)) for d in args.add_dirs]
    for folder in args.add_dirs:
        if not os.path.isdir(folder):
            return f"--add-dir {folder}: not a directory"
    args.images = [os.path.abspath(os.path.join(base, image)) for image in args.images]
    for image in args.images:
        if not os.path.isfile(image):
            return f"--image {image}: no such file"
    return None


def with_codex_overrides(
    args: argparse.Namespace, overrides: Mapping[str, Any], environ: Mapping[str, str]
) -> dict[str, Any]:
    """``overrides`` (the command line's settings: ``-c`` and the flags) with what these
    options add: ``--add-dir`` to the writable roots, ``$CODEX_API_KEY`` as the key.

    With Codex's thread events the approval policy is ``never`` unless the command
    line says otherwise, as in ``codex exec``: a program reading JSON lines has no
    one to ask.
    """
    merged = dict(overrides)
    if args.add_dirs:
        merged["writable_roots"] = [*merged.get("writable_roots", ()), *args.add_dirs]
    if environ.get(CODEX_KEY_VARIABLE) and "provider.api_key_env" not in merged:
        merged["provider.api_key_env"] = CODEX_KEY_VARIABLE
    if args.thread_json and "approval_policy" not in merged:
        merged["approval_policy"] = "never"
    return merged
