"""The JetStream API level (ADR-44) against a real server: what the server advertises (INFO ``api_lvl``, the
account info's ``api.level``), the ``Nats-Required-Api-Level`` header as the server sees it (spied on with a core
subscription to the API subject) and as it enforces it, and the checks made before anything is sent."""

from __future__ import annotations

import pytest

import jetstream_sync
from jetstream_sync import (
    AckPolicy,
    ConsumerConfig,
    StreamConfig,
    errors,
)


@pytest.fixture
def spy(nats_server):
    """A second connection, to watch the API requests the client under test sends."""
    with jetstream_sync.connect(nats_server.url) as nc:
        yield nc


def test_the_level_the_server_advertises(client, js):
    assert client.server_info["api_lvl"] == 5  # nats-server 2.15.1
    assert js.server_api_level == 5
    assert js.account_info().api.level == 5


def test_a_request_asserts_a_level_and_the_server_checks_it(js, name, spy, monkeypatch):
    sub = spy.subscribe("$JS.API.INFO")
    spy.flush()
    assert js.api.request("INFO", required_api_level=5)["api"]["level"] == 5
    assert sub.next_msg(2).headers["Nats-Required-Api-Level"] == "5"
    # above the connected server's level: refused before sending
    with pytest.raises(errors.FeatureNotSupportedError, match="JetStream API level 6"):
        js.api.request("INFO", required_api_level=6)
    with pytest.raises(errors.TimeoutError):
        sub.next_msg(0.2)
    # a server that answers with a lower level than asked refuses unprocessed (here the client is told the
    # connected server has level 9, so its own check lets the request through to the real one, at level 5)
    monkeypatch.setattr(js.client.runtime, "server_info", lambda: {"version": "2.99.0", "api_lvl": 9})
    with pytest.raises(errors.RequiredApiLevelError) as refused:
        js.api.request(f"STREAM.CREATE.{name}", {"name": name, "subjects": [f"{name}.>"]}, required_api_level=6)
    assert isinstance(refused.value, errors.FeatureNotSupportedError) and refused.value.err_code == 10185
    monkeypatch.undo()
    assert list(js.stream_names()) == []  # not processed
    with pytest.raises(errors.InvalidArgumentError):
        js.api.request("INFO", required_api_level=0)


def test_a_stream_or_consumer_asserts_what_its_config_needs(js, name, spy):
    streams = spy.subscribe("$JS.API.STREAM.CREATE.*")
    consumers = spy.subscribe(f"$JS.API.CONSUMER.CREATE.{name}_plain.*")
    spy.flush()
    plain = js.create_stream(StreamConfig(name=f"{name}_plain", subjects=[f"{name}.plain.>"]))
    js.create_stream(StreamConfig(name=f"{name}_TTL", subjects=[f"{name}.ttl.>"], allow_msg_ttl=True))
    js.create_stream(StreamConfig(name=f"{name}_FAST", subjects=[f"{name}.fast.>"], allow_batched=True))
    seen = {}
    for _ in range(3):
        msg = streams.next_msg(2)
        seen[msg.subject.rsplit(".", 1)[-1]] = msg.headers.get("Nats-Required-Api-Level") if msg.headers else None
    assert seen == {f"{name}_plain": None, f"{name}_TTL": "1", f"{name}_FAST": "4"}
    push = ConsumerConfig(durable_name="fc", deliver_subject=f"deliver.{name}", ack_policy=AckPolicy.FLOW_CONTROL)
    js.create_push_consumer(plain.name, push)
    js.create_consumer(plain.name, ConsumerConfig(durable_name="plain"))
    levels = []
    for _ in range(2):
        msg = consumers.next_msg(2)
        levels.append(msg.headers.get("Nats-Required-Api-Level") if msg.headers else None)
    assert levels == ["4", None]


def test_a_config_the_connected_server_is_too_old_for_is_refused_before_sending(js, name, monkeypatch):
    monkeypatch.setattr(js.client.runtime, "server_info", lambda: {"version": "2.12.3", "api_lvl": 2})
    with pytest.raises(
        errors.FeatureNotSupportedError, match=r"^fast-ingest batches \(allow_batched\) needs nats-server 2\.14\.0"
    ):
        js.create_stream(StreamConfig(name=name, subjects=[f"{name}.>"], allow_batched=True))
    monkeypatch.setattr(js.client.runtime, "server_info", lambda: {"version": "2.11.4"})
    with pytest.raises(errors.FeatureNotSupportedError, match=r"^counters needs nats-server 2\.12\.0"):
        js.create_stream(StreamConfig(name=name, subjects=[f"{name}.>"], allow_msg_counter=True))
    js.create_stream(StreamConfig(name=name, subjects=[f"{name}.>"], allow_msg_ttl=True))  # 2.11 is enough
    monkeypatch.undo()
    assert js.stream_info(name).config.allow_msg_ttl and not js.stream_info(name).config.allow_batched
