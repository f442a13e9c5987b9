"""The JSON-RPC dialect's method table: method name -> handler, with typed params.

A method is registered with the attrs class its params decode into
(:func:`decode_params`): a field missing without a default is -32602 naming
it, a field of the wrong type is -32602 naming its path, and fields the
class does not know are ignored (the seeds' params "allow future
expansion"). A field's wire name is its attrs name, or ``metadata={"wire":
"camelName"}`` for the seeds that speak camelCase.

``initialize`` is registered here, in both seeds' shapes; the capabilities it
announces are computed from the table, so each is true only when the method
behind it is registered. A method a seed names that nobody registered is
answered -32601 by the runner, never silently ignored.

The seeds' methods are registered by name (:class:`MethodGroup`, :data:`STANDARD_GROUPS`),
a group's module loaded at the first call of one of its methods.
"""

from __future__ import annotations

import functools
import importlib
import threading
import types
import typing
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Generic, TypeVar, Union

import attrs

from codexcore import __version__
from codexcore.protocol import to_wire

from ._machine import INVALID_PARAMS, INVALID_REQUEST, UNAUTHORIZED, RpcError
from ._schemas import INITIALIZE_RESULT, PROTOCOL_VERSION

if TYPE_CHECKING:
    from ._server import RpcContext

P = TypeVar("P")
Handler = Callable[["RpcContext", P], Awaitable[Any]]


SEED_METHODS: Mapping[str, tuple[str, ...]] = {
    "000": (
        "initialize",
        "run.start",
        "run.cancel",
        "session.list",
        "session.history",
        "auth.logout",
        "model.list",
        "model.set",
        "tool.call",
        "shell.exec",
        "mcp.list",
        "skills.list",
        "context.inspect",
        "theme.set",
        "ui.context.update",
    ),
    "001": ("initialize", "generate", "customize", "chat", "exit"),
    "004": (
        "get_status",
        "stop",
        "checkpoint",
        "inject_prompt",
        "set_interactive_mode",
        "write_pty",
        "subscribe",
        "unsubscribe",
    ),
}
"""Every method a UI sends to its runtime in each seed (and in the Codelia TUI's sources)."""

SERVER_CAPABILITIES: Mapping[str, str] = {
    "supports_run_cancel": "run.cancel",
    "supports_shell_exec": "shell.exec",
    "supports_mcp_list": "mcp.list",
    "supports_skills_list": "skills.list",
    "supports_context_inspect": "context.inspect",
    "supports_tool_call": "tool.call",
    "supports_theme_set": "theme.set",
}
"""Seed 000's capabilities that a method provides: true exactly when it is registered."""

SERVER_FEATURES = ("supports_ui_requests", "supports_permission_preflight_events")
"""Seed 000's capabilities no one method provides: true once :meth:`MethodTable.provide`
is called by what implements them (runtime-to-UI requests, preflight events)."""

CAPABILITIES_001: Mapping[str, str] = {
    "codeGeneration": "generate",
    "customization": "customize",
    "streaming": "chat",
}
"""The chat protocol's capabilities, each true exactly when its method is registered
(``streaming`` is also what the client says it takes: see ``chat._jobs``)."""


@attrs.frozen
class Method(Generic[P]):
    """A registered method and what the OpenRPC document (``schema --openrpc``) says of it."""

    name: str
    handler: Handler[P]
    params: type[P]
    summary: str = ""
    result: Mapping[str, Any] | None = None
    notifications: tuple[str, ...] = ()
    shapes: tuple[type, ...] = ()
    errors: tuple[int, ...] = ()


@attrs.frozen
class Outbound:
    """A message the runtime sends its client: a notification, or (``result`` set) a request."""

    name: str
    summary: str
    params: type | Mapping[str, Any]
    result: Mapping[str, Any] | None = None


@attrs.frozen
class MethodGroup:
    """Methods known by name up front, whose module is imported at the first call of one.

    ``register(table)`` imports the module and adds the methods to ``table``: exactly
    ``methods``, of which exactly ``unbounded`` with ``bounded=False``, and provides
    exactly ``features``. Those are what a connection needs before any call (the names
    and features for ``initialize``'s capabilities, the unbounded ones for the bound on
    calls in flight); the table checks them against what ``register`` really did when it
    runs it, so the lists cannot drift from the module unnoticed.
    """

    register: Callable[[MethodTable], None]
    methods: tuple[str, ...]
    unbounded: tuple[str, ...] = ()
    features: tuple[str, ...] = ()


