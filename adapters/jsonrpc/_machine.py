"""JSON-RPC 2.0 over NDJSON: a pure state machine, no I/O (as h11 is for HTTP).

:class:`RpcMachine` is fed the lines a peer sent (``receive``) and returns
what happened, as a list of plain values for its runner to act on: a
:class:`Call` to handle (a request or a notification), an :class:`Answered`
reply to a request of ours, bytes to :class:`Send` at once (the error for a
bad frame), or bytes to send and then :class:`Close` (the peer broke the
handshake rule). The runner hands results back with :meth:`RpcMachine.reply`,
which returns the bytes to write (a batch is written whole, once its last
entry is answered). Every rule of the specification lives here, so it is
tested by pairing two machines, or a machine and plain bytes, with no network:

- a notification never gets a response, not even an error;
- a batch is answered by one array of the non-notification responses, by
  nothing when all were notifications; an empty batch is one -32600;
- ids (numbers or strings) are echoed exactly; a frame whose id cannot be
  read is answered with id ``null``;
- the peer's requests in flight are bounded (``max_pending``): beyond, -32004,
  except for the methods named ``exempt`` (``exit``: a client can always end);
- our own requests get string ids (the Codelia TUI only takes strings); a
  response naming an id we never sent, or no longer wait for, is ignored.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import attrs
import orjson

from codexcore.adapters.transports._framing import LineTooLong

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
TOO_MANY_REQUESTS = -32004
NOT_INITIALIZED = -32010
UNAUTHORIZED = -32011

Id = int | float | str | None
"""A request id as the peer wrote it (``None``: JSON ``null``)."""


class RpcError(Exception):
    """An error response: raise it from a method handler to answer with ``code``."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code, self.message, self.data = code, message, data

    def to_wire(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error


@attrs.frozen
class Call:
    """A request (``notification`` False: it must be answered) or a notification."""

    method: str
    params: dict[str, Any] | list[Any] | None
    id: Id = None
    notification: bool = False
    batch: int | None = None  # which batch of the machine it belongs to


@attrs.frozen
class Answered:
    """The peer's response to our request ``id``: ``result``, or ``error`` when it failed."""

    id: str
    result: Any = None
    error: RpcError | None = None


@attrs.frozen
class Send:
    """Bytes (whole lines) to write now."""

    data: bytes


@attrs.frozen
class Close:
    """Write ``data``, then close the connection: the peer broke the handshake rule."""

    data: bytes


@attrs.frozen
class Ignored:
    """Something the peer sent that gets no answer (worth a log line): ``why``."""

    why: str


Input = Call | Answered | Send | Close | Ignored


# --- encoding ---------------------------------------------------------------------------


def dumps(message: dict[str, Any] | list[Any]) -> bytes:
    """One NDJSON line. Integers beyond 64 bits (a peer's id may be one) take the slow path."""
    try:
        return orjson.dumps(message) + b"\n"
    except TypeError:
        return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


def response(id: Id, result: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id, "result": result}


def error_response(id: Id, error: RpcError) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id, "error": error.to_wire()}


def notification(method: str, params: Any) -> bytes:
    return dumps({"jsonrpc": "2.0", "method": method, "params": params})


# --- decoding ---------------------------------------------------------------------------

_EXACT_LIMIT = 2**63  # orjson reads a larger integer as a float: re-read such a frame exactly


def _load(line: bytes) -> Any:
    """The frame's JSON value; raises RpcError(PARSE_ERROR) naming the problem."""
    try:
        value = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        try:
            line.decode("utf-8")
        except UnicodeDecodeError as bad:
            message = f"Parse error: not valid UTF-8 (byte 0x{line[bad.start]:02x} at {bad.start})"
            raise RpcError(PARSE_ERROR, message) from None
        raise RpcError(PARSE_ERROR, f"Parse error: {exc}") from None
    if _has_inexact_id(value):
        value = json.loads(line)
    return value


def _has_inexact_id(value: Any) -> bool:
    if isinstance(value, dict):  # the common case, without building a list
        rid = value.get("id")
        return isinstance(rid, float) and abs(rid) >= _EXACT_LIMIT
    entries = value if isinstance(value, list) else [value]
    return any(
        isinstance(entry, dict)
        and isinstance(entry.get("id"), float)
        and abs(entry["id"]) >= _EXACT_LIMIT
        for entry in entries
    )


