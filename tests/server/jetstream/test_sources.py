"""Mirrors and sources against a real server, built from the typed models (and from dicts, as before), and
read back typed from the stream's info; who leads a stream or consumer on a single, non-clustered server."""

from __future__ import annotations

import pytest

from jetstream_sync import (
    ConsumerConfig,
    StreamConfig,
    StreamSource,
    StreamSourceInfo,
    SubjectTransform,
    errors,
)
from tests.helpers import wait_until


def _caught_up(js, stream: str, messages: int) -> bool:
    info = js.stream_info(stream)
    behind = [source.lag for source in [info.mirror, *(info.sources or [])] if source is not None]
    return info.state.messages == messages and not any(behind)


def test_a_mirror_copies_its_origin(js, name):
    js.create_stream(StreamConfig(name=name, subjects=[f"{name}.>"]))
    mirror = js.create_stream(StreamConfig(name=name + "_M", mirror=StreamSource(name=name)))
    for i in range(5):
        js.publish(f"{name}.{i}", b"%d" % i)
    wait_until(lambda: _caught_up(js, mirror.name, 5), timeout=10)

    info = mirror.info()
    assert info.config.mirror == StreamSource(name=name)
    assert info.config.subjects == []
    assert isinstance(info.mirror, StreamSourceInfo)
    assert (info.mirror.name, info.mirror.lag, info.mirror.error) == (name, 0, None)
    assert info.mirror.active is not None and info.mirror.active >= 0
    assert info.sources is None
    assert mirror.get_msg(5).subject == f"{name}.4"


def test_sources_with_a_filter_and_with_transforms(js, name):
    js.create_stream(StreamConfig(name=name, subjects=[f"{name}.>"]))
    europe = StreamSource(name=name, filter_subject=f"{name}.eu.>")
    america = StreamSource(name=name, subject_transforms=[SubjectTransform(src=f"{name}.us.>", dest=f"agg.{name}.>")])
    agg = js.create_stream(StreamConfig(name=name + "_AGG", sources=[europe, america]))
    for subject in ("eu.1", "eu.2", "us.1", "asia.1", "us.2"):
        js.publish(f"{name}.{subject}", subject.encode())
    wait_until(lambda: _caught_up(js, agg.name, 4), timeout=10)

    info = agg.info()
    assert info.config.sources == [europe, america]
    assert info.sources is not None and all(isinstance(source, StreamSourceInfo) for source in info.sources)
    assert [source.name for source in info.sources] == [name, name]
    assert {source.filter_subject for source in info.sources} == {f"{name}.eu.>", None}
    transforms = [source.subject_transforms for source in info.sources if source.subject_transforms]
    assert transforms == [[SubjectTransform(src=f"{name}.us.>", dest=f"agg.{name}.>")]]
    assert all(source.lag == 0 and source.error is None for source in info.sources)
    subjects = {agg.get_msg(seq).subject for seq in range(1, 5)}
    assert subjects == {f"{name}.eu.1", f"{name}.eu.2", f"agg.{name}.1", f"agg.{name}.2"}


def test_a_mirror_given_as_a_dict_is_the_same_stream(js, name):
    js.create_stream(StreamConfig(name=name, subjects=[f"{name}.>"]))
    start = js.publish(f"{name}.a", b"skipped").seq + 1
    js.publish(f"{name}.b", b"kept")
    mirror = js.create_stream(StreamConfig(name=name + "_M", mirror={"name": name, "opt_start_seq": start}))
    wait_until(lambda: _caught_up(js, mirror.name, 1), timeout=10)
    assert mirror.info().config.mirror == StreamSource(name=name, opt_start_seq=start)
    assert mirror.get_msg(start).data == b"kept"


def test_a_mirror_of_a_missing_stream_reports_why(js, name):
    mirror = js.create_stream(StreamConfig(name=name, mirror=StreamSource(name=name + "_NONE")))
    wait_until(lambda: mirror.info().mirror.error is not None, timeout=10)
    reported = mirror.cached_info.mirror
    assert reported is not None and reported.active is None  # never heard from it
    assert isinstance(reported.api_error, errors.StreamNotFoundError)


def test_a_rule_the_server_also_enforces_is_refused_before_sending(js, name):
    js.create_stream(StreamConfig(name=name, subjects=[f"{name}.>"]))
    with pytest.raises(errors.InvalidArgumentError) as info:
        StreamConfig(name=name + "_M", subjects=[f"{name}_M.>"], mirror=StreamSource(name=name))
    assert info.value.field == "subjects"
    # what the rule stands for: the server refuses the same config (sent as a dict past the check)
    with pytest.raises(errors.APIError, match="mirrors can not contain subjects"):
        js.api.request(
            f"STREAM.CREATE.{name}_M", {"name": name + "_M", "subjects": [f"{name}_M.>"], "mirror": {"name": name}}
        )


def test_no_leader_without_a_cluster(client, js, name):
    stream = js.create_stream(StreamConfig(name=name, subjects=[f"{name}.>"]))
    pull = stream.create_consumer(ConsumerConfig(durable_name="pull"))
    push = stream.create_push_consumer(ConsumerConfig(durable_name="push", deliver_subject=f"_deliver.{name}"))
    assert stream.leader() is None
    assert pull.leader() is None
    assert push.leader() is None
    # what the server reports: the stream names this server as its leader, under no cluster name; consumers
    # report no cluster at all
    cluster = stream.cached_info.cluster
    assert cluster is not None
    assert (cluster.name, cluster.leader, cluster.replicas) == (None, client.server_info["server_name"], [])
    assert pull.cached_info.cluster is None and push.cached_info.cluster is None
