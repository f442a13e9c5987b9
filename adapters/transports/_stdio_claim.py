"""Taking fds 0 and 1 for a stdio protocol, with nothing else loaded.

Its own module so that ``codexcore acp``, which speaks through the ACP SDK's
streams, claims its stdio without importing the stdio server's host, dialect
and control modules (``adapters.stdio`` re-exports it).
"""

from __future__ import annotations

import os
import sys

__all__ = ["claim_stdio"]


def claim_stdio() -> tuple[int, int]:
    """Take fds 0 and 1 for the protocol; returns the private (input, output) fds.

    Afterwards fd 1 and ``sys.stdout`` go to stderr and fd 0 reads
    ``/dev/null``. Call it first thing, before anything can write to stdout.
    """
    protocol_in = os.dup(0)  # os.dup makes non-inheritable descriptors
    protocol_out = os.dup(1)
    os.dup2(2, 1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    sys.stdout.flush()  # anything buffered so far goes to fd 1, now stderr
    sys.stdout = sys.stderr
    return protocol_in, protocol_out
