"""Decoding of JetStream advisories and metrics (models/advisory.py) from payloads as nats-server sends them.

The samples were captured from nats-server 2.15 (the leader elections and max deliveries follow the schema in
server/jetstream_events.go, since a single server does not send those or sends them only after a wait).
"""

from __future__ import annotations

import json
import logging
from datetime import datetime, timezone
from typing import Any

import pytest

from jetstream_sync.models import (
    Advisory,
    AdvisoryAction,
    AdvisoryKind,
    APIAudit,
    ConsumerAckMetric,
    ConsumerAction,
    ConsumerLeaderElected,
    ConsumerPaused,
    MaxDeliveriesExceeded,
    MessageNaked,
    MessageTerminated,
    PeerInfo,
    StreamAction,
    StreamLeaderElected,
    UnknownAdvisory,
    parse_advisory,
)
from jetstream_sync.models.advisory import KIND_CLASSES, KIND_TYPES

TS = "2026-11-23T00:46:55.638644617Z"
WHEN = datetime(2026, 11, 23, 0, 46, 55, 638644, tzinfo=timezone.utc)


def _event(kind: str, **fields: Any) -> dict[str, Any]:
    return {"type": f"io.nats.jetstream.{kind}", "id": "1jiXZr9Jp1Q8vw7lJO5LrC", "timestamp": TS, **fields}


def _parse(subject: str, payload: dict[str, Any]) -> Advisory:
    return parse_advisory(subject, json.dumps(payload).encode())


def test_consumer_ack_metric():
    payload = _event(
        "metric.v1.consumer_ack",
        stream="ORDERS",
        consumer="proc",
        consumer_seq=7,
        stream_seq=42,
        ack_time=364636,
        deliveries=2,
        domain="hub",
    )
    ev = _parse("$JS.EVENT.METRIC.CONSUMER.ACK.ORDERS.proc", payload)
    assert isinstance(ev, ConsumerAckMetric)
    assert (ev.type, ev.id, ev.timestamp) == (
        "io.nats.jetstream.metric.v1.consumer_ack",
        "1jiXZr9Jp1Q8vw7lJO5LrC",
        WHEN,
    )
    assert (ev.stream, ev.consumer, ev.consumer_seq, ev.stream_seq, ev.deliveries) == ("ORDERS", "proc", 7, 42, 2)
    assert ev.ack_time == pytest.approx(0.000364636)  # nanoseconds on the wire, seconds here
    assert ev.domain == "hub"
    assert ev.subject == "$JS.EVENT.METRIC.CONSUMER.ACK.ORDERS.proc"
    assert ev.raw == payload
    assert ev.extra == {}


def test_consumer_events_without_a_domain_and_with_go_zero_values_left_out():
    ev = _parse("s", _event("advisory.v1.max_deliver", stream="ORDERS", consumer="proc", stream_seq=3, deliveries=1))
    assert isinstance(ev, MaxDeliveriesExceeded)
    assert (ev.stream, ev.consumer, ev.stream_seq, ev.deliveries, ev.domain) == ("ORDERS", "proc", 3, 1, None)

    fields = {"stream": "ORDERS", "consumer": "proc", "consumer_seq": 2, "stream_seq": 2, "deliveries": 1}
    term = _parse("s", _event("advisory.v1.terminated", **fields, reason="bad input"))
    assert isinstance(term, MessageTerminated)
    assert (term.stream_seq, term.consumer_seq, term.reason) == (2, 2, "bad input")
    assert _parse("s", _event("advisory.v1.terminated", **fields)).reason == ""  # Go omits an empty reason

    nak = _parse("s", _event("advisory.v1.nak", **fields))
    assert isinstance(nak, MessageNaked)
    assert (nak.stream, nak.consumer, nak.consumer_seq, nak.stream_seq, nak.deliveries) == ("ORDERS", "proc", 2, 2, 1)


@pytest.mark.parametrize(
    ("wire", "action"),
    [("create", AdvisoryAction.CREATED), ("delete", AdvisoryAction.DELETED), ("modify", AdvisoryAction.UPDATED)],
)
def test_stream_and_consumer_actions(wire, action):
    stream = _parse(
        "$JS.EVENT.ADVISORY.STREAM.X.ORDERS", _event("advisory.v1.stream_action", stream="ORDERS", action=wire)
    )
    assert isinstance(stream, StreamAction)
    assert (stream.stream, stream.action) == ("ORDERS", action)
    consumer = _parse("s", _event("advisory.v1.consumer_action", stream="ORDERS", consumer="proc", action=wire))
    assert isinstance(consumer, ConsumerAction)
    assert (consumer.stream, consumer.consumer, consumer.action) == ("ORDERS", "proc", action)


def test_an_action_from_a_newer_server_stays_a_string():
    ev = _parse("s", _event("advisory.v1.stream_action", stream="ORDERS", action="rename"))
    assert isinstance(ev, StreamAction)
    assert ev.action == "rename"