class MethodTable:
    """What a JSON-RPC connection can be asked: ``name -> (handler, params class)``."""

    def __init__(self) -> None:
        self._methods: dict[str, Method[Any]] = {}
        self._names: set[str] = set()  # registered, and declared by a group not loaded yet
        self._groups: dict[str, MethodGroup] = {}  # a declared name -> its group, until loaded
        self._loading = threading.Lock()  # connections on several threads may share a table
        self._features: set[str] = set()
        self._unbounded: set[str] = set()
        self._inline: set[str] = set()
        self._outbound: dict[str, Outbound] = {}

    def add(
        self,
        name: str,
        handler: Handler[P],
        params: type[P],
        *,
        bounded: bool = True,
        inline: bool = False,
        summary: str = "",
        result: Mapping[str, Any] | None = None,
        notifications: tuple[str, ...] = (),
        shapes: tuple[type, ...] = (),
        errors: tuple[int, ...] = (),
    ) -> None:
        """Register ``handler(ctx, params)``; its result is the response's ``result``.

        ``params`` is an attrs class (decoded by :func:`decode_params`) or
        ``dict`` for the raw object. The handler raises :class:`RpcError` to
        answer with an error; any other exception is -32603. ``bounded``
        False admits the method's calls beyond the connection's bound on calls
        in flight (for a method that must always get through, as ``exit``).
        ``inline`` runs the handler in the connection's reader, before the next
        frame is read, rather than in a task of its own (one event-loop turn
        less to its answer): only for a handler that answers without waiting
        on the peer (never on a request to the client, nor on a later frame).

        The rest only describes the method in the OpenRPC document: ``summary``
        (one line), ``result`` (the JSON Schema of its result; none: ``{}``,
        anything), ``notifications`` (the names, declared with :meth:`sends`,
        of what it sends the client while it runs), ``shapes`` (the attrs classes
        of the shapes its params take, the first the main one: for ``dict`` params,
        or fields that depend on each other, as "``name``, unless ``reset``"),
        ``errors`` (the codes of :data:`~._errors.ERRORS` it raises itself,
        beyond those every method can answer).
        """
        if name in self._names:
            raise ValueError(f"method {name!r} is already registered")
        self._names.add(name)
        self._methods[name] = Method(
            name,
            handler,
            params,
            summary,
            result,
            tuple(notifications),
            tuple(shapes),
            tuple(errors),
        )
        if not bounded:
            self._unbounded.add(name)
        if inline:
            self._inline.add(name)

    def add_group(self, group: MethodGroup) -> None:
        """Register ``group``'s methods by name; its module is loaded when one of them is
        first looked up (:meth:`get`, :meth:`runs_inline`) or the whole table is read
        (:attr:`outbound`, :meth:`load_all`)."""
        if not group.methods:
            raise ValueError(f"{group.register.__qualname__}: a group names its methods")
        known = sorted(self._names.intersection(group.methods))
        if known:
            raise ValueError(f"methods {known} are already registered")
        for feature in group.features:
            self.provide(feature)
        self._unbounded.update(group.unbounded)
        self._names.update(group.methods)
        self._groups.update(dict.fromkeys(group.methods, group))

    def _load(self, group: MethodGroup) -> None:
        """Run ``group``'s ``register`` once, however many callers (threads) ask at once."""
        with self._loading:
            if group.methods[0] not in self._groups:
                return  # loaded while this caller waited
            loaded = MethodTable()
            group.register(loaded)
            loaded._check(group)
            clash = sorted(self._outbound.keys() & loaded._outbound.keys())
            if clash:
                raise ValueError(f"{clash} are already declared")
            # Everything is in place before the names leave _groups: a caller that finds
            # a name gone from there finds its method here (get reads without the lock).
            self._methods.update(loaded._methods)
            self._inline.update(loaded._inline)
            self._outbound.update(loaded._outbound)
            for name in group.methods:
                del self._groups[name]

    def _check(self, group: MethodGroup) -> None:
        """Raise when this table (what ``group.register`` added) is not what ``group`` says."""
        said = (sorted(group.methods), sorted(group.unbounded), sorted(group.features))
        did = (sorted(self._methods), sorted(self._unbounded), sorted(self._features))
        if said != did:
            raise RuntimeError(
                f"{group.register.__qualname__} registered (methods, unbounded, features) "
                f"{did}, but its MethodGroup declares {said}"
            )

    def load_all(self) -> None:
        """Load every group not loaded yet (for what describes the whole table)."""
        for group in dict.fromkeys(self._groups.values()):
            self._load(group)

    def sends(
        self,
        name: str,
        summary: str,
        params: type | Mapping[str, Any],
        result: Mapping[str, Any] | None = None,
    ) -> None:
        """Declare a message the runtime sends its client, for the OpenRPC document:
        a notification, or, with ``result`` (the schema of the client's answer), a
        request (as ``ui.confirm.request``). ``params`` is an attrs class, or the JSON
        Schema of an object (its ``properties`` become the params)."""
        if name in self._outbound:
            raise ValueError(f"{name!r} is already declared")
        self._outbound[name] = Outbound(name, summary, params, result)

    @property
    def outbound(self) -> list[Outbound]:
        """What :meth:`sends` declared, by name (every group is loaded for it)."""
        self.load_all()
        return [self._outbound[name] for name in sorted(self._outbound)]

    @property
    def unbounded(self) -> frozenset[str]:
        """The methods registered with ``bounded=False``."""
        return frozenset(self._unbounded)

    def provide(self, feature: str) -> None:
        """Announce one of :data:`SERVER_FEATURES` (its implementation is registered)."""
        if feature not in SERVER_FEATURES:
            raise ValueError(f"unknown feature {feature!r}; expected one of {SERVER_FEATURES}")
        self._features.add(feature)

    def get(self, name: str) -> Method[Any] | None:
        """``name``'s method (its group loaded first, if it was not), or None."""
        method = self._methods.get(name)
        if method is None and (group := self._groups.get(name)) is not None:
            self._load(group)
            method = self._methods.get(name)
        return method

    def runs_inline(self, name: str) -> bool:
        """Whether ``name`` was registered with ``inline=True`` (its group loaded first:
        the call asked about is about to run)."""
        group = self._groups.get(name)
        if group is not None:
            self._load(group)
        return name in self._inline

    def __contains__(self, name: object) -> bool:
        return name in self._names

    @property
    def names(self) -> list[str]:
        """Every method's name, loaded or not."""
        return sorted(self._names)

    def server_capabilities(self) -> dict[str, bool]:
        """Seed 000's ``server_capabilities``: honest, from what is registered."""
        found = {cap: method in self._names for cap, method in SERVER_CAPABILITIES.items()}
        return found | {feature: feature in self._features for feature in SERVER_FEATURES}

    def capabilities_001(self) -> dict[str, bool]:  # the chat protocol's
        return {cap: method in self._names for cap, method in CAPABILITIES_001.items()}


