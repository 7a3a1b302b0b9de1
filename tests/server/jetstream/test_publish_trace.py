"""Message tracing (ADR-41) as a publish option against a real server: ``trace_dest`` sends ``Nats-Trace-Dest``,
and the server reports the message's way in and the stream that stored it (or why it refused it) to that
subject, while the publish is stored and acknowledged as usual."""

from __future__ import annotations

import json

import pytest

from jetstream_sync import PublishOptions, StreamConfig, errors


@pytest.fixture
def traced(client, js, name):
    """A stream, and a subscription to the trace events sent to ``trace.<name>``."""
    js.create_stream(StreamConfig(name=name, subjects=[f"{name}.>"]))
    sub = client.subscribe(f"trace.{name}")
    client.flush()
    return sub


def _events(sub) -> dict[str, dict]:
    """The events of the next trace message, by type (in, js, eg, ...)."""
    report = json.loads(sub.next_msg(5).data)
    return {event["type"]: event for event in report["events"]}


def test_a_traced_publish_is_stored_and_its_way_reported(js, name, traced):
    ack = js.publish(f"{name}.orders", b"x", trace_dest=f"trace.{name}")
    assert (ack.stream, ack.seq) == (name, 1)
    events = _events(traced)
    assert events["in"]["subj"] == f"{name}.orders"
    assert (events["js"]["stream"], events["js"]["subject"]) == (name, f"{name}.orders")
    # the stream keeps the header switched off, so that reading the message back is not traced again
    assert js.stream(name).get_msg(1).headers["Nats-Trace-Dest"] == "trace disabled"


def test_a_refused_publish_is_traced_with_the_streams_reason(js, name, traced):
    js.publish(f"{name}.orders", b"x")
    options = PublishOptions(trace_dest=f"trace.{name}", expected_last_sequence=5)
    with pytest.raises(errors.WrongLastSequenceError):
        js.publish(f"{name}.orders", b"y", options=options)
    assert _events(traced)["js"]["error"] == "last sequence mismatch: 5 vs 1"


def test_an_asynchronous_publish_is_traced(js, name, traced):
    future = js.publish_async(f"{name}.orders", b"x", trace_dest=f"trace.{name}")
    assert future.result(5).seq == 1
    assert _events(traced)["js"]["stream"] == name


def test_an_older_server_is_refused_before_sending(js, name, traced, monkeypatch):
    monkeypatch.setattr(js.client.runtime, "server_info", lambda: {"version": "2.10.22"})
    with pytest.raises(errors.FeatureNotSupportedError, match=r"message tracing.*2\.11\.0"):
        js.publish(f"{name}.orders", b"x", trace_dest=f"trace.{name}")
    with pytest.raises(errors.FeatureNotSupportedError):
        js.publish_async(f"{name}.orders", b"x", trace_dest=f"trace.{name}")
    monkeypatch.undo()
    assert js.stream_info(name).state.messages == 0
    with pytest.raises(errors.InvalidArgumentError) as bad:
        js.publish(f"{name}.orders", b"x", trace_dest="trace.*")
    assert bad.value.field == "trace_dest"
