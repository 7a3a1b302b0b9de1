"""JetStream context, Stream and Consumer management against a real server."""

from __future__ import annotations

from datetime import timedelta

import pytest

from jetstream_sync import (
    AckPolicy,
    ConsumerConfig,
    DeliverPolicy,
    DiscardPolicy,
    JetStream,
    RetentionPolicy,
    StorageType,
    StreamConfig,
    errors,
)


def test_create_get_update_delete_stream(js, name):
    config = StreamConfig(
        name=name,
        subjects=[f"{name}.>"],
        storage=StorageType.MEMORY,
        max_age=timedelta(hours=1),
        duplicate_window=30,
        description="orders",
        metadata={"team": "core"},
    )
    stream = js.create_stream(config)
    assert stream.name == name
    info = stream.cached_info
    assert info.config.max_age == 3600.0
    assert info.config.duplicate_window == 30.0
    assert info.config.storage is StorageType.MEMORY
    assert info.config.metadata["team"] == "core"
    assert js.create_stream(config).name == name  # same config: idempotent

    with pytest.raises(errors.StreamNameInUseError):
        js.create_stream(StreamConfig(name=name, subjects=[f"{name}.other"]))

    updated = js.update_stream(
        StreamConfig(name=name, subjects=[f"{name}.>"], description="changed", storage=StorageType.MEMORY)
    )
    assert updated.cached_info.config.description == "changed"
    assert js.stream(name).info().config.description == "changed"
    with pytest.raises(errors.StreamConfigError, match="storage type") as refused:
        js.update_stream(StreamConfig(name=name, subjects=[f"{name}.>"], storage=StorageType.FILE))
    assert refused.value.err_code == 10052
    assert name in list(js.stream_names())
    assert name in [s.config.name for s in js.streams()]
    assert list(js.stream_names(subject=f"{name}.x")) == [name]
    assert js.find_stream_name(f"{name}.x") == name

    js.delete_stream(name)
    with pytest.raises(errors.StreamNotFoundError):
        js.stream(name)
    with pytest.raises(errors.StreamNotFoundError):
        js.delete_stream(name)
    with pytest.raises(errors.StreamNotFoundError):
        js.update_stream(config)


def test_create_or_update_stream(js, name):
    js.create_or_update_stream(StreamConfig(name=name, subjects=[f"{name}.a"]))
    stream = js.create_or_update_stream(StreamConfig(name=name, subjects=[f"{name}.a", f"{name}.b"]))
    assert stream.cached_info.config.subjects == [f"{name}.a", f"{name}.b"]


def test_paged_listing_walks_every_page(js, name):
    names = {f"{name}_{i}" for i in range(260)}  # the server pages stream names by 1024, infos by 256
    for stream_name in names:
        js.create_stream(StreamConfig(name=stream_name, subjects=[f"{stream_name}.x"], storage=StorageType.MEMORY))
    assert names <= set(js.stream_names())
    assert names <= {info.config.name for info in js.streams()}


def test_account_info(js, stream):
    info = js.account_info()
    assert info.streams >= 1
    assert info.api.total > 0


@pytest.mark.parametrize("bad", ["", "a b", "a.b", "a*", "a>", "a/b", "a\\b", "tab\t"])
def test_invalid_names_are_refused_before_sending(js, bad):
    with pytest.raises(ValueError) as info:
        js.stream(bad)
    assert info.value.field == "stream"
    with pytest.raises(ValueError):
        js.create_stream(StreamConfig(name=bad, subjects=["x"]))
    with pytest.raises(ValueError):
        js.consumer("S", bad)


def test_consumer_lifecycle_on_stream_and_context(js, stream):
    config = ConsumerConfig(
        durable_name="dispatch",
        ack_policy=AckPolicy.EXPLICIT,
        ack_wait=10,
        max_deliver=5,
        filter_subject=f"{stream.name}.new",
        metadata={"owner": "tests"},
    )
    cons = stream.create_or_update_consumer(config)
    assert (cons.stream_name, cons.name) == (stream.name, "dispatch")
    info = cons.info()
    assert info.config.ack_wait == 10.0
    assert info.config.max_deliver == 5
    assert info.num_pending == 0
    assert stream.create_consumer(config).name == "dispatch"  # same config: fine

    with pytest.raises(errors.ConsumerExistsError):
        stream.create_consumer(ConsumerConfig(durable_name="dispatch", ack_wait=20))
    updated = stream.update_consumer(
        ConsumerConfig(durable_name="dispatch", ack_wait=20, filter_subject=f"{stream.name}.new")
    )
    assert updated.cached_info.config.ack_wait == 20.0
    with pytest.raises(errors.ConsumerNotFoundError):
        stream.update_consumer(ConsumerConfig(durable_name="missing"))

    assert js.consumer(stream.name, "dispatch").name == "dispatch"
    assert list(stream.consumer_names()) == ["dispatch"]
    assert [c.name for c in js.consumers(stream.name)] == ["dispatch"]

    cons.delete()
    with pytest.raises(errors.ConsumerNotFoundError):
        stream.consumer("dispatch")
    with pytest.raises(errors.ConsumerNotFoundError):
        js.delete_consumer(stream.name, "dispatch")
    with pytest.raises(errors.StreamNotFoundError):
        js.consumer("NOSUCHSTREAM", "dispatch")


def test_ephemeral_consumer_gets_a_generated_name(stream):
    cons = stream.create_consumer(ConsumerConfig(inactive_threshold=5))
    assert cons.name
    assert cons.cached_info.config.durable_name is None
    assert cons.cached_info.config.inactive_threshold == 5.0


