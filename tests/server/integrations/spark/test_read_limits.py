"""The Kafka-like read options of the ``jetstream`` source, driven call by call as Spark's planning worker does:
minMessagesPerTrigger with maxTriggerDelay, maxBytesPerTrigger, endingTime and startingTimeStrategy."""

from __future__ import annotations

import datetime as dt
import time

import pytest

pytest.importorskip("pyarrow")
pytest.importorskip("pyspark", minversion="4.2")

from pyspark.sql.streaming.datasource import ReadAllAvailable

from jetstream_sync import errors
from jetstream_sync.spark import READ_SCHEMA, JetStreamDataSource, parse_read_options
from tests.helpers import wait_until
from tests.server.integrations.spark.helpers import publish, run_available_now, stream_source

pytestmark = pytest.mark.spark


def options(url: str, stream: str, **given: object) -> dict[str, str]:
    return {"servers": url, "stream": stream, **{k: str(v) for k, v in given.items()}}


def test_min_messages_per_trigger_holds_a_batch_back_until_enough_arrived_or_the_delay_passed(
    nats_server, js, new_stream
):
    stream = new_stream()
    reader = JetStreamDataSource(
        options(
            nats_server.url,
            stream.name,
            startingSequence="earliest",
            minMessagesPerTrigger=10,
            maxTriggerDelay=1.5,
            pollInterval=0,
        )
    ).streamReader(READ_SCHEMA)
    start = reader.initialOffset()
    publish(js, stream.name, 4)
    assert reader.latestOffset(start, ReadAllAvailable()) == start  # 4 < 10: wait
    publish(js, stream.name, 6, start=4)
    end = reader.latestOffset(start, ReadAllAvailable())
    assert (end["from"], end["seq"]) == (1, 11)  # 10 arrived: a batch
    publish(js, stream.name, 3, start=10)
    held_at = time.monotonic()
    assert reader.latestOffset(end, ReadAllAvailable()) == end
    planned: list[dict] = []
    wait_until(lambda: planned.append(reader.latestOffset(end, ReadAllAvailable())) or planned[-1] != end, timeout=10)
    assert time.monotonic() - held_at >= 1.0  # held back until maxTriggerDelay passed since the last batch
    assert (planned[-1]["from"], planned[-1]["seq"]) == (11, 14)


def test_max_bytes_per_trigger_is_a_soft_limit_at_the_average_message_size(nats_server, js, new_stream):
    stream = new_stream()
    for _ in range(100):
        js.publish_async(f"{stream.name}.a", b"x" * 1000)
    js.publish_async_complete(timeout=30)
    per_message = stream.info().state.bytes / 100
    reader = JetStreamDataSource(
        options(nats_server.url, stream.name, startingSequence="earliest", maxBytesPerTrigger=int(per_message * 25))
    ).streamReader(READ_SCHEMA)
    start = reader.initialOffset()
    end = reader.latestOffset(start, ReadAllAvailable())
    assert end["seq"] - end["from"] == 25
    tiny = JetStreamDataSource(
        options(nats_server.url, stream.name, startingSequence="earliest", maxBytesPerTrigger=1)
    ).streamReader(READ_SCHEMA)
    first = tiny.initialOffset()
    assert tiny.latestOffset(first, ReadAllAvailable())["seq"] == 2  # never less than one message


def test_ending_time_ends_a_batch_read_before_the_first_message_stored_at_or_after_it(nats_server, js, new_stream):
    stream = new_stream()
    publish(js, stream.name, 5)
    wait_until(lambda: dt.datetime.now(dt.timezone.utc) > stream.info().state.last_ts, timeout=5)
    cut = dt.datetime.now(dt.timezone.utc)
    wait_until(lambda: dt.datetime.now(dt.timezone.utc) > cut, timeout=5)
    publish(js, stream.name, 5, start=5)
    reader = JetStreamDataSource(options(nats_server.url, stream.name, endingTime=cut.isoformat())).reader(READ_SCHEMA)
    assert [(p.first, p.last) for p in reader.partitions()] == [(1, 5)]


