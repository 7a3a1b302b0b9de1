"""Typed payloads on a real server: publish with a codec, read back objects through every read path
(consume, messages, fetch, next, an ordered consumer, request), what an undecodable payload does to a
consume (terminated at once, never left to ack_wait, the error carrying the message), and raw payloads both
ways with nats-py (the other Python client) reading and writing JSON and msgpack by hand."""

from __future__ import annotations

import threading

import msgspec
import pydantic
import pytest

from jetstream_sync import ConsumerConfig, errors
from jetstream_sync.codecs import JsonCodec, MsgpackCodec, MsgspecCodec, PydanticCodec
from tests.helpers import wait_until
from tests.server.jetstream.kv.kvhelpers import with_nats_py


class Order(msgspec.Struct):
    id: int
    sku: str
    qty: int = 1


class Invoice(pydantic.BaseModel):
    number: str
    total: float


ORDERS = MsgspecCodec(Order)


def _consumer(js, stream, **config):
    return js.create_consumer(stream.name, ConsumerConfig(durable_name="typed", **config))


def test_every_read_path_hands_out_decoded_values(js, stream, name):
    for i in range(6):
        js.publish(f"{name}.orders", Order(id=i, sku=f"sku-{i}"), codec=ORDERS)
    cons = _consumer(js, stream)

    first = cons.next(5, codec=ORDERS)
    assert first.value == Order(id=0, sku="sku-0") and first.value is first.value  # decoded once, kept
    first.ack()
    batch = list(cons.fetch(2, expires=5, codec=ORDERS))
    assert [m.value.id for m in batch] == [1, 2]
    for m in batch:
        m.ack()
    with cons.messages(codec=ORDERS) as it:
        got = it.next(5)
        assert got.value == Order(id=3, sku="sku-3")
        got.ack()
    seen: list[Order] = []
    done = threading.Event()

    def handler(msg):
        seen.append(msg.value)
        msg.ack()
        if len(seen) == 2:
            done.set()

    ctx = cons.consume(handler, codec=ORDERS)
    try:
        assert done.wait(10)
    finally:
        ctx.stop()
    assert sorted(o.id for o in seen) == [4, 5]  # given back by the messages() stop: redelivered in any order

    ordered = js.ordered_consumer(stream.name)
    assert [ordered.next(5, codec=ORDERS).value.id for _ in range(3)] == [0, 1, 2]
    with ordered.fetch(3, expires=5, codec=ORDERS) as more:
        assert [m.value.sku for m in more] == ["sku-3", "sku-4", "sku-5"]


def test_push_consumers_and_ordered_by_see_decoded_values(js, stream, name):
    for i in range(6):
        js.publish(f"{name}.orders", Order(id=i, sku=f"acct-{i % 2}"), codec=ORDERS)
    push = js.create_push_consumer(
        stream.name, ConsumerConfig(durable_name="pushed", deliver_subject=f"_deliver.{name}")
    )
    with push.messages(codec=ORDERS) as it:
        first = it.next(5)
        assert first.value == Order(id=0, sku="acct-0")
        first.ack()
    by_key: dict[str, list[int]] = {}
    lock = threading.Lock()
    cons = _consumer(js, stream)

    def handler(msg):
        with lock:
            by_key.setdefault(msg.value.sku, []).append(msg.value.id)
        msg.ack()

    # ordered_by reads the decoded value too: the codec is set before the key is taken
    ctx = cons.consume(handler, codec=ORDERS, workers=2, ordered_by=lambda m: m.value.sku)
    try:
        wait_until(lambda: sum(map(len, by_key.values())) == 6, timeout=10)
    finally:
        ctx.stop()
    assert by_key == {"acct-0": [0, 2, 4], "acct-1": [1, 3, 5]}


def test_a_read_without_a_codec_says_how_to_decode(js, stream, name):
    js.publish(f"{name}.x", {"a": 1}, codec=JsonCodec())
    msg = _consumer(js, stream).next(5)
    assert msg.data == b'{"a":1}'
    with pytest.raises(errors.CodecError, match="without a codec"):
        _ = msg.value
    assert msg.decode(JsonCodec()) == {"a": 1}