# --- params -------------------------------------------------------------------------------


def decode_params(cls: type[P], value: Any, path: str = "params") -> P:
    """``value`` (a request's params) as ``cls``; raises -32602 naming the field at fault."""
    if cls is dict:
        if value is None:
            return typing.cast(P, {})
        if not isinstance(value, dict):
            raise _bad(path, "expected an object (named parameters)")
        return typing.cast(P, value)
    return typing.cast(P, _decode_class(cls, {} if value is None else value, path))


def _bad(path: str, problem: str) -> RpcError:
    return RpcError(INVALID_PARAMS, f"Invalid params: {path}: {problem}")


Check = Callable[[Any, str], Any]
"""Checks a value against a field's type: the value to keep, or -32602 naming ``path``."""

_FieldPlan = tuple[str, str, bool, Check]  # name, wire name, required, check
_PLANS: dict[type[Any], tuple[_FieldPlan, ...]] = {}


def _plan(cls: type[Any]) -> tuple[_FieldPlan, ...]:
    """``cls``'s fields and a check for each, made once per class: resolving the
    annotations evaluates their source (``from __future__ import annotations``, about
    0.1 ms), and walking each type per request cost a run.start several microseconds."""
    plan = _PLANS.get(cls)
    if plan is None:
        hints = typing.get_type_hints(cls)
        plan = _PLANS[cls] = tuple(
            (
                field.name,
                field.metadata.get("wire", field.name),
                field.default is attrs.NOTHING,
                _check(hints[field.name]),
            )
            for field in attrs.fields(cls)
        )
    return plan


