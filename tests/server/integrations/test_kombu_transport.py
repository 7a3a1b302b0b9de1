"""The kombu transport's own behaviour beyond kombu's suite: a purge that leaves the queue's readers alone, and
a rejected message that goes to the dead-letter stream. Real nats-server, real kombu connections."""

from __future__ import annotations

import itertools
import threading
from typing import Any

import kombu
import pytest

import jetstream_sync
import jetstream_sync.integrations.kombu
from jetstream_sync.integrations.kombu._delivery import Quota
from tests.helpers import wait_until

_numbers = itertools.count()


@pytest.fixture
def options() -> dict[str, Any]:
    n = next(_numbers)
    return {"stream": f"KOMBU_T{n}", "prefix": f"kombut{n}"}


def _connection(server: Any, options: dict[str, Any]) -> kombu.Connection:
    return kombu.Connection(f"jetstream://127.0.0.1:{server.port}", transport_options=options)


def test_a_purge_leaves_the_queues_readers_consuming(nats_server, options):
    """AMQP's purge removes the ready messages; the consumer reading the queue goes on (its waiting pull is not
    ended), keeps the message it holds, and gets what is published after the purge."""
    received: list[kombu.Message] = []
    with _connection(nats_server, options) as reader, _connection(nats_server, options) as other:
        queue = kombu.Queue("work", kombu.Exchange("work", type="direct"), routing_key="work")
        with reader.Consumer([queue], callbacks=[lambda _body, message: received.append(message)]) as consumer:
            consumer.qos(prefetch_count=1)
            producer = other.Producer()
            for n in range(4):
                producer.publish({"n": n}, exchange=queue.exchange, routing_key="work", declare=[queue])
            reader.drain_events(timeout=10)
            assert [m.payload["n"] for m in received] == [0]
            assert queue.bind(other).purge() == 3  # 1, 2 and 3 were ready; 0 is held by the reader
            assert queue.bind(other).queue_declare(passive=True).message_count == 0
            received[0].ack()
            with jetstream_sync.connect(nats_server.url) as nc:  # the reader's next pull waits at the server
                js = nc.jetstream()
                wait_until(lambda: js.consumer_info(options["stream"], "work").num_waiting == 1, timeout=10)
            assert queue.bind(other).purge() == 0
            producer.publish({"n": "after"}, exchange=queue.exchange, routing_key="work")
            reader.drain_events(timeout=10)  # the purge that deleted the consumer ended the pull: raised here
            assert [m.payload["n"] for m in received] == [0, "after"]
            received[1].ack()


def test_reject_without_requeue_goes_to_the_dead_letter_stream(nats_server, options):
    received: list[kombu.Message] = []
    with _connection(nats_server, options) as conn:
        queue = kombu.Queue("jobs", kombu.Exchange("jobs", type="direct"), routing_key="jobs")
        with conn.Consumer([queue], callbacks=[lambda _body, message: received.append(message)]):
            conn.Producer().publish({"job": 1}, exchange=queue.exchange, routing_key="jobs", declare=[queue])
            conn.drain_events(timeout=10)
            received[0].reject(requeue=False)
            with jetstream_sync.connect(nats_server.url) as nc:
                js = nc.jetstream()
                dead = f"{options['stream']}_DEAD"
                wait_until(lambda: _messages(js, dead) == 1, timeout=10)
                moved = js.stream(dead).get_last_msg(f"{options['prefix']}-dead.jobs")
                assert moved.data == received[0].body
                assert moved.headers["Dead-Letter-Reason"] == "rejected"
                assert moved.headers["Dead-Letter-Consumer"] == "jobs"
                assert js.stream_info(options["stream"]).state.messages == 0


def _messages(js: jetstream_sync.JetStream, stream: str) -> int:
    try:
        return js.stream_info(stream).state.messages
    except jetstream_sync.errors.StreamNotFoundError:
        return 0


def test_two_publishes_of_one_celery_task_id_are_both_delivered_and_a_retry_is_stored_once(nats_server, options):
    """Celery sends two messages with one task id when a task is replaced (its id goes to the replacement's
    last task): both must arrive. A publish kombu retries (the same properties dict) is stored once."""
    with _connection(nats_server, options) as conn:
        queue = kombu.Queue("tasks", kombu.Exchange("tasks", type="direct"), routing_key="tasks")
        producer = conn.Producer()
        for n in range(2):
            producer.publish({"n": n}, exchange=queue.exchange, routing_key="tasks", declare=[queue],
                             headers={"id": "same-task-id", "task": "t.replaced", "retries": 0})  # fmt: skip
        channel = conn.default_channel
        message = channel.prepare_message(
            b'{"n": 2}', content_type="application/json", content_encoding="utf-8", properties={"delivery_mode": 2}
        )
        channel.basic_publish(message, "tasks", "tasks")
        channel.basic_publish(message, "tasks", "tasks")  # kombu's retry: the same message, the same properties
        simple = conn.SimpleQueue(queue)
        bodies = [simple.get(timeout=10) for _ in range(3)]
        for each in bodies:
            each.ack()
        assert sorted(m.payload["n"] for m in bodies) == [0, 1, 2]
        assert queue.bind(conn).queue_declare(passive=True).message_count == 0


def test_a_puller_pulls_when_half_its_share_is_free():
    """One freed place of a prefetch of 8 is not pulled alone (a pull per message); four are, at once; with a
    prefetch of 1 the freed place is pulled at once."""
    used = [7]
    quota = Quota(lambda: used[0], unlimited=1000, batch=100)
    quota.set_prefetch(8)
    quota.joined(1)
    stopped = threading.Event()
    got: list[int] = []
    puller = threading.Thread(target=lambda: got.append(quota.reserve(stopped)))
    puller.start()
    puller.join(0.3)
    assert puller.is_alive() and got == []  # 1 of 8 free: waits
    used[0] = 4
    quota.changed()
    puller.join(5)
    assert got == [4]
    quota.release(4)
    quota.set_prefetch(1)
    used[0] = 0
    assert quota.reserve(stopped) == 1


def test_what_arrived_first_on_any_channel_is_delivered_first(nats_server, options):
    """Celery's worker reads tasks on one channel and remote control (a revoke) on another of the same
    connection: what arrived first is handed to kombu first, whichever channel was opened first."""
    received: list[str] = []
    with _connection(nats_server, options) as conn, _connection(nats_server, options) as other:
        tasks = kombu.Queue("tasks", kombu.Exchange("tasks", type="direct"), routing_key="tasks")
        control = kombu.Queue("control", kombu.Exchange("control", type="direct"), routing_key="control")
        first, second = conn.channel(), conn.channel()
        callback = lambda body, message: (received.append(body["q"]), message.ack())  # noqa: E731
        with (
            kombu.Consumer(first, [tasks], callbacks=[callback]),
            kombu.Consumer(second, [control], callbacks=[callback]),
        ):
            producer = other.Producer()
            producer.publish({"q": "control"}, exchange=control.exchange, routing_key="control", declare=[control])
            wait_until(lambda: len(second.inbox) == 1, timeout=10)  # arrived before the task is published
            producer.publish({"q": "tasks"}, exchange=tasks.exchange, routing_key="tasks", declare=[tasks])
            wait_until(lambda: len(first.inbox) == 1, timeout=10)
            while len(received) < 2:
                conn.drain_events(timeout=10)
            assert received == ["control", "tasks"]
