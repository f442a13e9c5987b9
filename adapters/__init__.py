"""Adapters that carry the Submission/Event queue pair across a boundary."""
