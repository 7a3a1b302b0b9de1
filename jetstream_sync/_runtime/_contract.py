"""The nats-py contract: every nats-py member the adapter relies on beyond its documented API, checked by a test.

Part of the nats-py adapter (with ``_nats.py``, ``_transports.py``, ``_parser.py`` and ``_translate.py``).
`NATS_PY_CONTRACT` lists the private members the adapter uses and the public ones whose signature it
depends on; `contract_problems` says what the installed nats-py lacks of it, so that a nats-py release
that breaks one fails loudly in CI (``tests/unit/runtime/test_nats_contract.py``, also run against the lowest
nats-py pyproject.toml allows) rather than deep in the IO thread.
"""

from __future__ import annotations

import asyncio
import importlib.util
import inspect
from collections.abc import Callable
from typing import Literal
from urllib.parse import urlparse

import attrs
import nats.aio.client
import nats.aio.subscription
import nats.aio.transport
import nats.protocol.parser

__all__ = ["CONNECTED", "NATS_PY_CONTRACT", "ContractMember", "contract_problems"]

Owner = Literal["Client", "Subscription", "TcpTransport", "WebSocketTransport", "Parser", "Srv"]


@attrs.frozen
class ContractMember:
    """One nats-py member we rely on: where it lives, what kind it is, and the parameters we pass to it."""

    owner: Owner
    name: str
    kind: Literal["method", "property", "instance"]  # instance: an attribute set by __init__ (or a class constant)
    params: tuple[str, ...] = ()


_CONNECT_KEYWORDS = (
    "servers",
    "name",
    "connect_timeout",
    "allow_reconnect",
    "max_reconnect_attempts",
    "reconnect_time_wait",
    "ping_interval",
    "max_outstanding_pings",
    "pending_size",
    "inbox_prefix",
    "no_echo",
    "error_cb",
    "disconnected_cb",
    "reconnected_cb",
    "closed_cb",
    "discovered_server_cb",
    "dont_randomize",
    "user",
    "password",
    "token",
    "user_credentials",
    "nkeys_seed",
    "nkeys_seed_str",
    "tls",
    "tls_hostname",
    "tls_handshake_first",
    "ws_connection_headers",
)

#: Every nats-py member the adapter uses beyond its documented public API, and the public ones whose
#: signature it depends on. Checked by `contract_problems` (tests/unit/runtime/test_nats_contract.py).
#: nats-py's ``_status`` (a contract member) while connected: the outbound queue compares it first on every
#: publish, because ``is_connected`` is two properties deep (a twelfth of a 128 B publish, measured)
CONNECTED: int = nats.aio.client.Client.CONNECTED

NATS_PY_CONTRACT: tuple[ContractMember, ...] = (
    ContractMember("Client", "connect", "method", _CONNECT_KEYWORDS),
    ContractMember("Client", "subscribe", "method", ("subject", "queue")),
    ContractMember("Client", "close", "method"),
    ContractMember("Client", "is_connected", "property"),
    ContractMember("Client", "is_closed", "property"),
    ContractMember("Client", "is_reconnecting", "property"),
    ContractMember("Client", "connected_url", "property"),
    ContractMember("Client", "servers", "property"),
    ContractMember("Client", "_process_msg", "method", ("sid", "subject", "reply", "data", "headers")),
    ContractMember("Client", "_process_err", "method", ("err_msg",)),
    ContractMember("Client", "_process_info", "method", ("info", "initial_connection")),
    ContractMember("Client", "_process_ping", "method"),
    ContractMember("Client", "_process_pong", "method"),
    ContractMember("Client", "_read_loop", "method"),
    ContractMember("Client", "_process_op_err", "method", ("e",)),
    ContractMember("Client", "_close", "method", ("status", "do_cbs")),
    ContractMember("Client", "_send_ping", "method", ("future",)),
    ContractMember("Client", "_connect_to_server", "method", ("s",)),
    ContractMember("Client", "_setup_server_pool", "method", ("connect_url",)),
    ContractMember("Client", "_error_cb", "instance"),
    ContractMember("Client", "_reading_task", "instance"),
    ContractMember("Client", "_reconnection_task", "instance"),
    ContractMember("Client", "_status", "instance"),
    ContractMember("Client", "RECONNECTING", "instance"),
    ContractMember("Client", "_pongs", "instance"),
    ContractMember("Client", "_server_pool", "instance"),
    ContractMember("Client", "_attempt_reconnect", "method"),
    ContractMember("Client", "is_draining", "property"),
    ContractMember("Client", "_pongs_received", "instance"),
    ContractMember("Client", "_pings_outstanding", "instance"),
    ContractMember("Client", "_ps", "instance"),
    ContractMember("Parser", "reset", "method"),
    ContractMember("Parser", "parse", "method", ("data",)),
    ContractMember("Client", "_connect_command", "method"),
    ContractMember("Client", "stats", "instance"),
    ContractMember("Client", "options", "instance"),
    ContractMember("Client", "_server_info", "instance"),
    ContractMember("Client", "_current_server", "instance"),
    ContractMember("Client", "_max_payload", "instance"),
    ContractMember("Client", "_transport", "instance"),
    ContractMember("Client", "_pending", "instance"),
    ContractMember("Client", "_pending_data_size", "instance"),
    ContractMember("Client", "_flush_queue", "instance"),
    ContractMember("Srv", "uri", "instance"),
    ContractMember("Srv", "reconnects", "instance"),
    ContractMember("Srv", "last_attempt", "instance"),
    ContractMember("Subscription", "unsubscribe", "method"),
    ContractMember("Subscription", "_id", "instance"),
    ContractMember("TcpTransport", "_io_writer", "instance"),
    ContractMember("TcpTransport", "_io_reader", "instance"),
    ContractMember("TcpTransport", "_bare_io_reader", "instance"),
    ContractMember("TcpTransport", "_bare_io_writer", "instance"),
    ContractMember("TcpTransport", "connect", "method", ("uri", "buffer_size", "connect_timeout")),
    ContractMember("TcpTransport", "connect_tls", "method", ("uri", "ssl_context", "buffer_size", "connect_timeout")),
    ContractMember("TcpTransport", "write", "method", ("payload",)),
    ContractMember("TcpTransport", "writelines", "method", ("payload",)),
    ContractMember("TcpTransport", "close", "method"),
    ContractMember("WebSocketTransport", "__init__", "method", ("ws_headers",)),
    ContractMember("WebSocketTransport", "write", "method", ("payload",)),
    ContractMember("WebSocketTransport", "writelines", "method", ("payload",)),
    ContractMember("WebSocketTransport", "_get_custom_headers", "method"),
    ContractMember("WebSocketTransport", "_ws", "instance"),
    ContractMember("WebSocketTransport", "_client", "instance"),
    ContractMember("WebSocketTransport", "_using_tls", "instance"),
)


