"""The streaming source's offsets keep a query from skipping data: a stable start for batch 0, re-created streams
as data loss, and an idle query that leaves the server alone (issue 36, items 1, 2 and 4)."""

from __future__ import annotations

import json
import threading
import time
import urllib.request

import pytest

pytest.importorskip("pyarrow")
pytest.importorskip("pyspark", minversion="4.2")

from pyspark.errors import PySparkException
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

from jetstream_sync import StreamConfig
from jetstream_sync.spark import READ_SCHEMA, DataLossError, JetStreamDataSource, StreamRecreatedError
from tests.helpers import wait_until
from tests.server.integrations.spark.helpers import publish, run_available_now, stream_source

pytestmark = pytest.mark.spark

_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def stream_reader(url: str, stream: str, **options: object):
    """The streaming reader Spark would make, driven here call by call as Spark's planning worker does."""
    given = {"servers": url, "stream": stream, **{k: str(v) for k, v in options.items()}}
    return JetStreamDataSource(given).streamReader(READ_SCHEMA)


def batch_rows(reader, start: dict, end: dict) -> list[int]:
    """What a micro-batch from ``start`` to ``end`` reads, partition by partition, as an executor would."""
    return [
        seq
        for partition in reader.partitions(start, end)
        for batch in reader.read(partition)
        for seq in batch.column("seq").to_pylist()
    ]


def api_requests(server) -> int:
    """The server's count of JetStream API requests so far (``/jsz``)."""
    with _DIRECT.open(f"{server.monitor_url}/jsz", timeout=5) as response:
        return int(json.load(response)["api"]["total"])


# -- 1: batch 0 reads from where the query started ----------------------------------------------------------------


def test_batch_0_of_a_query_at_latest_reads_from_where_the_query_started(nats_server, js, new_stream):
    """Spark asks a new query's initial offset to plan batch 0 and again to run it, and again after a driver
    restart before batch 0 commits; messages arriving in between must not move batch 0's start."""
    stream = new_stream()
    publish(js, stream.name, 5)
    reader = stream_reader(nats_server.url, stream.name, pollInterval=0)
    initial = reader.initialOffset()
    assert initial["seq"] == 6
    publish(js, stream.name, 10, start=5)  # 6..15
    end = reader.latestOffset(initial, ReadAllAvailable())
    publish(js, stream.name, 10, start=15)  # 16..25 arrive before batch 0 runs
    assert reader.initialOffset() == initial  # asked again to run batch 0: the same answer
    assert batch_rows(reader, reader.initialOffset(), end) == list(range(6, 16))
    restarted = stream_reader(nats_server.url, stream.name, pollInterval=0)  # the end comes from the offset log
    assert batch_rows(restarted, restarted.initialOffset(), end) == list(range(6, 16))
    assert restarted.initialOffset()["seq"] == 26  # a new run starts anew; batch 0 kept its planned start
    assert (end["seq"], end["from"]) == (16, 6)
    following = restarted.latestOffset(end, ReadMaxRows(4))
    assert (following["from"], following["seq"]) == (16, 20)
    assert batch_rows(restarted, end, following) == [16, 17, 18, 19]


def test_a_query_at_latest_under_steady_publishing_reads_every_message_from_its_start(
    spark, nats_server, js, new_stream, tmp_path
):
    """End to end: a publisher never stops while the query starts; the query's first batch starts where its
    end offset says it was planned from, and nothing after that is missing."""
    stream = new_stream()
    stop = threading.Event()
    published = [0]

    def publisher() -> None:
        while not stop.is_set():
            js.publish(f"{stream.name}.a", b"x")
            published[0] += 1

    thread = threading.Thread(target=publisher, daemon=True)
    thread.start()
    collected: list[int] = []
    query = (
        stream_source(spark, nats_server.url, stream.name)
        .writeStream.foreachBatch(lambda df, _: collected.extend(r.seq for r in df.select("seq").collect()))
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .start()
    )
    try:
        wait_until(lambda: len(collected) > 200, timeout=60)
        stop.set()
        thread.join(10)
        wait_until(lambda: bool(collected) and max(collected) == published[0], timeout=60)
        progress = [p for p in query.recentProgress if p["numInputRows"] > 0]
    finally:
        stop.set()
        query.stop()
    first_end = json.loads(progress[0]["sources"][0]["endOffset"])
    assert min(collected) == first_end["from"]
    assert sorted(collected) == list(range(first_end["from"], published[0] + 1))


# -- 2: a stream re-created under the checkpoint -----------------------------------------------------------------


@pytest.mark.parametrize("new_messages", [500, 100], ids=["more-than-read", "fewer-than-read"])
def test_a_stream_recreated_under_the_checkpoint_is_data_loss(
    spark, nats_server, js, new_stream, tmp_path, new_messages
):
    """Sequences of the old stream mean nothing in the new one: the query fails naming both creation times, or
    with failOnDataLoss=false reads the new stream from its first sequence."""
    stream = new_stream()
    publish(js, stream.name, 300)
    collected: list[int] = []

    def build(fail: str):
        events = stream_source(spark, nats_server.url, stream.name, startingSequence="earliest", failOnDataLoss=fail)
        return events.writeStream.foreachBatch(lambda df, _: collected.extend(r.seq for r in df.collect())).option(
            "checkpointLocation", str(tmp_path / "ckpt")
        )

    run_available_now(build("true"))
    assert sorted(collected) == list(range(1, 301))
    old_created = stream.cached_info.created.isoformat()
    js.delete_stream(stream.name)
    again = js.create_stream(StreamConfig(name=stream.name, subjects=[f"{stream.name}.>"], allow_direct=True))
    new_created = again.cached_info.created.isoformat()
    publish(js, stream.name, new_messages)
    with pytest.raises(PySparkException, match="was deleted and created again") as failure:
        run_available_now(build("true"))
    message = str(failure.value)
    assert old_created in message and new_created in message
    assert "new checkpointLocation" in message and "failOnDataLoss=false" in message
    assert sorted(collected) == list(range(1, 301))
    run_available_now(build("false"))
    assert sorted(collected) == sorted([*range(1, 301), *range(1, new_messages + 1)])