def _valid_id(value: Any) -> bool:
    return value is None or (isinstance(value, int | float | str) and not isinstance(value, bool))


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    return {str: "a string", list: "an array", type(None): "null"}.get(type(value), "a value")


def _invalid(message: str) -> RpcError:
    return RpcError(INVALID_REQUEST, f"Invalid Request: {message}")


def classify(entry: Any) -> Call | Answered | tuple[Id, RpcError] | Ignored:
    """One JSON value of a frame (or of a batch): what it is, or the error to answer with."""
    if not isinstance(entry, dict):
        return None, _invalid(f"expected an object, got {_kind(entry)}")
    has_id = "id" in entry
    rid = entry.get("id")
    if has_id and not _valid_id(rid):
        return None, _invalid(f"id must be a string, a number or null, not {_kind(rid)}")
    if entry.get("jsonrpc") != "2.0":
        return rid, _invalid('"jsonrpc" must be "2.0"')
    if "method" not in entry:
        if has_id and ("result" in entry) != ("error" in entry):
            return _answer(rid, entry)
        if has_id and ("result" in entry or "error" in entry):
            return Ignored(f"a response with both result and error (id {rid!r})")
        return rid, _invalid('"method" is missing')
    method = entry["method"]
    if not isinstance(method, str):
        return rid, _invalid(f'"method" must be a string, not {_kind(method)}')
    params = entry.get("params")
    if "params" in entry and not isinstance(params, dict | list):
        return rid, _invalid(f'"params" must be an object or an array, not {_kind(params)}')
    return Call(method, params, rid, notification=not has_id)


def _answer(rid: Id, entry: dict[str, Any]) -> Answered | Ignored:
    if not isinstance(rid, str):
        return Ignored(f"a response to id {rid!r}, which this server never sent")
    if "result" in entry:
        return Answered(rid, result=entry["result"])
    error = entry["error"]
    if not isinstance(error, dict):
        return Answered(rid, error=RpcError(INTERNAL_ERROR, f"malformed error: {error!r}"))
    code = error.get("code")
    return Answered(
        rid,
        error=RpcError(
            code if isinstance(code, int) else INTERNAL_ERROR,
            str(error.get("message", "")),
            error.get("data"),
        ),
    )


# --- the connection's state ---------------------------------------------------------------


class _Batch:
    """A batch's answers so far (each already encoded), and how many are still to come."""

    __slots__ = ("parts", "waiting")

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.waiting = 0

    def encode(self) -> bytes:
        return b"[" + b",".join(self.parts) + b"]\n"


