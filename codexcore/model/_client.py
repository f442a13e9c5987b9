"""Streaming client for the OpenAI Responses API, with retries."""

from __future__ import annotations

import asyncio
import os
import re
import ssl
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from contextlib import aclosing
from types import TracebackType
from typing import Any, Self, cast

import httpx
import orjson

from .._logging import get_logger
from ._errors import ModelError, RetryableError, credentials, redact
from ._events import Completed, OutputItemDone, RetryScheduled, StreamEvent
from ._idle import IdleTimer
from ._retry import RetryPolicy
from ._sse import SSEDecoder
from ._status import check_status
from ._wire import decode_data

__all__ = ["ModelClient", "displayed_url", "resolve_base_url"]

_log = get_logger(__name__)

DEFAULT_BASE_URL = "https://api.openai.com/v1"
_CONNECT_TIMEOUT = 10.0
_DRAIN_TIMEOUT = 1.0
_DEFAULT_RETRY = RetryPolicy()
_HTTPX_DEFAULT_TIMEOUT = httpx.Timeout(5.0)  # what an AsyncClient made without a timeout has


def resolve_base_url(base_url: str | None) -> str:
    """``base_url``, else ``$OPENAI_BASE_URL``, else the OpenAI API; no trailing slash."""
    return _base_url_and_origin(base_url)[0]


def displayed_url(url: str) -> str:
    """``url`` for a message: without a user:password or a query, which may hold a secret."""
    parsed = httpx.URL(url)
    if not (parsed.userinfo or parsed.query):
        return url
    return str(parsed.copy_with(username=None, password=None, query=None))


def _base_url_and_origin(base_url: str | None) -> tuple[str, str]:
    """The base URL and where it came from, in words for an error message ("" when given)."""
    if base_url:
        return base_url.rstrip("/"), ""
    if env := os.environ.get("OPENAI_BASE_URL"):
        return env.rstrip("/"), ", base_url from $OPENAI_BASE_URL"
    return DEFAULT_BASE_URL, ", the default base_url"