def test_an_undecodable_payload_under_consume_is_terminated_at_once_and_reported(js, stream, name):
    js.publish(f"{name}.orders", b'{"id": "not a number", "sku": 3}')
    js.publish(f"{name}.orders", Order(id=7, sku="fine"), codec=ORDERS)
    cons = _consumer(js, stream, ack_wait=60)  # a stranded message would sit here for a minute
    reported: list[BaseException] = []
    handled: list[Order] = []

    def handler(msg):
        order = msg.value  # raises PayloadDecodeError for the first message; the handler lets it escape
        handled.append(order)
        msg.ack()

    ctx = cons.consume(handler, codec=ORDERS, error_handler=reported.append)
    try:
        wait_until(lambda: handled and reported, timeout=10)
        wait_until(lambda: cons.info().num_ack_pending == 0, timeout=5)
    finally:
        ctx.stop()
    [exc] = reported
    assert isinstance(exc, errors.PayloadDecodeError)
    assert exc.message.metadata.sequence.stream == 1 and exc.message.is_acked
    assert isinstance(exc.__cause__, msgspec.ValidationError)
    info = cons.info()
    assert info.num_redelivered == 0 and info.num_pending == 0  # terminated, not redelivered
    assert handled == [Order(id=7, sku="fine")]


def test_a_handler_that_catches_the_decode_error_can_nak_for_redelivery(js, stream, name):
    js.publish(f"{name}.orders", b"\x00 not json")
    cons = _consumer(js, stream, ack_wait=60)
    deliveries: list[int] = []
    done = threading.Event()

    def handler(msg):
        try:
            _ = msg.value
        except errors.PayloadDecodeError as exc:
            assert exc.message is msg
            deliveries.append(msg.metadata.num_delivered)
            if len(deliveries) < 2:
                msg.nak()
            else:
                msg.term("bad payload")
                done.set()

    ctx = cons.consume(handler, codec=JsonCodec())
    try:
        assert done.wait(10)
    finally:
        ctx.stop()
    assert deliveries == [1, 2]


def test_publish_async_request_and_core_publish_encode(client, js, stream, name):
    codec = PydanticCodec(Invoice)
    futures = [js.publish_async(f"{name}.inv", Invoice(number=str(i), total=i * 1.5), codec=codec) for i in range(3)]
    js.publish_async_complete(timeout=10)
    assert [f.result().seq for f in futures] == [1, 2, 3]
    assert [m.value.total for m in _consumer(js, stream).fetch(3, expires=5, codec=codec)] == [0.0, 1.5, 3.0]

    def respond(msg):
        invoice = msg.decode(codec)
        msg.respond(codec.encode(Invoice(number=invoice.number, total=invoice.total * 2)))

    sub = client.subscribe(f"{name}_svc", handler=respond)
    try:
        client.flush()
        reply = client.request(f"{name}_svc", Invoice(number="A", total=2.0), timeout=5, codec=codec)
        assert reply.value == Invoice(number="A", total=4.0)
    finally:
        sub.unsubscribe()


def test_publish_refuses_what_the_codec_cannot_encode(js, stream, name):
    with pytest.raises(errors.PayloadEncodeError) as refused:
        js.publish(f"{name}.x", {"when": object()}, codec=JsonCodec())
    assert isinstance(refused.value.__cause__, TypeError)
    with pytest.raises(errors.InvalidTypeError, match="instance"):
        js.publish(f"{name}.x", {}, codec=JsonCodec)
    assert stream.info().state.messages == 0


