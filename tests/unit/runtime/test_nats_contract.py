"""The nats-py members the adapter relies on are all there, and a nats-py without one fails this test."""

from __future__ import annotations

import nats.aio.client
import nats.aio.transport
import pytest

from jetstream_sync._runtime._nats import NATS_PY_CONTRACT, NatsConnection, contract_problems
from jetstream_sync._runtime._transports import GatedTcpTransport, WebSocketTransport


def test_installed_nats_py_meets_the_contract():
    assert contract_problems() == []


def test_every_private_member_the_adapter_uses_is_in_the_contract():
    """The contract is the list of what _nats.py touches: a new hook must be added to it."""
    import inspect
    import re

    source = "\n".join(inspect.getsource(cls) for cls in (NatsConnection, GatedTcpTransport, WebSocketTransport))
    used = set(re.findall(r"self\.(_[a-z][a-z_]*)", source)) | set(re.findall(r"\bsub\.(_[a-z_]+)", source))
    used |= set(re.findall(r"transport\.(_[a-z_]+)", source))
    # NatsConnection's own members
    ours = {"_tcp_writer", "_count_out", "_flushes", "_end_flushes", "_lame_duck", "_leave", "_tasks"}
    ours |= {"_keep_pool_order", "_write_pending", "_auth", "_auth_fields", "_dial", "_options", "_reconnect_delay"}
    ours |= {"_reconnect_wait", "_tls_wanted", "_wake", "_gate", "_socket_transport", "_open"}
    listed = {member.name for member in NATS_PY_CONTRACT}
    assert used - ours <= listed, f"nats-py members used but not in NATS_PY_CONTRACT: {sorted(used - ours - listed)}"


@pytest.mark.parametrize(
    ("owner", "name", "expected"),
    [
        (nats.aio.client.Client, "_process_msg", "nats-py Client._process_msg: missing"),
        (nats.aio.client.Client, "_connect_command", "nats-py Client._connect_command: missing"),
    ],
)
def test_a_missing_method_fails_the_contract(monkeypatch, owner, name, expected):
    monkeypatch.delattr(owner, name)
    assert expected in contract_problems()


def test_a_changed_signature_fails_the_contract(monkeypatch):
    async def process_msg(self, sid, subject, reply, data):  # headers dropped, as a future release might
        return None

    monkeypatch.setattr(nats.aio.client.Client, "_process_msg", process_msg)
    assert "nats-py Client._process_msg: no longer takes headers" in contract_problems()


def test_an_instance_attribute_no_longer_set_fails_the_contract(monkeypatch):
    original = nats.aio.transport.TcpTransport.__init__

    def init_without_writer(self):
        original(self)
        del self._io_writer

    monkeypatch.setattr(nats.aio.transport.TcpTransport, "__init__", init_without_writer)
    assert "nats-py TcpTransport._io_writer: no longer set by __init__" in contract_problems()
