"""Bad input, entry point by entry point: a typed error that names the field, raised before anything is
sent, and a connection that is still fully usable afterwards."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from jetstream_sync import (
    AckPolicy,
    ConnectOptions,
    ConsumerConfig,
    DeliverPolicy,
    KeyValueConfig,
    ObjectStoreConfig,
    RetentionPolicy,
    StreamConfig,
    errors,
)

V, T = ValueError, TypeError

CASES = [
    # core publish
    ("publish empty subject", lambda c: c.nc.publish("", b""), V),
    ("publish wildcard *", lambda c: c.nc.publish("a.*.b", b""), V),
    ("publish wildcard >", lambda c: c.nc.publish("a.>", b""), V),
    ("publish whitespace", lambda c: c.nc.publish("a\tb", b""), V),
    ("publish leading dot", lambda c: c.nc.publish(".a", b""), V),
    ("publish non-str subject", lambda c: c.nc.publish(b"a", b""), T),
    ("publish str payload", lambda c: c.nc.publish("a", "text"), T),
    ("publish int payload", lambda c: c.nc.publish("a", 5), T),
    ("publish header value int", lambda c: c.nc.publish("a", b"", headers={"K": 5}), T),
    ("publish header key int", lambda c: c.nc.publish("a", b"", headers={5: "v"}), T),
    ("publish header key colon", lambda c: c.nc.publish("a", b"", headers={"a:b": "v"}), V),
    ("publish header CRLF", lambda c: c.nc.publish("a", b"", headers={"K": "a\r\nPUB x 1"}), V),
    ("publish headers not mapping", lambda c: c.nc.publish("a", b"", headers=[("K", "v")]), T),
    ("publish above max_payload", lambda c: c.nc.publish("a", b"x" * (c.nc.max_payload + 1)), errors.MaxPayloadError),
    ("publish bad reply", lambda c: c.nc.publish("a", b"", reply="r *"), V),
    ("request zero timeout", lambda c: c.nc.request("a", b"", timeout=0), V),
    ("request negative timeout", lambda c: c.nc.request("a", b"", timeout=-1), V),
    ("request nan timeout", lambda c: c.nc.request("a", b"", timeout=float("nan")), V),
    ("request timeout past 292 years", lambda c: c.nc.request("a", b"", timeout=1e10), V),
    ("publish header key non-ASCII", lambda c: c.nc.publish("a", b"", headers={"Größe": "1"}), V),
    ("publish header value lone surrogate", lambda c: c.nc.publish("a", b"", headers={"K": "\udc80"}), V),
    ("publish subject lone surrogate", lambda c: c.nc.publish("a.\udc80", b""), V),
    ("publish subject past the control line", lambda c: c.nc.publish("a" * 5000, b""), V),
    ("publish subject of 4-byte characters", lambda c: c.nc.publish("\U0001f600" * 1000, b""), V),
    ("publish subject and reply together too long", lambda c: c.nc.publish("a" * 2500, b"", reply="r" * 2500), V),
    ("request subject past the control line", lambda c: c.nc.request("a" * 5000, b"", timeout=1), V),
    ("subscribe subject past the control line", lambda c: c.nc.subscribe("a" * 5000), V),
    ("subscribe queue past the control line", lambda c: c.nc.subscribe("a", queue="q" * 5000), V),
    ("subscribe subject and queue together too long", lambda c: c.nc.subscribe("a" * 2500, queue="q" * 2500), V),
    ("connect inbox_prefix too long", lambda c: ConnectOptions(inbox_prefix="i" * 300), V),
    ("subscribe max_pending_bytes zero", lambda c: c.nc.subscribe("a", max_pending_bytes=0), V),
    ("subscribe max_pending_bytes str", lambda c: c.nc.subscribe("a", max_pending_bytes="64MB"), T),
    ("subscribe empty", lambda c: c.nc.subscribe(""), V),
    ("subscribe bad queue", lambda c: c.nc.subscribe("a", queue=""), V),
    ("subscribe > not last", lambda c: c.nc.subscribe("a.>.b"), V),
    ("flush negative", lambda c: c.nc.flush(timeout=-1), V),
    # the JetStream context
    ("jetstream domain and prefix", lambda c: c.nc.jetstream(domain="d", api_prefix="p"), V),
    ("jetstream bad domain", lambda c: c.nc.jetstream(domain="a.b"), V),
    ("jetstream zero timeout", lambda c: c.nc.jetstream(timeout=0), V),
    ("jetstream max_pending zero", lambda c: c.nc.jetstream(max_pending=0), V),
    ("jetstream stall_timeout negative", lambda c: c.nc.jetstream(stall_timeout=-1), V),
    ("js.publish wildcard", lambda c: c.js.publish("a.*", b""), V),
    ("js.publish str payload", lambda c: c.js.publish(f"{c.s}.a", "x"), T),
    ("js.publish empty msg_id", lambda c: c.js.publish(f"{c.s}.a", b"", msg_id=""), V),
    ("js.publish negative expected seq", lambda c: c.js.publish(f"{c.s}.a", b"", expected_last_sequence=-1), V),
    ("js.publish_async bad timeout", lambda c: c.js.publish_async(f"{c.s}.a", b"", timeout=0), V),
    ("js.publish timeout 1e10", lambda c: c.js.publish(f"{c.s}.a", b"", timeout=1e10), V),
    ("js.publish timeout timedelta.max", lambda c: c.js.publish(f"{c.s}.a", b"", timeout=timedelta.max), V),
    ("js.publish subject past the control line", lambda c: c.js.publish(f"{c.s}." + "a" * 5000, b""), V),
    ("js.publish_async subject past the control line", lambda c: c.js.publish_async(f"{c.s}." + "a" * 5000), V),
    ("js.publish subject lone surrogate", lambda c: c.js.publish(f"{c.s}.\udc80", b""), V),
    ("js.publish header value lone surrogate", lambda c: c.js.publish(f"{c.s}.a", b"", headers={"K": "\ud800"}), V),
    ("fetch expires 1e12", lambda c: c.cons.fetch(1, expires=1e12), V),
    ("fetch 2**63 messages", lambda c: c.cons.fetch(2**63, expires=1), V),
    (
        "js.publish_async above max_payload",
        lambda c: c.js.publish_async(f"{c.s}.a", b"x" * (c.nc.max_payload + 1)),
        errors.MaxPayloadError,
    ),
    ("publish_async_complete zero", lambda c: c.js.publish_async_complete(timeout=0), V),
    # streams
    ("create_stream not a config", lambda c: c.js.create_stream({"name": "X"}), T),
    ("stream name with dot", lambda c: c.js.stream("a.b"), V),
    ("stream name with space", lambda c: c.js.delete_stream("a b"), V),
    ("stream name not str", lambda c: c.js.stream(5), T),
    ("stream name past the control line", lambda c: c.js.stream("S" * 5000), V),
    ("create_stream name past the control line", lambda c: c.js.create_stream(StreamConfig(name="S" * 5000)), V),
    ("StreamConfig subject past the control line", lambda c: StreamConfig(name="X", subjects=["a" * 5000]), V),
    (
        "create_consumer name past the control line",
        lambda c: c.stream.create_consumer(ConsumerConfig(name="C" * 5000)),
        V,
    ),
    ("streams bad subject filter", lambda c: list(c.js.streams(subject="a b")), V),
    ("StreamConfig empty name", lambda c: StreamConfig(name=""), V),
    ("StreamConfig unknown retention", lambda c: StreamConfig(name="X", retention="forever"), V),
    ("StreamConfig bad replicas", lambda c: StreamConfig(name="X", num_replicas=7), V),
    ("StreamConfig negative age", lambda c: StreamConfig(name="X", max_age=-1), V),
    ("StreamConfig dupe window > age", lambda c: StreamConfig(name="X", max_age=10, duplicate_window=60), V),
    ("StreamConfig bad subject", lambda c: StreamConfig(name="X", subjects=["a b"]), V),
    ("purge sequence and keep", lambda c: c.stream.purge(sequence=1, keep=1), V),
    ("purge negative keep", lambda c: c.stream.purge(keep=-1), V),
    ("get_msg zero", lambda c: c.stream.get_msg(0), V),
    ("get_msg str", lambda c: c.stream.get_msg("1"), T),
    ("get_last_msg bad subject", lambda c: c.stream.get_last_msg("a b"), V),
    ("delete_msg negative", lambda c: c.stream.delete_msg(-1), V),
    # consumers
    ("create_consumer not a config", lambda c: c.stream.create_consumer("dispatch"), T),
    ("consumer name with >", lambda c: c.stream.consumer("a>"), V),
    ("consumer name past the control line", lambda c: c.stream.consumer("C" * 5000), V),
    ("ConsumerConfig durable past the control line", lambda c: ConsumerConfig(durable_name="D" * 5000), V),
    ("ConsumerConfig name and durable differ", lambda c: ConsumerConfig(name="a", durable_name="b"), V),
    ("ConsumerConfig opt_start_seq without policy", lambda c: ConsumerConfig(opt_start_seq=3), V),
    (
        "ConsumerConfig policy without opt_start_time",
        lambda c: ConsumerConfig(deliver_policy=DeliverPolicy.BY_START_TIME),
        V,
    ),
    ("ConsumerConfig filter and filters", lambda c: ConsumerConfig(filter_subject="a", filter_subjects=["b"]), V),
    ("ConsumerConfig max_deliver 0", lambda c: ConsumerConfig(max_deliver=0), V),
    ("ConsumerConfig backoff longer than max_deliver", lambda c: ConsumerConfig(max_deliver=2, backoff=[1, 2, 3]), V),
    ("ConsumerConfig unknown ack policy", lambda c: ConsumerConfig(ack_policy="sometimes"), V),
    ("ConsumerConfig ack_wait str", lambda c: ConsumerConfig(ack_wait="30s"), T),
    ("pause naive datetime", lambda c: c.cons.pause(datetime(2030, 1, 1)), V),
    ("pause str", lambda c: c.cons.pause("2030-01-01T00:00:00Z"), T),
    ("pause_consumer bad name", lambda c: c.js.pause_consumer(c.s, "a.b", datetime.now(timezone.utc)), V),
    ("reset sequence zero", lambda c: c.cons.reset(sequence=0), V),
    ("reset sequence str", lambda c: c.cons.reset(sequence="1"), T),
    ("fetch zero", lambda c: c.cons.fetch(0), V),
    ("fetch heartbeat above expires/2", lambda c: c.cons.fetch(1, expires=2, idle_heartbeat=1.5), V),
    ("fetch_bytes zero", lambda c: c.cons.fetch_bytes(0), V),
    ("next negative", lambda c: c.cons.next(timeout=-1), V),
    ("messages both limits", lambda c: c.cons.messages(max_messages=1, max_bytes=1), V),
    ("messages expires below 1s", lambda c: c.cons.messages(expires=timedelta(milliseconds=500)), V),
    ("consume threshold above max", lambda c: c.cons.consume(print, max_messages=5, threshold_messages=6), V),
    ("consume heartbeat too small", lambda c: c.cons.consume(print, idle_heartbeat=0.1), V),
    ("consume handler not callable", lambda c: c.cons.consume("handler"), T),
    # key-value
    ("key_value bucket with dot", lambda c: c.js.key_value("a.b"), V),
    ("KeyValueConfig history 65", lambda c: KeyValueConfig(bucket="x", history=65), V),
    ("KeyValueConfig bucket with space", lambda c: KeyValueConfig(bucket="a b"), V),
    ("kv.put key with space", lambda c: c.kv.put("a b", b""), V),
    ("kv.put key with wildcard", lambda c: c.kv.put("a.*", b""), V),
    ("kv.put key past the control line", lambda c: c.kv.put("k" * 5000, b""), V),
    ("kv.get key past the control line", lambda c: c.kv.get("k" * 5000), V),
    ("kv.watch key past the control line", lambda c: c.kv.watch("k" * 5000), V),
    ("kv.put str value", lambda c: c.kv.put("k", "on"), T),
    ("kv.get negative revision", lambda c: c.kv.get("k", revision=-1), V),
    ("kv.create ttl below a second", lambda c: c.kv.create("k", b"", ttl=0.5), V),
    ("kv.update last str", lambda c: c.kv.update("k", b"", last="1"), T),
    ("kv.keys bad filter", lambda c: list(c.kv.keys("a b")), V),
    ("kv.history empty key", lambda c: c.kv.history(""), V),
    ("kv.get_many one bad key", lambda c: c.kv.get_many(["ok", "a b"]), V),
    ("kv.watch conflicting starts", lambda c: c.kv.watch("k", include_history=True, updates_only=True), V),
    ("kv.purge_deletes negative age", lambda c: c.kv.purge_deletes(older_than=-1), V),
    # object store
    ("object_store bucket with dot", lambda c: c.js.object_store("a.b"), V),
    ("ObjectStoreConfig bucket with space", lambda c: ObjectStoreConfig(bucket="a b"), V),
    ("obs.put empty name", lambda c: c.obs.put("", b""), V),
    ("obs.put name past the control line", lambda c: c.obs.put("n" * 5000, b"data"), V),
    ("obs.get_bytes name past the control line", lambda c: c.obs.get_bytes("n" * 5000), V),
    ("obs.put str data", lambda c: c.obs.put("x", "text"), T),
    ("obs.put int data", lambda c: c.obs.put("x", 5), T),
    ("obs.put meta not ObjectMeta", lambda c: c.obs.put("x", b"", meta={"description": "d"}), T),
    ("obs.get_bytes empty name", lambda c: c.obs.get_bytes(""), V),
    ("obs.list show_deleted str", lambda c: c.obs.list(show_deleted="yes"), T),
    ("obs.watch conflicting starts", lambda c: c.obs.watch(include_history=True, updates_only=True), V),
    ("obs.add_link not an ObjectInfo", lambda c: c.obs.add_link("alias", "x"), T),
    ("obs.update_meta not ObjectMeta", lambda c: c.obs.update_meta("x", "meta"), T),
]


class Ctx:
    def __init__(self, nc, js, stream, cons, kv, obs) -> None:
        self.nc, self.js, self.stream, self.cons, self.s = nc, js, stream, cons, stream.name
        self.kv, self.obs = kv, obs


@pytest.fixture(scope="module")
def ctx(nats_server):
    import jetstream_sync

    with jetstream_sync.connect(nats_server.url) as nc:
        js = nc.jetstream()
        stream = js.create_or_update_stream(
            StreamConfig(name="BADINPUT", subjects=["BADINPUT.>"], retention=RetentionPolicy.LIMITS)
        )
        cons = stream.create_or_update_consumer(ConsumerConfig(durable_name="c", ack_policy=AckPolicy.EXPLICIT))
        kv = js.create_or_update_key_value(KeyValueConfig(bucket="BADINPUT_KV"))
        obs = js.create_or_update_object_store(ObjectStoreConfig(bucket="BADINPUT_OBS"))
        yield Ctx(nc, js, stream, cons, kv, obs)
        js.delete_stream("BADINPUT")
        js.delete_key_value("BADINPUT_KV")
        js.delete_object_store("BADINPUT_OBS")


@pytest.mark.parametrize(("label", "call", "exc"), CASES, ids=[case[0] for case in CASES])
def test_bad_input_is_refused_before_sending(ctx, label, call, exc):
    nc = ctx.nc
    nc.flush()
    sent = nc.stats["out_msgs"]
    with pytest.raises(exc) as info:
        call(ctx)
    assert isinstance(info.value, errors.JetStreamError)
    if isinstance(info.value, (errors.InvalidArgumentError, errors.InvalidTypeError)):
        assert info.value.field and info.value.field in str(info.value)
    nc.flush()  # anything queued by the call would now be written and counted
    assert nc.stats["out_msgs"] == sent, "something was sent"
    # the connection is still fully usable
    ack = ctx.js.publish(f"{ctx.s}.after", label.encode())
    assert ctx.stream.get_msg(ack.seq).data == label.encode()