def test_consumer_config_combinations_are_checked_client_side(stream):
    with pytest.raises(ValueError) as info:
        ConsumerConfig(durable_name="c", opt_start_seq=5)
    assert info.value.field == "opt_start_seq"
    with pytest.raises(ValueError):
        ConsumerConfig(durable_name="c", deliver_policy=DeliverPolicy.BY_START_SEQUENCE)
    cons = stream.create_consumer(
        ConsumerConfig(durable_name="from5", deliver_policy=DeliverPolicy.BY_START_SEQUENCE, opt_start_seq=5)
    )
    assert cons.cached_info.config.opt_start_seq == 5


def test_purge_variants_return_counts(js, stream):
    for i in range(10):
        js.publish(f"{stream.name}.a", b"%d" % i)
    for i in range(5):
        js.publish(f"{stream.name}.b", b"%d" % i)
    assert stream.purge(subject=f"{stream.name}.b") == 5
    assert stream.purge(keep=3) == 7
    assert stream.info().state.messages == 3
    assert stream.purge(sequence=10) == 2  # below 10: sequences 8 and 9
    assert stream.purge() == 1
    assert stream.info().state.messages == 0
    with pytest.raises(ValueError):
        stream.purge(sequence=1, keep=1)


@pytest.mark.parametrize("allow_direct", [False, True])
def test_get_and_delete_messages(js, name, allow_direct):
    stream = js.create_stream(StreamConfig(name=name, subjects=[f"{name}.>"], allow_direct=allow_direct))
    js.publish(f"{name}.a", b"first", headers={"K": ["1", "2"]})
    js.publish(f"{name}.b", b"second")
    js.publish(f"{name}.a", b"third")

    msg = stream.get_msg(1)
    assert (msg.subject, msg.seq, msg.data) == (f"{name}.a", 1, b"first")
    assert msg.headers.get_list("K") == ["1", "2"]
    assert msg.time.tzinfo is not None
    last = stream.get_last_msg(f"{name}.a")
    assert (last.seq, last.data) == (3, b"third")

    with pytest.raises(errors.MessageNotFoundError):
        stream.get_msg(99)
    with pytest.raises(errors.MessageNotFoundError):
        stream.get_last_msg(f"{name}.none")

    stream.delete_msg(2)
    with pytest.raises(errors.MessageNotFoundError):
        stream.get_msg(2)
    stream.secure_delete_msg(1)
    assert stream.info().state.messages == 1
    with pytest.raises(errors.APIError):
        stream.delete_msg(2)


def test_work_queue_removes_acked_messages(js, client, name):
    from tests.helpers import pull, wait_until

    stream = js.create_stream(StreamConfig(name=name, subjects=[f"{name}.>"], retention=RetentionPolicy.WORK_QUEUE))
    stream.create_consumer(ConsumerConfig(durable_name="w"))
    for i in range(3):
        js.publish(f"{name}.job", b"%d" % i)
    for msg in pull(client, name, "w", 3):
        msg.ack()
    client.flush()
    wait_until(lambda: stream.info().state.messages == 0)


def test_interest_retention_keeps_until_every_consumer_acks(js, client, name):
    from tests.helpers import pull, wait_until

    stream = js.create_stream(StreamConfig(name=name, subjects=[f"{name}.>"], retention=RetentionPolicy.INTEREST))
    stream.create_consumer(ConsumerConfig(durable_name="a"))
    stream.create_consumer(ConsumerConfig(durable_name="b"))
    js.publish(f"{name}.e", b"x")
    for msg in pull(client, name, "a", 1):
        msg.ack_sync()
    assert stream.info().state.messages == 1
    for msg in pull(client, name, "b", 1):
        msg.ack_sync()
    wait_until(lambda: stream.info().state.messages == 0)


def test_discard_new_refuses_at_max_msgs(js, name):
    js.create_stream(StreamConfig(name=name, subjects=[f"{name}.>"], max_msgs=2, discard=DiscardPolicy.NEW))
    js.publish(f"{name}.a", b"1")
    js.publish(f"{name}.a", b"2")
    with pytest.raises(errors.APIError, match="maximum messages exceeded"):
        js.publish(f"{name}.a", b"3")


def test_jetstream_context_options(client, stream):
    with pytest.raises(ValueError):
        client.jetstream(domain="a", api_prefix="b")
    with pytest.raises(ValueError):
        client.jetstream(timeout=0)
    via_prefix = client.jetstream(api_prefix="$JS.API")
    assert via_prefix.stream(stream.name).name == stream.name
    elsewhere = client.jetstream(domain="nowhere", timeout=1)
    with pytest.raises(errors.JetStreamNotEnabledError):
        elsewhere.account_info()


def test_the_context_keeps_the_runtime_port_of_its_client(client, js):
    """The JetStream layer talks to the client's Runtime port, not to the facade (ARCHITECTURE.md, "Layers and
    imports"): the context, its API and its timeout come from the port the client hands over."""
    assert js.client is client
    assert js.runtime is client.runtime and js.api.runtime is client.runtime
    assert js.timeout == client.default_timeout
    assert JetStream(client, timeout=2).api.runtime is client.runtime


@pytest.mark.parametrize("not_a_client", [None, object(), "nats://127.0.0.1:4222"])
def test_a_context_needs_a_client(not_a_client):
    with pytest.raises(errors.InvalidTypeError, match=r"must be a jetstream_sync\.Client"):
        JetStream(not_a_client)