def test_a_starting_time_past_the_end_starts_at_the_next_message_or_fails_with_strategy_error(
    nats_server, js, new_stream
):
    stream = new_stream()
    publish(js, stream.name, 3)
    later = (dt.datetime.now(dt.timezone.utc) + dt.timedelta(hours=1)).isoformat()
    reader = JetStreamDataSource(options(nats_server.url, stream.name, startingTime=later)).streamReader(READ_SCHEMA)
    assert reader.initialOffset()["seq"] == 4
    strict = JetStreamDataSource(
        options(nats_server.url, stream.name, startingTime=later, startingTimeStrategy="error")
    ).streamReader(READ_SCHEMA)
    with pytest.raises(errors.InvalidArgumentError, match="startingTimeStrategy=latest"):
        strict.initialOffset()


@pytest.mark.parametrize(
    ("given", "streaming", "named"),
    [
        ({"minMessagesPerTrigger": "10"}, False, "minMessagesPerTrigger"),
        ({"maxBytesPerTrigger": "0"}, True, "maxBytesPerTrigger"),
        ({"minMessagesPerTrigger": "10", "maxMessagesPerTrigger": "5"}, True, "minMessagesPerTrigger"),
        ({"maxTriggerDelay": "5"}, True, "maxTriggerDelay"),
        ({"minMessagesPerTrigger": "1", "maxTriggerDelay": "0"}, True, "maxTriggerDelay"),
        ({"pollInterval": "-1"}, True, "pollInterval"),
        ({"pollInterval": "1"}, False, "pollInterval"),
        ({"endingTime": "2025-01-01T00:00:00Z"}, True, "endingTime"),
        ({"endingTime": "2025-01-01T00:00:00Z", "endingSequence": "5"}, False, "endingTime"),
        ({"endingTime": "2025-01-01T00:00:00Z", "startingTime": "2025-02-01T00:00:00Z"}, False, "endingTime"),
        ({"startingTimeStrategy": "earliest"}, True, "startingTimeStrategy"),
    ],
)
def test_bad_read_limit_options_name_the_option(given, streaming, named):
    with pytest.raises(errors.InvalidArgumentError) as failure:
        parse_read_options({"servers": "nats://127.0.0.1:4222", "stream": "S", **given}, streaming=streaming)
    assert failure.value.field == named


def test_a_progress_consumer_shows_the_query_lag_to_operators(spark, nats_server, js, new_stream, tmp_path):
    """progressConsumer: a durable consumer moved to each commit, so `nats consumer info` shows what the query
    has not committed yet (its num_pending); the checkpoint stays the truth."""
    stream = new_stream()
    publish(js, stream.name, 250)
    collected: list[int] = []

    def build():
        events = stream_source(
            spark,
            nats_server.url,
            stream.name,
            startingSequence="earliest",
            maxMessagesPerTrigger=100,
            progressConsumer="spark-progress",
        )
        return events.writeStream.foreachBatch(lambda df, _: collected.extend(r.seq for r in df.collect())).option(
            "checkpointLocation", str(tmp_path / "ckpt")
        )

    run_available_now(build())
    # Spark tells a source that a batch is committed when it plans the next one: the consumer trails by a batch
    info = stream.consumer("spark-progress").info()
    assert (info.num_pending, info.delivered.stream_seq) == (50, 200)
    assert info.config.durable_name == "spark-progress"
    publish(js, stream.name, 20, start=250)
    assert stream.consumer("spark-progress").info().num_pending == 70  # the lag, before the query runs again
    run_available_now(build())
    assert sorted(collected) == list(range(1, 271))
    info = stream.consumer("spark-progress").info()
    assert (info.num_pending, info.delivered.stream_seq) == (20, 250)