class ModelClient:
    """Streams Responses API replies as typed events, retrying transient failures.

    ``base_url`` defaults to ``$OPENAI_BASE_URL``, then to the OpenAI API;
    requests go to ``{base_url}/responses``. ``api_key`` defaults to
    ``$OPENAI_API_KEY``; without one no ``Authorization`` header is sent (local
    servers need none). ``headers`` are added to every request and win over
    the defaults. ``response_header_timeout`` is how long a request may wait
    for its response's headers (connecting and sending included), and
    ``stream_idle_timeout`` how long the streamed body may then stay silent,
    before the attempt counts as failed and is retried.

    The HTTP client is httpx's, with its own transport (httpcore) unless told
    otherwise, so what httpx users rely on holds: respx in its default mode,
    proxies from ``HTTPS_PROXY`` and friends, ``SSL_CERT_FILE``. ``verify`` is
    httpx's: pass one ``ssl.SSLContext`` to many clients to load the CA
    bundle only once. ``transport`` replaces the transport, e.g. with
    ``httpx.MockTransport`` in tests.

    ``http_client`` is an ``httpx.AsyncClient`` of the caller's, used as it
    is: its transport, proxy, limits, event hooks, auth and headers (then
    ``transport`` and ``verify`` may not be given). As with the openai SDK,
    the caller closes it (``aclose()`` here leaves it open), requests still go
    to this client's ``{base_url}/responses`` (the client's own base_url is
    not used), and its timeout applies unless it is httpx's default (5 s),
    too short for a model that thinks: then the one described above does.
    The key's ``Authorization: Bearer`` header is sent only when the client
    carries no credentials of its own (an ``Authorization`` header or an
    ``auth``): a client made for a gateway never sends the OpenAI key there.

    One HTTP connection pool serves all requests; close it with ``aclose()``
    or by using the client as an async context manager.
    """

    __slots__ = (
        "_base_url",
        "_has_key",
        "_header_timeout",
        "_http",
        "_idle_timeout",
        "_owns_http",
        "_request_headers",
        "_request_timeout",
        "_retry",
        "_secrets",
        "_url",
        "_where",
    )

    def __init__(
        self,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        retry: RetryPolicy = _DEFAULT_RETRY,
        stream_idle_timeout: float = 300.0,
        response_header_timeout: float = 60.0,
        headers: Mapping[str, str] | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        verify: ssl.SSLContext | bool = True,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        if stream_idle_timeout <= 0:
            raise ValueError(f"stream_idle_timeout must be positive, not {stream_idle_timeout!r}")
        if response_header_timeout <= 0:
            raise ValueError(
                f"response_header_timeout must be positive, not {response_header_timeout!r}"
            )
        if http_client is not None and (transport is not None or verify is not True):
            raise ValueError("http_client brings its own transport and TLS: drop transport/verify")
        self._base_url, origin = _base_url_and_origin(base_url)
        self._url = f"{self._base_url}/responses"
        # What a refusal names: a 404 most often means a wrong base URL.
        self._where = f"POST {displayed_url(self._url)}{origin}"
        self._retry = retry
        self._idle_timeout = stream_idle_timeout
        self._header_timeout = response_header_timeout
        key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        self._has_key = bool(key)
        timeout = httpx.Timeout(stream_idle_timeout, connect=_CONNECT_TIMEOUT)
        ours = _request_headers(key, headers, http_client)
        # What a server may echo into a streamed error, to take out again.
        self._secrets = credentials(httpx.Headers(ours))
        self._owns_http = http_client is None
        if http_client is None:
            self._http = httpx.AsyncClient(
                headers=ours, timeout=timeout, transport=transport, verify=verify
            )
            self._request_headers: dict[str, str] | None = None
            self._request_timeout: Any = httpx.USE_CLIENT_DEFAULT
        else:
            # Per request: the caller's client keeps its own defaults for its other uses.
            self._http = http_client
            self._request_headers = ours
            unset = http_client.timeout == _HTTPX_DEFAULT_TIMEOUT
            self._request_timeout = timeout if unset else httpx.USE_CLIENT_DEFAULT

    def __repr__(self) -> str:
        key = "<set>" if self._has_key else None
        return f"ModelClient(base_url={self._base_url!r}, api_key={key})"

    @property
    def base_url(self) -> str:
        """The base URL requests go to (without a trailing slash)."""
        return self._base_url

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connection pool; the client is unusable afterwards.

        A caller's ``http_client`` is left open: its owner closes it.
        """
        if self._owns_http:
            await self._http.aclose()

    async def stream(self, request: Mapping[str, Any]) -> AsyncGenerator[StreamEvent, None]:
        """POST ``request`` (a Responses API body) and yield the reply's events.

        Adds ``"stream": true`` when the body lacks it. A successful stream
        ends with ``Completed``. Transient failures (connection errors, HTTP
        408/409/429 and the 5xx statuses that may pass, no response headers in
        time, a stream that stops early or stays idle, a transient
        ``response.failed`` or ``error`` event) yield ``RetryScheduled`` and
        start over. Raises ``ModelError`` when the request fails for good or
        the retries run out.

        The output items of ``response.completed`` are the truth about what
        the response holds: an item the stream never sent as
        ``response.output_item.done`` (a server that sends the answer only
        there) is yielded as ``OutputItemDone`` before ``Completed``.

        Stopping early releases the connection: cancel the consuming task or
        close the generator, best with ``contextlib.aclosing``.
        """
        body = _encode(request)
        retry = 0
        while True:
            try:
                # aclosing: leaving early must close the attempt, and with it the response.
                async with aclosing(self._attempt(body, retry + 1)) as events:
                    async for event in events:
                        yield event
                return
            except RetryableError as exc:
                _scrub(exc, self._secrets)
                failure = exc
            except ModelError as exc:
                _scrub(exc, self._secrets)
                raise
            retry += 1
            if retry >= self._retry.max_attempts:
                raise _exhausted(failure, retry) from failure
            delay = self._retry.delay(retry, retry_after=failure.retry_after)
            _log.debug("model.retry", attempt=retry, delay=delay, reason=failure.reason)
            yield RetryScheduled(retry, self._retry.max_attempts, delay, failure.reason)
            await asyncio.sleep(delay)

    async def _attempt(self, body: bytes, attempt: int) -> AsyncGenerator[StreamEvent, None]:
        """One HTTP request; failures worth retrying raise ``RetryableError``."""
        _log.debug("model.request", url=self._url, attempt=attempt)
        response = await self._send(body)
        try:
            await check_status(response, self._where)
            reader = _ResponseReader(response, self._idle_timeout)
            try:
                while (batch := await reader.next_batch()) is not None:
                    for event in batch:
                        yield event
            finally:
                await reader.aclose()
        except httpx.RequestError as exc:
            raise _transport_failure(exc) from exc
        finally:
            await response.aclose()
            _release(response)

    async def _send(self, body: bytes) -> httpx.Response:
        """The response, once its headers are in, within the header timeout.

        httpx's read timeout bounds every read alike. A reasoning model may
        leave its stream silent for minutes (the stream idle timeout's watch),
        but a server that never sends its headers should show in tens of
        seconds: so the headers get a bound of their own.
        """
        request = self._http.build_request(
            "POST",
            self._url,
            content=body,
            headers=self._request_headers,
            timeout=self._request_timeout,
        )
        try:
            async with asyncio.timeout(self._header_timeout) as deadline:
                return await self._http.send(request, stream=True)
        except TimeoutError:
            if not deadline.expired():
                raise
            raise RetryableError(
                f"no response headers within {self._header_timeout:g} s "
                f"from POST {displayed_url(self._url)}"
            ) from None
        except httpx.RequestError as exc:
            raise _transport_failure(exc) from exc


def _release(response: httpx.Response) -> None:
    """Break the cycle httpx makes (a response and its stream hold each other) once
    the response is closed, so it, its request and the request's body (a resent
    conversation: up to megabytes) go as soon as the attempt ends, not at the next
    full garbage collection: a long Task kept every body it sent until then."""
    response.stream = httpx.ByteStream(b"")


class _ResponseReader:
    """Turns one response body into batches of typed events.

    Waiting for a chunk is bounded by the idle timeout; the events are handed
    over outside that bound, so a slow consumer never trips it. After
    ``response.completed`` the rest of the body is drained (which keeps the
    connection reusable); the completed output items the stream did not send
    as ``output_item.done`` follow, and ``Completed`` comes last.
    """

    __slots__ = (
        "_chunks",
        "_completed",
        "_content_type",
        "_decoder",
        "_done",
        "_head",
        "_idle_timeout",
        "_streamed",
        "_waiter",
        "_watchdog",
    )

    def __init__(self, response: httpx.Response, idle_timeout: float) -> None:
        chunks = _body_chunks(response)
        self._chunks = cast(AsyncGenerator[bytes, None], chunks)
        self._idle_timeout = idle_timeout
        self._decoder = SSEDecoder()
        self._completed: Completed | None = None
        self._streamed: list[object] = []  # the id (or None) of each item the stream finished
        self._done = False
        self._content_type = response.headers.get("content-type")
        # What the body began with, kept until the first event: it names the
        # problem when the reply turns out to be no event stream at all.
        self._head: bytes | None = b""
        self._waiter: asyncio.Task[Any] | None = None  # the task waiting for a chunk
        self._watchdog = IdleTimer(idle_timeout, self._cancel_waiter)

    async def next_batch(self) -> list[StreamEvent] | None:
        """Events from the next chunk ([] is possible); None after the last batch."""
        if self._done:
            return None
        chunk = await self._next_chunk()
        if chunk is None:
            return self._finish()
        if self._completed is not None:
            return []
        return self._decode(chunk)

    async def aclose(self) -> None:
        self._watchdog.close()
        await self._chunks.aclose()

    async def _next_chunk(self) -> bytes | None:
        """The next chunk, or None at the end of the body (or any failure after completion)."""
        watchdog = self._watchdog
        if self._completed is not None:
            # Only the end of the body is awaited now: a server that leaves the
            # stream open must not hold the Turn for the idle timeout.
            watchdog.limit = min(_DRAIN_TIMEOUT, self._idle_timeout)
        self._waiter = asyncio.current_task()
        watchdog.begin()
        try:
            return await anext(self._chunks, None)
        except asyncio.CancelledError:
            if not watchdog.fired:
                raise
            asyncio.current_task().uncancel()  # type: ignore[union-attr]
            if self._completed is not None:
                return None
            raise RetryableError(f"stream idle: no data for {self._idle_timeout:g} s") from None
        except httpx.RequestError as exc:
            if self._completed is not None:
                return None
            raise _transport_failure(exc) from exc
        finally:
            watchdog.end()

    def _cancel_waiter(self) -> None:
        if self._waiter is not None:
            self._waiter.cancel()

    def _finish(self) -> list[StreamEvent]:
        self._done = True
        self._decoder.flush()
        if self._completed is None:
            if self._head and not _SSE_START.match(self._head):
                raise _not_an_event_stream(self._content_type, self._head)
            raise RetryableError("stream closed before response.completed")
        _log.debug("model.completed", response_id=self._completed.response_id)
        return [*_unstreamed(self._completed.output, self._streamed), self._completed]

    def _decode(self, chunk: bytes) -> list[StreamEvent]:
        events: list[StreamEvent] = []
        decoded = self._decoder.feed_raw(chunk)
        if self._head is not None:
            self._head = None if decoded else (self._head + chunk)[:_HEAD_LIMIT]
        for kind, data in decoded:
            event = decode_data(kind, data)
            if event is None:
                continue
            if isinstance(event, Completed):
                self._completed = event
                break
            if type(event) is OutputItemDone:
                self._streamed.append(event.item.get("id"))
            events.append(event)
        return events


def _unstreamed(output: tuple[dict[str, Any], ...], streamed: list[object]) -> list[StreamEvent]:
    """The completed output items the stream never finished, as ``OutputItemDone``.

    An item is matched by its id; one without an id by its place (the stream
    finished an item without an id at the same index).
    """
    ids = {item_id for item_id in streamed if item_id is not None}
    missing: list[StreamEvent] = []
    for index, item in enumerate(output):
        item_id = item.get("id")
        if item_id in ids:
            continue
        if item_id is None and index < len(streamed) and streamed[index] is None:
            continue
        missing.append(OutputItemDone(item))
    return missing


_HEAD_LIMIT = 200
_SSE_START = re.compile(rb"(?:\xef\xbb\xbf)?\s*(?:event|data|id|retry)?:")
"""How an event stream begins: a field (or a comment) on its first non-blank line."""


def _not_an_event_stream(content_type: str | None, head: bytes) -> ModelError:
    """A 2xx reply that is no event stream (an HTML page, a JSON body, noise): the base
    URL most likely points at something else, so asking again would not help."""
    text = head.decode("utf-8", "replace")
    return ModelError(
        f"the reply is not an event stream (content-type: {content_type or 'none'}); "
        f"it began: {text!r}",
        code="bad_response",
    )


def _body_chunks(response: httpx.Response) -> AsyncIterator[bytes]:
    """The body's decoded bytes, by the cheapest way this response allows.

    An SSE body is rarely content-encoded; without an encoding, the raw chunks
    skip httpx's decoder layer (one generator step per chunk). A body already
    read (a response made with ``content=``, as mocks make them) has no raw
    stream left to give, but ``aiter_bytes`` hands over what was read.
    """
    encoded = response.headers.get("content-encoding", "identity") != "identity"
    if encoded or response.is_stream_consumed:
        return response.aiter_bytes()
    return response.aiter_raw()


def _request_headers(
    key: str | None, extra: Mapping[str, str] | None, http_client: httpx.AsyncClient | None
) -> dict[str, str]:
    """What every model request carries; the key goes only where no other credentials are.

    The key ends up in these headers alone, which repr and logs never show.
    """
    headers = {"Accept": "text/event-stream", "Content-Type": "application/json"}
    theirs = http_client is not None and (
        http_client.auth is not None or "authorization" in http_client.headers
    )
    if key and not theirs:
        headers["Authorization"] = f"Bearer {key}"
    headers.update(extra or {})
    return headers


def _encode(request: Mapping[str, Any]) -> bytes:
    body = dict(request)
    if body.setdefault("stream", True) is not True:
        raise ValueError(
            "ModelClient.stream sends streaming requests only; drop 'stream' or set it true"
        )
    return orjson.dumps(body)


def _scrub(exc: ModelError | RetryableError, secrets: tuple[str, ...]) -> None:
    """Take the request's own credential out of an error's text, wherever it came
    from: a streamed ``error`` event may echo a key that looks like no key."""
    if isinstance(exc, ModelError):
        exc.message = redact(exc.message, secrets)
        exc.args = (exc.message,)
    else:
        exc.reason = redact(exc.reason, secrets)
        exc.args = (exc.reason,)


def _transport_failure(exc: httpx.RequestError) -> RetryableError | ModelError:
    detail = str(exc) or type(exc).__name__
    if isinstance(exc, httpx.UnsupportedProtocol | httpx.LocalProtocolError):
        return ModelError(f"cannot send the request: {detail}", code="transport_error")
    if isinstance(exc, httpx.ReadTimeout):
        return RetryableError("stream idle: the read timed out")
    if isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout):
        return RetryableError(f"could not connect: {detail}")
    return RetryableError(f"connection failed: {type(exc).__name__}: {detail}")


def _exhausted(failure: RetryableError, attempts: int) -> ModelError:
    times = "1 attempt" if attempts == 1 else f"{attempts} attempts"
    return ModelError(
        f"model request failed after {times}: {failure.reason}",
        code="retries_exhausted",
        status=failure.status,
        server_code=failure.server_code,
    )