def _decode_class(cls: type[Any], value: Any, path: str) -> Any:
    if not isinstance(value, dict):
        raise _bad(path, "expected an object (named parameters)")
    kwargs: dict[str, Any] = {}
    for name, wire, required, check in _plan(cls):
        if wire in value:
            kwargs[name] = check(value[wire], f"{path}.{wire}")
        elif required:
            raise _bad(f"{path}.{wire}", "missing required field")
    return cls(**kwargs)


_SCALARS: dict[type, str] = {str: "a string", bool: "a boolean", int: "an integer"}


def _check(hint: Any) -> Check:
    """The check of a value against ``hint`` (what the params classes use)."""
    origin = typing.get_origin(hint)
    if hint is Any:
        return lambda value, path: value
    if origin in (Union, types.UnionType):
        options = typing.get_args(hint)
        (inner,) = [option for option in options if option is not type(None)]
        return _optional(_check(inner)) if type(None) in options else _check(inner)
    if origin is typing.Literal:
        return _literal(typing.get_args(hint))
    if hint is float:
        return _number
    if hint in _SCALARS:
        return _scalar(hint)
    if origin is dict or hint is dict:
        return _of_type(dict, "expected an object")
    if origin is list or hint is list:
        return _of_type(list, "expected an array")
    if attrs.has(hint):
        return functools.partial(_decode_class, hint)
    raise TypeError(f"params of type {hint!r} are not supported")


def _optional(check: Check) -> Check:
    def optional(value: Any, path: str) -> Any:
        return None if value is None else check(value, path)

    return optional


def _literal(allowed: tuple[Any, ...]) -> Check:
    def literal(value: Any, path: str) -> Any:
        if value not in allowed:
            raise _bad(path, f"expected one of {list(allowed)}, got {value!r}")
        return value

    return literal


def _number(value: Any, path: str) -> Any:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return value
    raise _bad(path, "expected a number")


def _scalar(kind: type) -> Check:
    def scalar(value: Any, path: str) -> Any:
        if isinstance(value, kind) and (kind is bool or not isinstance(value, bool)):
            return value
        raise _bad(path, f"expected {_SCALARS[kind]}")

    return scalar


def _of_type(kind: type, problem: str) -> Check:
    def of_type(value: Any, path: str) -> Any:
        if isinstance(value, kind):
            return value
        raise _bad(path, problem)

    return of_type


# --- initialize ---------------------------------------------------------------------------


@attrs.frozen
class Auth:
    token: str | None = None


@attrs.frozen
class ClientInfo:
    name: str
    version: str


@attrs.frozen
class Initialize000:
    """Seed 000: ``{protocol_version, client {name, version}, ui_capabilities?}``."""

    protocol_version: str
    client: ClientInfo
    ui_capabilities: dict[str, Any] | None = None
    auth: Auth | None = None


@attrs.frozen
class Initialize001:
    """Seed 001: ``{clientName, clientVersion, capabilities?}``."""

    client_name: str = attrs.field(metadata={"wire": "clientName"})
    client_version: str = attrs.field(metadata={"wire": "clientVersion"})
    capabilities: dict[str, Any] | None = None
    auth: Auth | None = None


async def initialize(ctx: RpcContext, params: dict[str, Any]) -> dict[str, Any]:
    """Both seeds' handshake, answered in the shape it was asked in. The token is checked
    before anything else is read: a client without it learns nothing (not even which
    fields are wrong); the runner closes a connection that must handshake after that."""
    auth = params.get("auth")
    token = auth.get("token") if isinstance(auth, dict) else None
    if ctx.require_token and not ctx.host.check_token(token if isinstance(token, str) else None):
        raise RpcError(UNAUTHORIZED, "unauthorized: the token is missing or wrong")
    if isinstance(token, str) and ctx.host.check_token(token):
        # Over TCP the handshake's token is the credential a control sender is bound to.
        ctx.credential = attrs.evolve(ctx.credential, token=token)
    if ctx.initialized:
        raise RpcError(INVALID_REQUEST, "Invalid Request: this connection is already initialized")
    table = ctx.methods
    if "clientName" in params:
        seed001 = decode_params(Initialize001, params)
        ctx.set_client(seed001.client_name, seed001.client_version, seed001.capabilities or {})
        capabilities_001 = table.capabilities_001()  # no stream to a client that takes none:
        capabilities_001["streaming"] &= ctx.client_capabilities.get("streaming") is not False
        return {
            "serverName": "codexcore",
            "serverVersion": __version__,
            "capabilities": capabilities_001,
        }
    seed000 = decode_params(Initialize000, params)
    ctx.set_client(seed000.client.name, seed000.client.version, seed000.ui_capabilities or {})
    capabilities: dict[str, Any] = table.server_capabilities()
    if "control.stdin" in table:
        capabilities["control_messages"] = to_wire(ctx.host.config.control.capabilities())
    result = {
        "protocol_version": PROTOCOL_VERSION,
        "server": {"name": "codexcore", "version": __version__},
        "server_capabilities": capabilities,
    }
    return result | {"tui": {"theme": ctx.host.tui_theme}} if ctx.host.tui_theme else result


