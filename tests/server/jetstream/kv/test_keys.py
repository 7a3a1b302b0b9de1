"""keys() on a large bucket: the filter is applied by the server (only matching keys, and only their headers,
reach the client), an empty bucket has none, and no consumer outlives the call."""

from __future__ import annotations

from tests.server.jetstream.kv.kvhelpers import consumers, fill, wait_no_consumers

VALUE = b"v" * 512


def received(client) -> tuple[int, int]:
    stats = client.stats
    return stats["in_msgs"], stats["in_bytes"]


def test_keys_of_5000_are_filtered_by_the_server(client, js, kv, name):
    fill(js, kv, 50, prefix="a", value=VALUE)
    fill(js, kv, 4950, prefix="b", value=VALUE)
    kv.put("a.7", VALUE)  # a second revision: still one key
    kv.delete("a.3")  # a marker: not a key

    msgs_before, bytes_before = received(client)
    matching = list(kv.keys("a.*"))
    msgs, payload = received(client)[0] - msgs_before, received(client)[1] - bytes_before
    assert sorted(matching) == sorted(f"a.{i}" for i in range(50) if i != 3)
    assert len(matching) == len(set(matching))
    # 49 keys and the marker, plus a handful of API replies: nowhere near the 5,000 keys of the bucket
    assert msgs < 150, f"{msgs} messages for a filter matching 50 keys"
    assert payload < 20 * 1024, f"{payload} payload bytes: values crossed the network"  # headers only

    msgs_before, _ = received(client)
    everything = list(kv.keys())
    assert received(client)[0] - msgs_before >= 5000  # the unfiltered walk does deliver every key
    assert len(everything) == 4999 and len(set(everything)) == 4999
    wait_no_consumers(js, name)


def test_keys_of_a_filter_matching_nothing_in_a_large_bucket(client, js, kv, name):
    fill(js, kv, 5000, value=VALUE)
    msgs_before, _ = received(client)
    assert list(kv.keys("nothing.>", "k.x.*")) == []
    assert received(client)[0] - msgs_before < 20
    wait_no_consumers(js, name)


def test_keys_of_an_empty_bucket(js, kv, name):
    assert list(kv.keys()) == []
    assert list(kv.keys("a.*", "b")) == []
    wait_no_consumers(js, name)


def test_keys_of_a_bucket_with_only_markers(js, kv, name):
    kv.put("a", b"1")
    kv.delete("a")
    kv.put("b", b"1")
    kv.purge("b")
    assert list(kv.keys()) == []
    wait_no_consumers(js, name)


def test_breaking_out_of_a_filtered_walk_leaves_no_consumer(js, kv, name, small_pulls):
    fill(js, kv, 3000)
    fill(js, kv, 3000, prefix="other")
    for key in kv.keys("k.*"):
        assert key.startswith("k.")
        assert len(consumers(js, name)) == 1
        break
    wait_no_consumers(js, name)


def test_keys_one_per_key_whatever_the_history(js, kv):
    for round_ in range(5):
        fill(js, kv, 200, value=b"%d" % round_)
    keys = list(kv.keys())
    assert sorted(keys) == sorted(f"k.{i}" for i in range(200))