def _owners() -> dict[str, tuple[type, Callable[[], object | None]]]:
    """The nats-py classes, looked up now (so a monkeypatched module is seen), with a way to make an instance
    (which may make None: then only the class's members are checked)."""
    client_cls = nats.aio.client.Client
    sub_cls = nats.aio.subscription.Subscription
    transport_cls = nats.aio.transport.TcpTransport
    parser_cls = nats.protocol.parser.Parser
    srv_cls = nats.aio.client.Srv
    return {
        "Parser": (parser_cls, parser_cls),
        "Client": (client_cls, client_cls),
        "Subscription": (sub_cls, lambda: sub_cls(client_cls(), 1, "contract.check")),
        "TcpTransport": (transport_cls, transport_cls),
        "WebSocketTransport": (nats.aio.transport.WebSocketTransport, _websocket_transport),
        "Srv": (srv_cls, lambda: srv_cls(urlparse("nats://127.0.0.1:4222"))),
    }


def _websocket_transport() -> object | None:
    """A websocket transport made (and its aiohttp session closed) on a loop of its own; None without aiohttp,
    where websockets are not offered (ConnectOptions refuses ws:// URLs)."""
    if importlib.util.find_spec("aiohttp") is None:
        return None

    async def make() -> object:
        transport = nats.aio.transport.WebSocketTransport()
        await transport._client.close()
        return transport

    return asyncio.run(make())


def contract_problems() -> list[str]:
    """What the installed nats-py lacks of `NATS_PY_CONTRACT`; empty when everything is there."""
    problems: list[str] = []
    instances: dict[str, object] = {}
    for owner_name, (_cls, make) in _owners().items():
        try:
            instance = make()
            if instance is not None:
                instances[owner_name] = instance
        except Exception as exc:  # a changed constructor is itself a broken contract
            problems.append(f"nats-py {owner_name}() cannot be constructed as before: {exc!r}")
    for member in NATS_PY_CONTRACT:
        cls = _owners()[member.owner][0]
        where = f"nats-py {member.owner}.{member.name}"
        if member.kind == "instance":
            instance = instances.get(member.owner)
            if instance is not None and not hasattr(instance, member.name):
                problems.append(f"{where}: no longer set by __init__")
            continue
        value = inspect.getattr_static(cls, member.name, None)
        if value is None:
            problems.append(f"{where}: missing")
        elif member.kind == "property" and not isinstance(value, property):
            problems.append(f"{where}: no longer a property")
        elif member.kind == "method":
            if not callable(value):
                problems.append(f"{where}: no longer a method")
                continue
            accepted = inspect.signature(value).parameters
            missing = [name for name in member.params if name not in accepted]
            if missing:
                problems.append(f"{where}: no longer takes {', '.join(missing)}")
    return problems
