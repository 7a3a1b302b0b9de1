"""The JetStream err_code table (``jetstream_sync/_api_codes.py``) against nats-server's own.

``nats_server_errors.json`` is nats-server's server/errors.json (error_code, HTTP code, constant, description),
taken at commit 1787eee035cf (2.15.0-dev), which holds every code of 2.11 to 2.15. Every code in it is either
typed here, with the class a caller branches on, or listed as left untyped on purpose: a new server's table
that adds a code fails ``test_every_server_code_is_typed_or_left_untyped_on_purpose`` until someone decides.
"""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from types import SimpleNamespace

import pytest

from jetstream_sync import ConsumerConfig, JetStream, StreamConfig, errors
from jetstream_sync._api_codes import API_ERRORS
from jetstream_sync.jetstream._binding import create_if_absent as subscribe_create
from jetstream_sync.jetstream._bucket import update_bucket_stream
from jetstream_sync.jetstream.object_store._records import MetaRecords
from jetstream_sync.jetstream.retry import is_transient_cluster_error

SERVER_TABLE = {
    row[0]: (row[1], row[2], row[3])
    for row in json.loads((Path(__file__).parent / "nats_server_errors.json").read_text(encoding="utf-8"))
}

# What each class stands for, written out rather than read back from the table under test.
EXPECTED: dict[type[errors.APIError], list[int]] = {
    errors.ConsumerConfigError: [
        *range(10016, 10021),
        *range(10078, 10096),
        *range(10098, 10104),
        10107,
        10108,
        10112,
        *range(10114, 10117),
        10121,
        *range(10125, 10128),
        10131,
        10132,
        *range(10134, 10140),
        10153,
        *range(10159, 10163),
        10178,
        *range(10181, 10185),
        10196,
        10197,
        10204,
        *range(10218, 10223),
    ],
    errors.StreamConfigError: [
        10021,
        10022,
        10024,
        *range(10030, 10035),
        10046,
        10052,
        10055,
        10056,
        10061,
        10065,
        10074,
        10113,
        10122,
        10123,
        10128,
        *range(10140, 10148),
        10150,
        10151,
        10152,
        *range(10154, 10157),
        10173,
        10186,
        10187,
        10198,
        10209,
        *range(10213, 10218),
    ],
    errors.ResourceLimitError: [10002, 10023, 10026, 10027, 10028, 10047, 10053, 10120],
    errors.CounterError: [*range(10168, 10173)],
    errors.MessageTTLError: [10165, 10166],
    errors.StreamOfflineError: [10118, 10194],
    errors.ConsumerOfflineError: [10119, 10195],
    errors.StreamSealedError: [10109],
    errors.DuplicateMessageInProgressError: [10158],
    errors.TooManyRequestsError: [10167],
    errors.RequiredApiLevelError: [10185],
    errors.ExpectedStreamMismatchError: [10060],
    errors.ConsumerNotFoundError: [10014, 10149],
    errors.ConsumerExistsError: [10013, 10105, 10106, 10148],
    errors.MessageNotFoundError: [10037, 10043],
    errors.StreamReconfigureInProgressError: [10124, 10226],
    errors.JetStreamNotEnabledError: [10039, 10076],
    errors.ClusterUnavailableError: [10008],
    errors.ClusterMemberChangeError: [10202],
    errors.ExpectedLastSequenceUnavailableError: [10163],
    errors.MinLastSequenceError: [10180],
    errors.StreamNotFoundError: [10059],
    errors.StreamNameInUseError: [10058],
    errors.StreamIdentityMismatchError: [10225],
    errors.StreamStoreFailedError: [10077],
    errors.WrongLastSequenceError: [10071, 10164],
    errors.WrongLastMsgIdError: [10070],
    errors.MessageTooLargeError: [10054],
    errors.BatchPublishNotEnabledError: [10174, 10205],
    errors.BatchPublishError: [10175, 10176, 10177, 10179, *range(10199, 10202), *range(10206, 10209), 10210, 10211],
    errors.MessageScheduleError: [*range(10188, 10193), 10203, 10212, 10223],
}