def test_leader_elections():
    replicas = [{"name": "n2", "current": True, "active": 1200000, "lag": 0}]
    stream = _parse(
        "$JS.EVENT.ADVISORY.STREAM.LEADER_ELECTED.ORDERS",
        _event("advisory.v1.stream_leader_elected", account="APP", stream="ORDERS", leader="n1", replicas=replicas),
    )
    assert isinstance(stream, StreamLeaderElected)
    assert (stream.stream, stream.leader, stream.account) == ("ORDERS", "n1", "APP")
    assert stream.replicas == [PeerInfo(name="n2", current=True, active=0.0012)]
    consumer = _parse(
        "$JS.EVENT.ADVISORY.CONSUMER.LEADER_ELECTED.ORDERS.proc",
        _event("advisory.v1.consumer_leader_elected", stream="ORDERS", consumer="proc", leader="n3", replicas=None),
    )
    assert isinstance(consumer, ConsumerLeaderElected)
    assert (consumer.stream, consumer.consumer, consumer.leader, consumer.replicas) == ("ORDERS", "proc", "n3", [])


def test_consumer_pause():
    ev = _parse(
        "s",
        _event("advisory.v1.consumer_pause", stream="O", consumer="c", paused=True, pause_until="2026-11-23T00:47:55Z"),
    )
    assert isinstance(ev, ConsumerPaused)
    assert ev.paused is True
    assert ev.pause_until == datetime(2026, 11, 23, 0, 47, 55, tzinfo=timezone.utc)
    resumed = _parse("s", _event("advisory.v1.consumer_pause", stream="O", consumer="c"))
    assert isinstance(resumed, ConsumerPaused)
    assert (resumed.paused, resumed.pause_until) == (False, None)


def test_api_audit_keeps_the_api_subject_apart_from_the_arrival_subject():
    payload = _event(
        "advisory.v1.api_audit",
        server="NAIUOQ",
        client={"acc": "$G", "lang": "python3"},
        subject="$JS.API.STREAM.CREATE.ORDERS",
        request='{"name":"ORDERS"}',
        response='{"type":"io.nats.jetstream.api.v1.stream_create_response"}',
    )
    ev = _parse("$JS.EVENT.ADVISORY.API", payload)
    assert isinstance(ev, APIAudit)
    assert ev.subject == "$JS.EVENT.ADVISORY.API"
    assert ev.api_subject == "$JS.API.STREAM.CREATE.ORDERS"
    assert (ev.server, ev.client, ev.request) == ("NAIUOQ", {"acc": "$G", "lang": "python3"}, '{"name":"ORDERS"}')


def test_every_kind_has_a_class_and_the_type_that_selects_it():
    assert set(KIND_CLASSES) == set(AdvisoryKind)
    for kind in AdvisoryKind:
        ev = _parse("s", {"type": KIND_TYPES[kind]})
        assert type(ev) is KIND_CLASSES[kind], kind


def test_an_unknown_type_keeps_its_json():
    payload = _event("advisory.v1.stream_quorum_lost", stream="ORDERS", replicas=[{"name": "n1"}])
    ev = _parse("$JS.EVENT.ADVISORY.STREAM.QUORUM_LOST.ORDERS", payload)
    assert type(ev) is UnknownAdvisory
    assert (ev.type, ev.timestamp, ev.raw) == ("io.nats.jetstream.advisory.v1.stream_quorum_lost", WHEN, payload)
    assert ev.extra == {"stream": "ORDERS", "replicas": [{"name": "n1"}]}
    assert ev.to_json() == payload
    # a newer version of a known type is not guessed at
    assert type(_parse("s", _event("advisory.v2.nak", stream_seq=1))) is UnknownAdvisory


@pytest.mark.parametrize("data", [b"not json", b"\xff\xfe", b"[1, 2]", b'"text"', b"", b"null"])
def test_payloads_that_are_not_json_objects_become_unknown_events_and_are_logged(data, caplog):
    with caplog.at_level(logging.DEBUG, logger="jetstream_sync"):
        ev = parse_advisory("$JS.EVENT.ADVISORY.X.Y", data)
    assert type(ev) is UnknownAdvisory
    assert (ev.subject, ev.type, ev.raw, ev.payload) == ("$JS.EVENT.ADVISORY.X.Y", "", {}, data)
    assert "passing it on as UnknownAdvisory" in caplog.text


def test_an_object_without_a_usable_type_is_unknown_with_its_json():
    for payload in ({"id": "x"}, {"type": ["x"]}, {"type": None, "timestamp": 5}):
        ev = _parse("s", payload)
        assert type(ev) is UnknownAdvisory
        assert (ev.raw, ev.timestamp) == (payload, None)


def test_a_known_type_with_a_field_of_the_wrong_shape_is_kept_as_unknown(caplog):
    payload = _event("metric.v1.consumer_ack", stream="ORDERS", ack_time="soon")
    with caplog.at_level(logging.DEBUG, logger="jetstream_sync"):
        ev = _parse("s", payload)
    assert type(ev) is UnknownAdvisory
    assert ev.raw == payload
    assert "does not decode as ConsumerAckMetric" in caplog.text


def test_events_are_frozen_models_that_give_back_their_payload():
    payload = _event("advisory.v1.nak", stream="ORDERS", consumer="proc", stream_seq=1, consumer_seq=1, deliveries=1)
    ev = _parse("s", payload)
    with pytest.raises(AttributeError):
        ev.stream = "other"  # type: ignore[misc]
    assert ev.to_json() == payload
    assert MessageNaked.from_json(payload, "s") == ev
    built = StreamAction(
        stream="ORDERS", action=AdvisoryAction.UPDATED, type="io.nats.jetstream.advisory.v1.stream_action", id="i1"
    )
    assert built.to_json() == {
        "type": "io.nats.jetstream.advisory.v1.stream_action",
        "id": "i1",
        "stream": "ORDERS",
        "action": "modify",
    }
    assert "raw" not in repr(ev)