# --- the seeds' methods, each group loaded at its first call --------------------------------


def _registered_by(module: str, function: str = "register") -> Callable[[MethodTable], None]:
    """``module.function(table)``, ``module`` imported only when this is called: the
    seeds' modules build on this one and on the server module, and a client's
    ``initialize`` needs none of them. Named after the module, for drift errors."""

    def register(table: MethodTable) -> None:
        getattr(importlib.import_module(module), function)(table)

    register.__qualname__ = register.__name__ = module.removeprefix("codexcore.adapters.")
    return register


STANDARD_GROUPS: tuple[MethodGroup, ...] = (
    MethodGroup(
        _registered_by("codexcore.adapters.jsonrpc.codelia._methods"),
        ("run.start", "run.cancel", "model.list", "model.set"),
        # The runtime-to-UI confirm and its preflight events, which the run flow implements.
        features=("supports_ui_requests", "supports_permission_preflight_events"),
    ),
    MethodGroup(
        _registered_by("codexcore.adapters.jsonrpc.chat._chat"),
        ("chat", "exit", "generate", "customize"),
        unbounded=("exit",),
    ),
    MethodGroup(
        _registered_by("codexcore.adapters.jsonrpc._cancel", "add_cancel_method"),
        ("$/cancelRequest",),
        unbounded=("$/cancelRequest",),
    ),
    MethodGroup(
        _registered_by("codexcore.adapters.jsonrpc.session_socket._methods", "add_control_methods"),
        SEED_METHODS["004"],  # every method of the Ralph-style session sockets
    ),
    MethodGroup(
        _registered_by("codexcore.adapters.jsonrpc.codelia._shell", "add_shell_methods"),
        ("shell.exec",),
    ),
    MethodGroup(
        _registered_by("codexcore.adapters.jsonrpc.codelia._sessions", "add_session_methods"),
        ("session.list", "session.history"),
    ),
    MethodGroup(
        _registered_by("codexcore.adapters.jsonrpc.codelia._context", "add_context_methods"),
        ("context.inspect", "ui.context.update", "tool.call"),
    ),
    MethodGroup(
        _registered_by("codexcore.adapters.control._jsonrpc", "add_control_message_methods"),
        ("control.stdin", "control.interrupt", "control.register"),
    ),
    MethodGroup(
        _registered_by("codexcore.adapters.jsonrpc.codelia._account", "add_account_methods"),
        ("auth.logout", "theme.set"),
    ),
    MethodGroup(
        _registered_by("codexcore.adapters.jsonrpc.codelia._mcp", "add_mcp_methods"), ("mcp.list",)
    ),
    MethodGroup(
        _registered_by("codexcore.adapters.jsonrpc.codelia._skills", "add_skills_methods"),
        ("skills.list",),
    ),
)
"""The seeds' methods every JSON-RPC connection is served, by name, one group a module."""


def standard_methods() -> MethodTable:
    """The table every JSON-RPC connection is served with: ``initialize``, and each of
    :data:`STANDARD_GROUPS` by name (its module is loaded at the first call of one)."""
    table = MethodTable()
    table.add(
        "initialize",
        initialize,
        dict,
        summary="The handshake, answered in the shape it was asked in (the Codelia runtime "
        "protocol's or the Copilot-CLI-style chat protocol's)",
        result=INITIALIZE_RESULT,
        shapes=(Initialize000, Initialize001),
        errors=(UNAUTHORIZED,),
    )
    for group in STANDARD_GROUPS:
        table.add_group(group)
    return table