# Left a plain APIError, each for a reason (see the docstring of _api_codes.py).
UNTYPED = {
    10003: "bad request",
    10004: "incomplete results (never sent)",
    10005: "no peers for placement: offline (retried by err_code) or impossible, one code",
    10006: "cluster administration",
    10007: "cluster administration",
    10009: "returned inside the server, never sent",
    10010: "cluster administration",
    10011: "never sent",
    10012: "consumer create failed: config refusals and store failures alike",
    10015: "snapshots",
    10025: "invalid JSON: a client bug",
    10029: "a mirror's consumer failed (reported in the stream's info)",
    10035: "account not found",
    10036: "never sent",
    10038: "a client bug",
    10040: "peer removal",
    10041: "raft failure",
    10042: "restores",
    10044: "peer removal",
    10045: "a source's consumer failed (reported in the stream's info)",
    10048: "server failure",
    10049: "stream create failed (the store)",
    10050: "server failure",
    10051: "never sent",
    10057: "message delete failed (the store)",
    10062: "restores",
    10063: "replication, never a client's",
    10064: "snapshots",
    10066: "templates",
    10067: "templates",
    10068: "templates",
    10069: "stream update failed (the server)",
    10072: "restores",
    10073: "templates",
    10075: "peer remap",
    10096: "stream closed while a consumer was made",
    10097: "headers over 64 KiB",
    10104: "consumer store failed",
    10110: "purge failed (the store)",
    10111: "rollup failed",
    10117: "never sent",
    10129: "cancelling a move",
    10130: "restores",
    10133: "negative replicas: a stream's and a consumer's, one code (checked before sending)",
    10157: "pedantic mode (never asked for)",
    10193: "an expected-last-subject-sequence header without its sequence (never sent)",
    10224: "cluster rescue",
    10227: "a publish with a stream-source header",
}


def _expected_table() -> dict[int, type[errors.APIError]]:
    table: dict[int, type[errors.APIError]] = {}
    for cls, codes in EXPECTED.items():
        for code in codes:
            assert code not in table, f"{code} is listed for {table[code].__name__} and {cls.__name__}"
            table[code] = cls
    return table


EXPECTED_TABLE = _expected_table()


def test_every_mapped_code_is_in_the_servers_table():
    assert sorted(set(API_ERRORS) - set(SERVER_TABLE)) == []


def test_the_table_maps_each_code_to_the_class_it_stands_for():
    assert dict(sorted(API_ERRORS.items())) == dict(sorted(EXPECTED_TABLE.items()))


def test_every_server_code_is_typed_or_left_untyped_on_purpose():
    assert not set(API_ERRORS) & set(UNTYPED)
    assert sorted(set(SERVER_TABLE) - set(API_ERRORS) - set(UNTYPED)) == []
    assert sorted(set(UNTYPED) - set(SERVER_TABLE)) == []


@pytest.mark.parametrize("err_code", sorted(EXPECTED_TABLE))
def test_api_error_builds_the_class_of_each_code_with_the_servers_answer(err_code):
    status, _constant, description = SERVER_TABLE[err_code]
    exc = errors.api_error(status, err_code, description)
    assert type(exc) is EXPECTED_TABLE[err_code]
    assert (exc.code, exc.err_code, exc.description) == (status, err_code, description)
    assert f"err_code={err_code}" in str(exc)
    again = pickle.loads(pickle.dumps(exc))
    assert type(again) is type(exc)
    assert (again.code, again.err_code, again.description) == (status, err_code, description)


@pytest.mark.parametrize("err_code", sorted(UNTYPED))
def test_an_untyped_code_is_a_plain_api_error(err_code):
    status, _constant, description = SERVER_TABLE[err_code]
    assert type(errors.api_error(status, err_code, description)) is errors.APIError


@pytest.mark.parametrize(
    ("err_code", "retried"),
    [
        (10158, True),  # the same msg_id is being stored: resending is safe and passes
        (10124, True),  # a move in progress, like 10226: an update is retried while it lasts
        (10118, False),  # offline: its servers are down, not electing
        (10194, False),  # offline: the server is too old for it
        (10119, False),
        (10195, False),
        (10167, False),  # server back-pressure: an immediate retry would make it worse
        (10002, False),  # out of room: waiting does not make any
        (10023, False),
        (10109, False),  # sealed for good
        (10185, False),
    ],
)
def test_only_what_passes_by_waiting_is_retried_like_an_election(err_code, retried):
    status, _constant, description = SERVER_TABLE[err_code]
    assert is_transient_cluster_error(errors.api_error(status, err_code, description)) is retried


