"""A client, and everything that holds one, refuses to be pickled with ClientNotPicklableError, which says to
create one client per process and how: before, a spawn process's argument or a Spark task's closure failed with
pickle's "cannot pickle 'mmap.mmap' object", naming a part of the client nobody had heard of."""

from __future__ import annotations

import multiprocessing
import pickle
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import jetstream_sync
from jetstream_sync import errors
from jetstream_sync.models import ConsumerConfig, KeyValueConfig, ObjectStoreConfig, StreamConfig

HANDLES: dict[str, Callable[[Any, Any], Any]] = {
    "client": lambda nc, js: nc,
    "jetstream": lambda nc, js: js,
    "stream": lambda nc, js: js.stream("PICKLE"),
    "consumer": lambda nc, js: js.consumer("PICKLE", "worker"),
    "ordered consumer": lambda nc, js: js.ordered_consumer("PICKLE"),
    "push consumer": lambda nc, js: js.ordered_push_consumer("PICKLE"),
    "key-value": lambda nc, js: js.key_value("pickle-kv"),
    "object store": lambda nc, js: js.object_store("pickle-obj"),
    "subscription": lambda nc, js: nc.subscribe("pickle.core"),
    "js.subscribe": lambda nc, js: js.subscribe("pickle.>"),
    "messages()": lambda nc, js: js.consumer("PICKLE", "worker").messages(),
    "consume()": lambda nc, js: js.consumer("PICKLE", "worker").consume(lambda msg: msg.ack()),
    "watcher": lambda nc, js: js.key_value("pickle-kv").watch_all(),
}


@pytest.fixture(scope="module")
def handles(nats_server) -> Iterator[tuple[Any, Any]]:
    with jetstream_sync.connect(nats_server.url) as nc:
        js = nc.jetstream()
        js.create_or_update_stream(StreamConfig(name="PICKLE", subjects=["pickle.>"]))
        js.create_or_update_consumer("PICKLE", ConsumerConfig(durable_name="worker"))
        js.create_or_update_key_value(KeyValueConfig(bucket="pickle-kv"))
        js.create_or_update_object_store(ObjectStoreConfig(bucket="pickle-obj"))
        yield nc, js


def _says_what_to_do(exc: BaseException) -> None:
    text = str(exc)
    assert "create one client per process" in text, text
    assert "jetstream_sync.connect(url)" in text and "docs/frameworks/deployments.md#multiprocessing" in text, text


@pytest.mark.parametrize("kind", list(HANDLES))
def test_pickling_a_client_or_a_handle_says_to_connect_in_each_process(handles, kind):
    nc, js = handles
    handle = HANDLES[kind](nc, js)
    try:
        with pytest.raises(errors.ClientNotPicklableError) as info:
            pickle.dumps(handle)
        assert isinstance(info.value, TypeError)  # what pickle's own refusals are
        assert type(handle).__name__ in str(info.value)
        _says_what_to_do(info.value)
    finally:
        for stop in ("stop", "unsubscribe"):
            if kind not in ("client", "jetstream") and hasattr(handle, stop):
                getattr(handle, stop)()
                break


def _connect_and_publish(url: str, subject: str) -> None:
    """In a spawned process: the right way, a client of its own from the URL."""
    with jetstream_sync.connect(url) as nc:
        nc.jetstream().publish(subject, b"from the child")


def _use_client(nc: Any) -> None:
    """Never runs: the client cannot reach the child."""
    nc.publish("pickle.never", b"")


def test_a_spawned_process_given_a_client_fails_in_the_parent_with_the_fix(handles, nats_server):
    nc, js = handles
    context = multiprocessing.get_context("spawn")
    with pytest.raises(errors.ClientNotPicklableError) as info:
        context.Process(target=_use_client, args=(nc,)).start()
    _says_what_to_do(info.value)
    with context.Pool(1) as pool:
        with pytest.raises(errors.ClientNotPicklableError):
            pool.apply_async(_use_client, (nc,)).get(timeout=60)
        # what the message says to do works: the child connects with the URL it was given
        before = js.stream_info("PICKLE").state.messages
        pool.apply_async(_connect_and_publish, (nats_server.url, "pickle.child")).get(timeout=60)
    assert js.stream_info("PICKLE").state.messages == before + 1
    assert js.stream("PICKLE").get_last_msg("pickle.child").data == b"from the child"


def test_a_received_message_says_to_pass_its_data_and_ack_here(js, stream):
    """Before, pickling a received Msg failed on the client's internals ("a jetstream_sync Runtime")."""
    js.publish(f"{stream.name}.a", b"job", headers={"Trace": "t-1"})
    msg = next(iter(stream.ordered_consumer().fetch(1, expires=5)))
    with pytest.raises(errors.ClientNotPicklableError, match=r"pass msg\.data, msg\.subject and msg\.headers"):
        pickle.dumps(msg)
    unbound = jetstream_sync.Msg(msg.subject, "", msg.data, None, None)  # made here, not received: plain data
    assert pickle.loads(pickle.dumps(unbound)).data == b"job"