class RpcMachine:
    """One JSON-RPC connection's state: requests in flight both ways, batches, the handshake.

    ``require_initialize``: nothing but an ``initialize`` request is accepted
    until :meth:`initialized` is called; anything else is answered with an
    error and :class:`Close` (the TCP rule). ``max_pending`` bounds the
    peer's calls in flight (requests and notifications not yet replied to);
    calls of the ``exempt`` methods are admitted beyond it (they still count).
    """

    def __init__(
        self,
        *,
        max_pending: int = 100,
        require_initialize: bool = False,
        exempt: frozenset[str] = frozenset(),
    ) -> None:
        if max_pending < 1:
            raise ValueError(f"max_pending must be positive, not {max_pending!r}")
        self.max_pending = max_pending
        self.exempt = exempt
        self.ready = not require_initialize
        self.pending = 0
        self.awaiting: dict[str, str] = {}  # our request ids -> their methods
        self._ids = itertools.count(1)
        self._batch_ids = itertools.count(1)
        self._batches: dict[int, _Batch] = {}

    # --- what the peer sent -------------------------------------------------------------

    def receive(self, item: bytes | LineTooLong) -> list[Input]:
        """What one line means. Blank lines mean nothing."""
        if isinstance(item, LineTooLong):
            error = _invalid(f"the line is longer than {item.limit} bytes and was discarded")
            return [self._refuse(None, error)]
        if not item or item.isspace():
            return []
        try:
            value = _load(item)
        except RpcError as error:
            return [self._refuse(None, error)]
        if not isinstance(value, list):
            return [self._one(value)]
        if not value:
            return [self._refuse(None, _invalid("an empty batch"))]
        if not self.ready:
            return [Close(dumps(error_response(None, self._gate_error("a batch"))))]
        return self._batch(value)

    def _one(self, value: Any) -> Input:
        kind = classify(value)
        if isinstance(kind, tuple):
            return self._refuse(*kind)
        if not self.ready and not (
            isinstance(kind, Call) and kind.method == "initialize" and not kind.notification
        ):
            what = f"{kind.method!r}" if isinstance(kind, Call) else "a response"
            rid = kind.id if isinstance(kind, Call) else None
            return Close(dumps(error_response(rid, self._gate_error(what))))
        if isinstance(kind, Call):
            return self._admit(kind)
        return self._answered(kind) if isinstance(kind, Answered) else kind

    def _batch(self, values: list[Any]) -> list[Input]:
        batch_id = next(self._batch_ids)
        batch = _Batch()
        out: list[Input] = []
        for value in values:
            kind = classify(value)
            if isinstance(kind, tuple):
                batch.parts.append(dumps(error_response(*kind))[:-1])
                continue
            if isinstance(kind, Call):
                full = self._full(kind)
                if full is None:
                    self.pending += 1
                    batch.waiting += not kind.notification
                    out.append(kind if kind.notification else attrs.evolve(kind, batch=batch_id))
                elif kind.notification:
                    out.append(Ignored(f"notification {kind.method!r} dropped: {full.message}"))
                else:  # over the bound: its error joins the batch's answer
                    batch.parts.append(dumps(error_response(kind.id, full))[:-1])
            else:
                out.append(self._answered(kind) if isinstance(kind, Answered) else kind)
        if batch.waiting:
            self._batches[batch_id] = batch
        elif batch.parts:
            out.append(Send(batch.encode()))
        return out

    def _admit(self, call: Call) -> Call | Send | Ignored:
        full = self._full(call)
        if full is None:
            self.pending += 1
            return call
        if call.notification:
            return Ignored(f"notification {call.method!r} dropped: {full.message}")
        return Send(dumps(error_response(call.id, full)))

    def _full(self, call: Call) -> RpcError | None:
        """The -32004 error when ``call`` would exceed the bound on calls in flight."""
        if self.pending < self.max_pending or call.method in self.exempt:
            return None
        return RpcError(
            TOO_MANY_REQUESTS,
            f"too many requests: {self.max_pending} already pending on this connection",
        )

    def _answered(self, answer: Answered) -> Answered | Ignored:
        if self.awaiting.pop(answer.id, None) is None:
            return Ignored(f"a response to id {answer.id!r}, which is not awaited")
        return answer

    def _refuse(self, rid: Id, error: RpcError) -> Send | Close:
        data = dumps(error_response(rid, error))
        return Send(data) if self.ready else Close(data)

    @staticmethod
    def _gate_error(what: str) -> RpcError:
        return RpcError(NOT_INITIALIZED, f"not initialized: {what} before initialize")

    def initialized(self) -> None:
        """The handshake succeeded: every method is accepted from now on."""
        self.ready = True

    # --- answering the peer -----------------------------------------------------------------

    def reply(self, call: Call, result: Any = None, error: RpcError | None = None) -> bytes:
        """The bytes that answer ``call`` (empty for a notification, or a batch not yet whole).

        Raises TypeError, changing nothing, when ``result`` is not JSON: the
        caller then replies again with an error.
        """
        message = response(call.id, result) if error is None else error_response(call.id, error)
        data = b"" if call.notification else dumps(message)
        self.pending -= 1
        if call.batch is None:
            return data
        batch = self._batches[call.batch]
        batch.parts.append(data[:-1])
        batch.waiting -= 1
        if batch.waiting:
            return b""
        del self._batches[call.batch]
        return batch.encode()

    # --- our own requests and notifications ---------------------------------------------

    def request(self, method: str, params: Any) -> tuple[str, bytes]:
        """A request of ours: its (string) id, and its line."""
        rid = str(next(self._ids))
        self.awaiting[rid] = method
        return rid, dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})

    def forget(self, rid: str) -> None:
        """We no longer wait for ``rid`` (timed out, cancelled): a late answer is ignored."""
        self.awaiting.pop(rid, None)

    def close(self) -> list[str]:
        """The connection is over: the ids of our requests that will never be answered."""
        lost = list(self.awaiting)
        self.awaiting.clear()
        return lost