def test_a_duplicate_message_in_progress_is_caught_as_a_cluster_unavailable_error():
    with pytest.raises(errors.ClusterUnavailableError) as caught:
        raise errors.api_error(409, 10158, "duplicate message id is in process")
    assert isinstance(caught.value, errors.DuplicateMessageInProgressError)


def test_too_many_requests_is_back_pressure_as_well_as_the_servers_answer():
    exc = errors.api_error(429, 10167, "too many requests")
    assert isinstance(exc, errors.PublishBackpressureError) and isinstance(exc, errors.APIError)
    assert (exc.code, exc.err_code) == (429, 10167)


def test_a_required_api_level_refusal_is_a_feature_not_supported_error_too():
    exc = errors.api_error(412, 10185, "JetStream minimum api level required")
    assert isinstance(exc, errors.FeatureNotSupportedError) and isinstance(exc, errors.APIError)
    assert str(exc) == "JetStream minimum api level required (code=412, err_code=10185)"
    assert (exc.feature, exc.needed, exc.server) == ("a required JetStream API level", "", "")
    again = pickle.loads(pickle.dumps(exc))
    assert str(again) == str(exc) and again.feature == exc.feature


def test_a_bucket_update_names_the_bucket_for_every_stream_configuration_refusal():
    """update_bucket_stream catches StreamConfigError: now every stream rule the server names, not 10052 alone."""
    js = SimpleNamespace(update_stream=_raising(400, 10065, "subjects overlap with an existing stream"))
    with pytest.raises(errors.StreamConfigError, match="bucket 'b' cannot take this configuration: subjects overlap"):
        update_bucket_stream(js, "b", StreamConfig(name="KV_b"))


def test_subscribe_takes_a_durable_replaced_with_another_config_as_the_already_exists_race():
    """subscribe._create reads ConsumerExistsError as "made meanwhile" and binds to what exists (after its checks)."""
    js = SimpleNamespace(_consumer_request=_raising(400, 10106, "consumer replacement durable config not the same"))
    assert subscribe_create(js, "S", ConsumerConfig(durable_name="c")) is None


def test_update_consumer_of_a_missing_consumer_raises_consumer_not_found():
    fake = SimpleNamespace(_consumer_request=_raising(400, 10149, "consumer does not exist"))
    with pytest.raises(errors.ConsumerNotFoundError) as caught:
        JetStream._update_consumer(fake, "S", ConsumerConfig(durable_name="c"))
    assert caught.value.err_code == 10149


def test_a_sealed_object_store_still_says_so():
    """MetaRecords.write_errors looks for 10109 among APIErrors; the typed StreamSealedError is one."""
    records = MetaRecords.__new__(MetaRecords)  # write_errors needs only the bucket's name: no client here
    records.bucket = "b"
    with pytest.raises(errors.ObjectStoreSealedError, match="bucket 'b' is sealed"), records.write_errors():
        raise errors.api_error(400, 10109, "invalid operation on sealed stream")
    assert not issubclass(errors.StreamSealedError, errors.StreamStoreFailedError)  # the stores' "bucket full"


def _raising(status: int, err_code: int, description: str):
    def call(*_args, **_kwargs):
        raise errors.api_error(status, err_code, description)

    return call


NEW_CLASSES = [
    errors.ConsumerOfflineError,
    errors.CounterError,
    errors.DuplicateMessageInProgressError,
    errors.ExpectedStreamMismatchError,
    errors.MessageTTLError,
    errors.RequiredApiLevelError,
    errors.ResourceLimitError,
    errors.StreamOfflineError,
    errors.StreamSealedError,
    errors.TooManyRequestsError,
]


@pytest.mark.parametrize("cls", NEW_CLASSES, ids=lambda cls: cls.__name__)
def test_the_new_classes_are_public_in_errors_and_documented(cls):
    assert cls.__name__ in errors.__all__
    assert getattr(errors, cls.__name__) is cls
    assert cls.__module__ == "jetstream_sync.errors"  # what a traceback shows, not the private module
    assert (vars(cls).get("__doc__") or "").strip()
