"""What a stream's info can add on request (``subjects_filter``: per-subject counts, every page of them;
``deleted_details``: the deleted sequences), and getting the next message on a subject (``next_by_subj``), by the
stream leader and by direct get, against a real server."""

from __future__ import annotations

import json

import pytest

import jetstream_sync
from jetstream_sync import StreamConfig, errors
from jetstream_sync.testing import EmbeddedServer
from tests.helpers import wait_until


@pytest.fixture
def orders(js, name):
    """A stream holding, in order: o.eu.1, o.us.1, o.eu.2, o.eu.1, o.asia.1 (sequences 1-5)."""
    stream = js.create_stream(StreamConfig(name=name, subjects=[f"{name}.>"]))
    for subject in ("o.eu.1", "o.us.1", "o.eu.2", "o.eu.1", "o.asia.1"):
        js.publish(f"{name}.{subject}", subject.encode())
    return stream


def test_subject_counts_for_a_filter(js, name, orders):
    assert orders.info().state.subjects is None  # not asked for: not sent
    info = orders.info(subjects_filter=f"{name}.o.eu.*")
    assert info.state.subjects == {f"{name}.o.eu.1": 2, f"{name}.o.eu.2": 1}
    assert orders.cached_info.state.subjects is None  # details are not kept
    assert orders.cached_info.state.messages == 5
    everything = js.stream_info(name, subjects_filter=">")
    assert sum(everything.state.subjects.values()) == 5 and len(everything.state.subjects) == 4
    assert js.stream_info(name, subjects_filter=f"{name}.none.>").state.subjects == {}  # asked: none match


def test_the_deleted_sequences(js, name, orders):
    orders.delete_msg(2)
    orders.delete_msg(4)
    plain = orders.info()
    assert (plain.state.num_deleted, plain.state.deleted) == (2, None)
    detailed = js.stream_info(name, deleted_details=True, subjects_filter=f"{name}.o.eu.1")
    assert detailed.state.deleted == [2, 4]
    assert detailed.state.subjects == {f"{name}.o.eu.1": 1}
    assert orders.info(deleted_details=True).state.deleted == [2, 4]
    assert orders.cached_info.state.deleted is None


def test_bad_detail_arguments_are_refused_before_sending(js, name, orders):
    with pytest.raises(errors.InvalidArgumentError) as bad:
        orders.info(subjects_filter=f"{name}..x")
    assert bad.value.field == "subjects_filter"
    with pytest.raises(errors.InvalidTypeError) as typed:
        js.stream_info(name, deleted_details="yes")
    assert typed.value.field == "deleted_details"
    with pytest.raises(errors.InvalidArgumentError):
        js.stream_info("bad.name", subjects_filter=">")


def test_subject_counts_past_the_servers_page_are_all_fetched(name):
    """The server sends at most 100,000 subjects a reply; 100,050 take two requests (offset 0 and 100,000). The
    server's max_payload is raised so that one page fits in a message this client takes (see the guide)."""
    with EmbeddedServer(config="max_payload: 8MB") as server, jetstream_sync.connect(server.url) as nc:
        js = nc.jetstream()
        stream = js.create_stream(StreamConfig(name=name, subjects=["p.>"], storage="memory"))
        for i in range(100_050):
            nc.publish(f"p.{i}", b"")
        nc.flush()
        wait_until(lambda: stream.info().state.messages == 100_050, timeout=20)
        spy = nc.subscribe(f"$JS.API.STREAM.INFO.{name}")
        nc.flush()
        subjects = stream.info(subjects_filter="p.>").state.subjects
        assert subjects is not None and len(subjects) == 100_050
        assert set(subjects.values()) == {1} and "p.100049" in subjects and "p.0" in subjects
        offsets = [json.loads(spy.next_msg(2).data).get("offset", 0) for _ in range(2)]
        assert offsets == [0, 100_000]


@pytest.mark.parametrize("direct", [False, True], ids=["leader", "direct"])
def test_the_next_message_on_a_subject(js, name, direct):
    stream = js.create_stream(StreamConfig(name=name, subjects=[f"{name}.>"], allow_direct=direct))
    for subject in ("o.eu.1", "o.us.1", "o.eu.2", "o.eu.1", "o.asia.1"):
        js.publish(f"{name}.{subject}", subject.encode())
    first = stream.get_msg(1, subject=f"{name}.o.us.1", direct=direct)
    assert (first.seq, first.subject, first.data) == (2, f"{name}.o.us.1", b"o.us.1")
    # walking one subject (a wildcard) without a consumer
    seen, seq = [], 1
    while True:
        try:
            msg = stream.get_msg(seq, subject=f"{name}.o.eu.*", direct=direct)
        except errors.MessageNotFoundError:
            break
        seen.append((msg.seq, msg.subject))
        seq = msg.seq + 1
    assert seen == [(1, f"{name}.o.eu.1"), (3, f"{name}.o.eu.2"), (4, f"{name}.o.eu.1")]
    with pytest.raises(errors.MessageNotFoundError):
        stream.get_msg(1, subject=f"{name}.none", direct=direct)
    assert stream.get_msg(5, direct=direct).subject == f"{name}.o.asia.1"  # without a subject: that sequence


def test_a_bad_next_subject_is_refused_before_sending(js, name, orders):
    with pytest.raises(errors.InvalidArgumentError) as bad:
        orders.get_msg(1, subject=f"{name}..eu")
    assert bad.value.field == "subject"
    with pytest.raises(errors.InvalidTypeError):
        orders.get_msg(1, subject=5)