def test_a_batch_planned_on_a_stream_since_recreated_is_not_read_from_the_new_one(nats_server, js, new_stream):
    """The executors check the incarnation too: a range planned before the stream was re-created fails to read."""
    stream = new_stream()
    publish(js, stream.name, 20)
    reader = stream_reader(nats_server.url, stream.name, startingSequence="earliest", pollInterval=0)
    start = reader.initialOffset()
    end = reader.latestOffset(start, ReadAllAvailable())
    planned = reader.partitions(start, end)
    js.delete_stream(stream.name)
    js.create_stream(StreamConfig(name=stream.name, subjects=[f"{stream.name}.>"], allow_direct=True))
    publish(js, stream.name, 20)
    with pytest.raises(StreamRecreatedError, match="failOnDataLoss=false"):
        list(reader.read(planned[0]))
    with pytest.raises(StreamRecreatedError):
        reader.partitions(start, end)
    lenient = stream_reader(
        nats_server.url, stream.name, startingSequence="earliest", pollInterval=0, failOnDataLoss="false"
    )
    assert list(lenient.read(planned[0])) == []
    assert lenient.partitions(start, end) == []
    moved = lenient.latestOffset(end, ReadAllAvailable())
    assert (moved["from"], moved["seq"]) == (1, 21)
    assert batch_rows(lenient, end, moved) == list(range(1, 21))


# -- 4: an idle query leaves the server alone ---------------------------------------------------------------------


def test_an_idle_query_makes_at_most_5_api_requests_a_second_and_still_sees_new_messages(
    spark, nats_server, js, new_stream, tmp_path
):
    stream = new_stream()
    publish(js, stream.name, 10)
    collected: list[int] = []
    query = (
        stream_source(spark, nats_server.url, stream.name)  # the default trigger: Spark polls every 10 ms
        .writeStream.foreachBatch(lambda df, _: collected.extend(r.seq for r in df.select("seq").collect()))
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .start()
    )
    try:
        wait_until(lambda: query.status["message"] == "Waiting for data to arrive", timeout=60)
        before, started = api_requests(nats_server), time.monotonic()
        time.sleep(5)  # the measured window, not a synchronisation
        rate = (api_requests(nats_server) - before) / (time.monotonic() - started)
        assert rate <= 5, f"an idle query made {rate:.1f} JetStream API requests a second"
        publish(js, stream.name, 20, start=10)
        wait_until(lambda: sorted(collected) == list(range(11, 31)), timeout=30)
    finally:
        query.stop()


def test_a_busy_query_makes_about_one_api_request_per_trigger(spark, nats_server, js, new_stream, tmp_path):
    """Each trigger asks for the stream's end once; the executors read their ranges without asking again
    (before: one STREAM.INFO per partition as well, about 7 requests per trigger with 4 partitions)."""
    stream = new_stream()
    stop = threading.Event()

    def publisher() -> None:
        while not stop.is_set():
            for _ in range(100):
                js.publish_async(f"{stream.name}.a", b"x")
            js.publish_async_complete(timeout=10)
            stop.wait(0.05)

    thread = threading.Thread(target=publisher, daemon=True)
    thread.start()
    query = (
        stream_source(spark, nats_server.url, stream.name, numPartitions=4, minPartitionSize=10)
        .writeStream.format("noop")
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(processingTime="1 second")
        .start()
    )
    try:

        def busy_triggers() -> int:
            return sum(1 for p in query.recentProgress if p["numInputRows"] > 0)

        wait_until(lambda: busy_triggers() >= 2, timeout=60)
        before_triggers, before = len(query.recentProgress), api_requests(nats_server)
        wait_until(lambda: len(query.recentProgress) >= before_triggers + 6, timeout=60)
        triggers, requests = len(query.recentProgress) - before_triggers, api_requests(nats_server) - before
        assert sum(p["numInputRows"] for p in query.recentProgress[before_triggers:]) > 0  # busy ones
        assert requests <= 2 * triggers, f"{requests} JetStream API requests in {triggers} triggers"
    finally:
        stop.set()
        thread.join(10)
        query.stop()


def test_retention_between_planning_and_reading_is_data_loss_and_deleted_messages_are_not(nats_server, js, new_stream):
    """An executor trusts the plan only while the messages agree with it: a range whose first messages were
    purged after planning fails (or skips them with failOnDataLoss=false); one whose first message was deleted
    reads the rest."""
    stream = new_stream()
    publish(js, stream.name, 30)
    readers = {
        fail: stream_reader(nats_server.url, stream.name, startingSequence=5, pollInterval=0, failOnDataLoss=fail)
        for fail in ("true", "false")
    }
    plans = {}
    for fail, reader in readers.items():
        start = reader.initialOffset()
        plans[fail] = reader.partitions(start, reader.latestOffset(start, ReadAllAvailable()))
        assert [(p.first, p.last) for p in plans[fail]] == [(5, 30)]

    def read(fail: str) -> list[int]:
        return [s for b in readers[fail].read(plans[fail][0]) for s in b.column("seq").to_pylist()]

    stream.delete_msg(5)  # a deleted message is not data loss
    assert read("true") == list(range(6, 31))
    stream.purge(sequence=11)  # retention took 1..10 after the plan
    with pytest.raises(DataLossError, match=r"sequences 5-10 were removed"):
        read("true")
    assert read("false") == list(range(11, 31))
