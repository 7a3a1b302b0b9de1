"""The public surface: every exported name exists and is documented, and the old import paths still work."""

from __future__ import annotations

import importlib
import inspect
import typing

import pytest

import jetstream_sync


def test_every_exported_name_exists_and_classes_and_functions_are_documented():
    for name in jetstream_sync.__all__:
        obj = getattr(jetstream_sync, name)
        if typing.get_origin(obj) is not None:
            continue  # a type alias such as Callable[...] (Python 3.10 reports those as classes)
        if inspect.isclass(obj) or inspect.isfunction(obj):
            assert inspect.getdoc(obj), f"jetstream_sync.{name} has no docstring"


@pytest.mark.parametrize(
    ("module", "names"),
    [
        ("jetstream_sync", ["connect", "Client", "JetStream", "Stream", "Consumer", "Msg", "ConnectOptions"]),
        ("jetstream_sync.errors", ["JetStreamError", "PullError", "MissedHeartbeatError"]),
        ("jetstream_sync.testing", ["EmbeddedServer", "FaultProxy", "find_server_binary"]),
        ("jetstream_sync.direct", ["direct_get_batch", "direct_get_batch_raw", "DirectBatch", "RawStoredMsg"]),
        ("jetstream_sync.jetstream", ["JetStream"]),
        ("jetstream_sync.models", ["StreamConfig", "ConsumerConfig", "PubAck", "parse_time"]),
        (
            "jetstream_sync",
            ["ObjectStore", "ObjectStoreConfig", "ObjectMeta", "ObjectInfo", "ObjectReader", "ObjectStoreStatus"],
        ),
        ("jetstream_sync.errors", ["ObjectNotFoundError", "DigestMismatchError", "BadObjectMetaError"]),
        ("jetstream_sync.models", ["ObjectStoreConfig", "ObjectMeta", "ObjectInfo", "ObjectLink"]),
    ],
)
def test_public_import_paths_keep_working(module, names):
    imported = importlib.import_module(module)
    for name in names:
        assert hasattr(imported, name), f"{module}.{name}"


def test_spark_path_keeps_working():
    pytest.importorskip("pyspark")
    spark = importlib.import_module("jetstream_sync.spark")
    assert spark.JetStreamDataSource.name() == "jetstream"


def test_importing_the_package_imports_nats_py_only_through_the_adapter():
    import sys

    users = [
        name
        for name, mod in list(sys.modules.items())
        if name.startswith("jetstream_sync")
        and mod is not None
        and "nats" in vars(mod)
        and getattr(vars(mod)["nats"], "__name__", "") == "nats"
    ]
    adapter = [
        "jetstream_sync._runtime._contract",
        "jetstream_sync._runtime._nats",
        "jetstream_sync._runtime._parser",
        "jetstream_sync._runtime._translate",
        "jetstream_sync._runtime._transports",
    ]
    assert sorted(users) == adapter


def test_the_top_level_names_are_listed_as_httpx_lists_them():
    """Dunders first, then one list in case-insensitive order, so a reader finds a name where they look."""
    names = jetstream_sync.__all__
    dunders = [n for n in names if n.startswith("__")]
    rest = [n for n in names if not n.startswith("__")]
    assert names == dunders + rest
    assert rest == sorted(rest, key=lambda n: (n.lower(), n))
    assert len(set(names)) == len(names)


def test_the_plumbing_has_a_namespace_and_the_old_names_still_work():
    import jetstream_sync.plumbing as plumbing

    old = ["AckSender", "BatchSource", "DeliverySource", "JetStreamAPI", "PullPlan", "RawReply", "Runtime"]
    assert set(old) < set(plumbing.__all__)
    for name in old:
        assert getattr(jetstream_sync, name) is getattr(plumbing, name), name
    assert not set(plumbing.__all__) & set(jetstream_sync.__all__)
    assert "plumbing" in jetstream_sync.__all__
