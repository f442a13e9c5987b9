"""The scripted model the examples talk to when they are not given ``--base-url``.

No key and no network: a real HTTP server on 127.0.0.1 answers the engine's
Responses-API requests from a script (see ``docs/testing.md``). The model
first asks to run a command that writes a file, so the approval policy
``untrusted`` makes the engine ask the UI; once the command has run, the
model's final message quotes what it printed.

Imported by ``ide_plugin.py`` and ``asyncio_embedding.py``. Run as a program
(``python examples/scripted_model.py``) it serves the script in the
background, prints its ``base_url`` on one line, and stops when its standard
input closes: ``ndjson_client.py`` starts it that way, so that the client
itself imports nothing from codexcore.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from codexcore.testing import (
    ScriptedModel,
    ScriptedResponse,
    ScriptedResponsesServer,
    shell_call,
    text_response,
)

SCRIPT = 'echo "hello from a real subprocess" > greeting.txt && cat greeting.txt && ls'
COMMAND = ["bash", "-c", SCRIPT]
PROMPT = "Leave a greeting in this folder and show me what is there."


def final_answer(body: dict[str, Any]) -> ScriptedResponse:
    """The second reply: quote the output of the command (or admit it did not run)."""
    outputs = [i["output"] for i in body["input"] if i.get("type") == "function_call_output"]
    try:
        result = json.loads(outputs[-1]) if outputs else {}
    except json.JSONDecodeError:  # a denial comes back as plain text
        result = {}
    if result.get("metadata", {}).get("exit_code") != 0:
        return text_response("Understood: I ran nothing.")
    return text_response(
        f"Done. The command printed:\n\n{result['output'].rstrip()}\n",
        chunks=6,
        reasoning="The command succeeded; report what it printed.",
    )


def demo_model() -> ScriptedModel:
    """A fresh script: one command (with a short message first), then the final answer."""
    return ScriptedModel(
        [
            shell_call(COMMAND, call_id="call_greeting", text="I'll write the file, then list."),
            final_answer,
        ]
    )


def main() -> int:
    with ScriptedResponsesServer(demo_model()) as server:
        print(server.base_url, flush=True)
        sys.stdin.read()  # serve until whoever started us closes our stdin
    return 0


if __name__ == "__main__":
    sys.exit(main())
