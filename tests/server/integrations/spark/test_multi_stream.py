"""Several streams in one query, as Kafka's ``subscribe`` takes several topics: ``option("stream", "A,B")``."""

from __future__ import annotations

import pytest

pytest.importorskip("pyarrow")
pytest.importorskip("pyspark", minversion="4.2")

from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

from jetstream_sync import errors
from jetstream_sync.spark import READ_SCHEMA, JetStreamDataSource
from tests.server.integrations.spark.helpers import publish, run_available_now, source, stream_source

pytestmark = pytest.mark.spark


def rows_of(reader, start: dict, end: dict) -> list[tuple[str, int]]:
    return sorted(
        (stream, seq)
        for partition in reader.partitions(start, end)
        for batch in reader.read(partition)
        for stream, seq in zip(batch.column("stream").to_pylist(), batch.column("seq").to_pylist(), strict=True)
    )


def test_a_query_over_two_streams_keeps_an_offset_per_stream(nats_server, js, new_stream):
    a, b = new_stream(), new_stream()
    publish(js, a.name, 5)
    publish(js, b.name, 3)
    reader = JetStreamDataSource(
        {
            "servers": nats_server.url,
            "stream": f"{a.name}, {b.name}",
            "startingSequence": "earliest",
            "pollInterval": "0",
        }
    ).streamReader(READ_SCHEMA)
    start = reader.initialOffset()
    assert {name: offset["seq"] for name, offset in start["streams"].items()} == {a.name: 1, b.name: 1}
    end = reader.latestOffset(start, ReadAllAvailable())
    assert rows_of(reader, start, end) == sorted(
        [(a.name, s) for s in range(1, 6)] + [(b.name, s) for s in range(1, 4)]
    )
    assert reader.latestOffset(end, ReadAllAvailable()) == end  # nothing new anywhere: no batch
    publish(js, b.name, 10, start=3)
    limited = reader.latestOffset(end, ReadMaxRows(8))  # shared out: at most 4 sequences per stream
    assert rows_of(reader, end, limited) == [(b.name, s) for s in range(4, 8)]
    reader.commit(limited)


def test_a_checkpoint_of_one_stream_does_not_load_into_a_query_of_two(nats_server, js, new_stream):
    a, b = new_stream(), new_stream()
    reader = JetStreamDataSource({"servers": nats_server.url, "stream": f"{a.name},{b.name}"}).streamReader(READ_SCHEMA)
    with pytest.raises(errors.JetStreamError, match="new checkpointLocation"):
        reader.latestOffset({"stream": a.name, "seq": 1}, ReadAllAvailable())


def test_streaming_and_batch_reads_of_two_streams_read_each_message_once(spark, nats_server, js, new_stream, tmp_path):
    a, b = new_stream(), new_stream()
    publish(js, a.name, 120)
    publish(js, b.name, 80)
    collected: list[tuple[str, int]] = []

    def build():
        events = stream_source(
            spark, nats_server.url, f"{a.name},{b.name}", startingSequence="earliest", maxMessagesPerTrigger=100
        )
        return events.writeStream.foreachBatch(
            lambda df, _: collected.extend((r.stream, r.seq) for r in df.select("stream", "seq").collect())
        ).option("checkpointLocation", str(tmp_path / "ckpt"))

    run_available_now(build())
    publish(js, b.name, 20, start=80)
    run_available_now(build())
    expected = sorted([(a.name, s) for s in range(1, 121)] + [(b.name, s) for s in range(1, 101)])
    assert sorted(collected) == expected
    both = source(spark, nats_server.url, f"{a.name},{b.name}")
    assert sorted((r.stream, r.seq) for r in both.select("stream", "seq").collect()) == expected
