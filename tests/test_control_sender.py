"""The sending side of seed 003's control messages, in-process: retries reuse the request
id, oversize input goes by content_ref, and ``[control]`` in config.toml."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import pytest

from codexcore.adapters.control._sender import (
    ControlError,
    NoAck,
    SenderOptions,
    interrupt_envelope,
    send_control,
    stdin_envelope,
)
from codexcore.adapters.control._wire import ControlConfig, parse_request
from codexcore.cli._control import host_control_config
from codexcore.config import ConfigError, load_settings
from codexcore.protocol import ControlMessages

from .control_helpers import SENDER, TEAM

pytestmark = pytest.mark.anyio

OPTIONS = SenderOptions(team=TEAM, sender=SENDER, ack_timeout=0.2, backoff=0.01)


class Receiver:
    """A ``send`` that answers from a script: an ack, or None for no answer (a hang)."""

    def __init__(self, *answers: str | None) -> None:
        self.answers = list(answers)
        self.sent: list[dict[str, Any]] = []

    async def __call__(self, envelope: dict[str, Any]) -> dict[str, Any]:
        self.sent.append({**envelope, "meta": dict(envelope["meta"])})
        result = self.answers.pop(0)
        if result is None:
            import asyncio

            await asyncio.Event().wait()  # never answers: the sender's deadline ends it
        return {"request_id": envelope["request_id"], "result": result, "duplicate": False}


async def test_a_retry_reuses_the_request_id_and_counts_the_retries() -> None:
    receiver = Receiver(None, "ok")
    envelope = stdin_envelope(OPTIONS, "s1", "codexcore:a", "once")
    answer = await send_control(receiver, envelope, OPTIONS)
    assert answer["result"] == "ok"
    assert [sent["request_id"] for sent in receiver.sent] == [envelope["request_id"]] * 2
    assert [sent["meta"]["retry_count"] for sent in receiver.sent] == [0, 1]


async def test_busy_is_retried_but_rejected_is_final() -> None:
    busy_then_ok = Receiver("busy", "ok")
    assert (await send_control(busy_then_ok, interrupt_envelope(OPTIONS, "s", "a"), OPTIONS))[
        "result"
    ] == "ok"
    rejected = Receiver("rejected", "ok")
    answer = await send_control(rejected, interrupt_envelope(OPTIONS, "s", "a"), OPTIONS)
    assert answer["result"] == "rejected"
    assert len(rejected.sent) == 1


async def test_no_ack_at_all_raises_after_the_retries() -> None:
    receiver = Receiver(None, None, None)
    options = SenderOptions(team=TEAM, sender=SENDER, ack_timeout=0.05, retries=2, backoff=0)
    with pytest.raises(NoAck, match=r"no ack within 0\.05 s"):
        await send_control(receiver, interrupt_envelope(options, "s", "a"), options)
    assert len(receiver.sent) == 3


def test_oversize_input_is_written_to_the_share_and_sent_by_reference(tmp_path: Path) -> None:
    options = SenderOptions(team=TEAM, sender=SENDER, share_dir=str(tmp_path), hard_limit_bytes=100)
    text = "é" * 80  # 160 bytes: over the hard limit
    envelope = stdin_envelope(options, "s", "a", text)
    ref = envelope["content_ref"]
    assert "content" not in envelope
    path = Path(ref["path"])
    assert path.parent == tmp_path / TEAM / "input"
    assert path.read_bytes() == text.encode()
    assert (ref["size_bytes"], ref["sha256"]) == (160, hashlib.sha256(text.encode()).hexdigest())
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    assert envelope["meta"]["oversize_strategy"] == "content_ref"
    assert envelope["content_preview"] == text[:240]
    parsed = parse_request(envelope, ControlConfig(team=TEAM))  # what a receiver reads
    assert parsed.content_ref is not None  # type: ignore[union-attr]


def test_oversize_input_needs_a_share_and_a_receiver_that_takes_references(
    tmp_path: Path,
) -> None:
    options = SenderOptions(team=TEAM, sender=SENDER, hard_limit_bytes=10)
    with pytest.raises(ControlError, match="no share directory"):
        stdin_envelope(options, "s", "a", "x" * 11)
    no_refs = ControlMessages(1, True, True, False, 1024)
    shared = SenderOptions(team=TEAM, sender=SENDER, share_dir=str(tmp_path))
    with pytest.raises(ControlError, match="takes no content_ref"):
        stdin_envelope(shared, "s", "a", "x" * 2000, capabilities=no_refs)
    with pytest.raises(ControlError, match="empty payload"):
        stdin_envelope(shared, "s", "a", "")


def test_the_control_table_of_config_toml(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text(
        """
[control]
team = "atm-dev"
sender = "arch-ctm"
allowed_content_dirs = ["/srv/atm/share"]
ack_timeout = 1.5
[[control.senders]]
name = "arch-ctm"
team = "atm-dev"
uid = 1000
[[control.senders]]
name = "remote"
team = "atm-dev"
token_env = "REMOTE_TOKEN"
"""
    )
    control = load_settings(home=str(tmp_path), environ={}).settings.control
    assert (control.team, control.sender, control.ack_timeout) == ("atm-dev", "arch-ctm", 1.5)
    assert control.hard_limit_bytes == 1024 * 1024  # the seed's defaults
    assert (control.soft_limit_bytes, control.dedupe_ttl, control.max_age) == (65536, 600, 300)
    host = host_control_config(control, {"REMOTE_TOKEN": "t0k"})
    assert [(s.name, s.uid, s.token) for s in host.senders] == [
        ("arch-ctm", 1000, None),
        ("remote", None, "t0k"),
    ]
    assert host.allowed_content_dirs == ("/srv/atm/share",)
    assert "t0k" not in repr(host)


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ("[control]\nteam = 3", "control.team = 3: expected a non-empty string"),
        ('[control]\nwho = "x"', "unknown key 'control.who'"),
        ('[control]\nallowed_content_dirs = ["relative"]', "is not an absolute path"),
        ("[control]\nack_timeout = 0", "expected seconds > 0"),
        ('[[control.senders]]\nname = "a"\nteam = "t"', "give uid (stdio, Unix) or token_env"),
        ('[[control.senders]]\nname = "a"\nteam = "t"\ntoken = "s3cret"', "token is never written"),
    ],
)
def test_wrong_control_values_are_errors_naming_the_key(
    tmp_path: Path, table: str, message: str
) -> None:
    (tmp_path / "config.toml").write_text(table + "\n")
    with pytest.raises(ConfigError, match=r"config\.toml") as caught:
        load_settings(home=str(tmp_path), environ={})
    assert message in str(caught.value)
    assert "s3cret" not in str(caught.value)


def test_no_control_table_means_no_team() -> None:
    assert (
        load_settings(environ={"CODEXCORE_HOME": os.devnull + "-none"}).settings.control.team
        is None
    )