def test_raw_payloads_both_ways_with_nats_py(nats_server, js, stream, name):
    js.publish(f"{name}.ours.json", {"from": "jetstream_sync", "n": [1, 2]}, codec=JsonCodec())
    js.publish(f"{name}.ours.msgpack", {"from": "jetstream_sync", "b": b"\x00\x01"}, codec=MsgpackCodec())
    js.publish(f"{name}.ours.struct", Order(id=9, sku="py"), codec=MsgspecCodec(Order, format="msgpack"))

    async def theirs(_nc, njs):
        import json

        import msgpack

        read = {}
        for i, kind in enumerate(("json", "msgpack", "struct"), start=1):
            stored = await njs.get_msg(name, i)
            read[kind] = stored.data
        await njs.publish(f"{name}.theirs.json", json.dumps({"from": "nats-py", "ok": True}).encode())
        await njs.publish(f"{name}.theirs.msgpack", msgpack.packb({"from": "nats-py", "n": 3}))
        return read

    read = with_nats_py(nats_server.url, theirs)
    import json

    import msgpack

    assert json.loads(read["json"]) == {"from": "jetstream_sync", "n": [1, 2]}
    assert msgpack.unpackb(read["msgpack"]) == {"from": "jetstream_sync", "b": b"\x00\x01"}
    assert msgpack.unpackb(read["struct"]) == {"id": 9, "sku": "py", "qty": 1}

    cons = js.create_consumer(stream.name, ConsumerConfig(durable_name="theirs", filter_subject=f"{name}.theirs.>"))
    json_msg, msgpack_msg = list(cons.fetch(2, expires=5))
    assert json_msg.decode(JsonCodec()) == {"from": "nats-py", "ok": True}
    assert msgpack_msg.decode(MsgpackCodec()) == {"from": "nats-py", "n": 3}


def test_js_subscribe_and_pull_subscribe_decode_with_a_codec(js, stream, name):
    # nats-py's call shapes take codec= too: a callback's, next_msg's and a pull fetch's messages decode.
    for i in range(3):
        js.publish(f"{name}.orders", Order(id=i, sku=f"sku-{i}"), codec=ORDERS)
    sub = js.subscribe(f"{name}.orders", codec=ORDERS)
    try:
        assert [sub.next_msg(5).value.id for _ in range(3)] == [0, 1, 2]
    finally:
        sub.unsubscribe()

    seen: list[Order] = []
    sub = js.subscribe(f"{name}.orders", cb=lambda msg: seen.append(msg.value), codec=ORDERS)
    try:
        wait_until(lambda: len(seen) == 3, timeout=10)
    finally:
        sub.unsubscribe()
    assert seen == [Order(id=i, sku=f"sku-{i}") for i in range(3)]

    pull = js.pull_subscribe(f"{name}.orders", durable="typed-pull")
    try:
        assert [m.value.sku for m in pull.fetch(3, timeout=5, codec=ORDERS)] == ["sku-0", "sku-1", "sku-2"]
    finally:
        pull.unsubscribe()


def test_js_subscribe_terminates_what_its_callback_cannot_decode(js, stream, name):
    js.publish(f"{name}.orders", b"not msgspec at all")
    js.publish(f"{name}.orders", Order(id=2, sku="fine"), codec=ORDERS)
    reported: list[BaseException] = []
    handled: list[Order] = []
    sub = js.subscribe(
        f"{name}.orders",
        durable="typed-push",
        cb=lambda msg: handled.append(msg.value),
        codec=ORDERS,
        error_cb=reported.append,
        config=ConsumerConfig(ack_wait=60),  # a stranded message would sit here for a minute
    )
    try:
        wait_until(lambda: handled and reported, timeout=10)
        wait_until(lambda: sub.consumer_info().num_ack_pending == 0, timeout=5)
        info = sub.consumer_info()
    finally:
        sub.unsubscribe()
    [exc] = reported
    assert isinstance(exc, errors.PayloadDecodeError) and exc.message.metadata.sequence.stream == 1
    assert info.num_redelivered == 0 and info.num_pending == 0
    assert handled == [Order(id=2, sku="fine")]


def test_js_subscribe_refuses_a_codec_class_before_subscribing(js, stream, name):
    with pytest.raises(errors.InvalidTypeError, match="codec instance"):
        js.subscribe(f"{name}.orders", codec=JsonCodec)
    pull = js.pull_subscribe(f"{name}.orders", durable="typed-refused")
    try:
        with pytest.raises(errors.InvalidTypeError, match="codec instance"):
            pull.fetch(1, timeout=1, codec=JsonCodec)
        # the refused subscribe made no consumer; the refused fetch pulled nothing
        assert [c.name for c in js.stream(stream.name).consumers()] == ["typed-refused"]
        assert pull.consumer_info().num_waiting == 0
    finally:
        pull.unsubscribe()
