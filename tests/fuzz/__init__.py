"""The fuzz suite: every decoder that network or disk bytes reach (see docs/testing.md)."""
