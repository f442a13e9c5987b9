"""codexcore: a Codex-style agent core, embedded in-process."""
