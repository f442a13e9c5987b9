"""The environment the model's commands run with: this process's, minus secrets.

A command can print whatever it can read, and its output goes to the model,
into the session's rollout and onto every attached UI. So variables that
look like credentials (the provider's API key, a server token, cloud keys)
are left out, by name, as the Codex CLI does by default: any name containing
KEY, SECRET, TOKEN, PASSWORD or CREDENTIAL, in any case.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

SECRET_NAME = re.compile(r"KEY|SECRET|TOKEN|PASSWORD|PASSWD|CREDENTIAL", re.IGNORECASE)


def command_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """``environ`` (default: this process's) without the variables that look secret."""
    source = os.environ if environ is None else environ
    return {name: value for name, value in source.items() if not SECRET_NAME.search(name)}
