"""Services without a server: what a definition refuses before anything is sent, the JSON of PING, INFO and STATS
(as nats-py's micro parses it, and as other clients write it), error replies and what a handler may return."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest
from nats.micro.service import EndpointStats as NatsPyEndpointStats
from nats.micro.service import ServiceInfo as NatsPyServiceInfo
from nats.micro.service import ServicePing as NatsPyServicePing
from nats.micro.service import ServiceStats as NatsPyServiceStats

from jetstream_sync import errors
from jetstream_sync.headers import Headers, parse_header_block
from jetstream_sync.services import (
    EndpointInfo,
    EndpointStats,
    PingResponse,
    Request,
    Response,
    Service,
    ServiceError,
    ServiceInfo,
    ServiceStats,
    control_subject,
)
from jetstream_sync.services._request import encode_reply


def handler(request: Request) -> bytes:
    return request.data


@pytest.mark.parametrize(
    ("kwargs", "error", "field"),
    [
        ({"name": "my service"}, errors.InvalidArgumentError, "name"),
        ({"name": "a.b"}, errors.InvalidArgumentError, "name"),
        ({"name": ""}, errors.InvalidArgumentError, "name"),
        ({"name": 7}, errors.InvalidTypeError, "name"),
        ({"version": "1.0"}, errors.InvalidArgumentError, "version"),
        ({"version": "v1.0.0"}, errors.InvalidArgumentError, "version"),
        ({"version": "01.0.0"}, errors.InvalidArgumentError, "version"),
        ({"metadata": {"k": 1}}, errors.InvalidTypeError, "metadata"),
        ({"metadata": {"": "v"}}, errors.InvalidArgumentError, "metadata"),
        ({"metadata": ["k"]}, errors.InvalidTypeError, "metadata"),
        ({"queue_group": "a b"}, errors.InvalidArgumentError, "queue_group"),
        ({"workers": 0}, errors.InvalidArgumentError, "workers"),
        ({"max_pending": 0}, errors.InvalidArgumentError, "max_pending"),
        ({"description": None}, errors.InvalidTypeError, "description"),
        ({"stats_handler": "not callable"}, errors.InvalidTypeError, "stats_handler"),
    ],
)
def test_a_bad_service_definition_is_refused_naming_the_argument(kwargs, error, field):
    arguments = {"name": "svc", "version": "1.0.0", **kwargs}
    name, version = arguments.pop("name"), arguments.pop("version")
    with pytest.raises(error) as raised:
        Service(name, version, **arguments)
    assert raised.value.field == field


def test_semantic_versions_with_pre_release_and_build_are_taken():
    for version in ("0.0.1", "1.2.3-rc.1", "2.0.0+build.5", "1.0.0-alpha.beta-1+sha.0a1"):
        assert Service("svc", version).version == version


@pytest.mark.parametrize(
    ("call", "error", "field"),
    [
        (lambda s: s.add_endpoint("a b", handler), errors.InvalidArgumentError, "name"),
        (lambda s: s.add_endpoint("a", "nope"), errors.InvalidTypeError, "handler"),
        (lambda s: s.add_endpoint("a", handler, subject="a..b"), errors.InvalidArgumentError, "subject"),
        (lambda s: s.add_endpoint("a", handler, subject="a.>.b"), errors.InvalidArgumentError, "subject"),
        (lambda s: s.add_endpoint("a", handler, subject="$SRV.PING"), errors.InvalidArgumentError, "subject"),
        (lambda s: s.add_endpoint("a", handler, metadata={"k": 2}), errors.InvalidTypeError, "metadata"),
        (lambda s: s.add_endpoint("a", handler, concurrency=0), errors.InvalidArgumentError, "concurrency"),
        (lambda s: s.add_endpoint("a", handler, max_pending=-1), errors.InvalidArgumentError, "max_pending"),
        (lambda s: s.add_endpoint("a", handler, queue_group="x y"), errors.InvalidArgumentError, "queue_group"),
        (lambda s: s.group("a.>"), errors.InvalidArgumentError, "name"),
        (lambda s: s.group("a b"), errors.InvalidArgumentError, "name"),
        (lambda s: s.endpoint(handler), errors.InvalidTypeError, "name"),  # @service.endpoint without ()
    ],
)
def test_a_bad_endpoint_or_group_is_refused_when_it_is_defined(call, error, field):
    service = Service("svc", "1.0.0")
    with pytest.raises(error) as raised:
        call(service)
    assert raised.value.field == field
    assert service.endpoints == []


def test_groups_prefix_subjects_and_queue_groups_inherit_or_are_turned_off():
    service = Service("svc", "1.0.0", queue_group="workers")

    @service.endpoint()
    def top(request: Request) -> None:
        return None

    orders = service.group("orders")
    admin = orders.group("admin", queue_group="")  # no queue group: every instance gets every request

    @orders.endpoint("create", metadata={"schema": "order.v1"})
    def create(request: Request) -> None:
        return None

    admin.add_endpoint("purge", handler, subject="purge.*")
    orders.add_endpoint("audit", handler, queue_group="auditors")
    assert top.__name__ == "top"  # the decorator returns the function itself
    assert [(e.name, e.subject, e.queue_group) for e in service.endpoints] == [
        ("top", "top", "workers"),
        ("create", "orders.create", "workers"),
        ("purge", "orders.admin.purge.*", ""),
        ("audit", "orders.audit", "auditors"),
    ]
    assert dict(service.endpoints[1].metadata) == {"schema": "order.v1"}
    with pytest.raises(errors.InvalidArgumentError, match="is the subject of endpoint 'create' already"):
        orders.add_endpoint("again", handler, subject="create")


def test_metadata_is_copied_and_frozen_when_given():
    given = {"region": "eu"}
    service = Service("svc", "1.0.0", metadata=given)
    given["region"] = "us"
    assert dict(service.metadata) == {"region": "eu"}
    with pytest.raises(TypeError):
        service.metadata["region"] = "us"  # type: ignore[index]


def test_control_subjects():
    assert control_subject("PING") == "$SRV.PING"
    assert control_subject("INFO", "svc") == "$SRV.INFO.svc"
    assert control_subject("STATS", "svc", "abc") == "$SRV.STATS.svc.abc"
    with pytest.raises(errors.InvalidArgumentError):
        control_subject("STATS", id="abc")
    with pytest.raises(errors.InvalidArgumentError):
        control_subject("HELLO")


STARTED = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)  # no microseconds: the fraction is still written


def sample_stats() -> ServiceStats:
    endpoint = EndpointStats(
        name="add",
        subject="math.add",
        queue_group="q",
        num_requests=4,
        num_errors=1,
        last_error="400:bad numbers",
        processing_time=0.002,
        average_processing_time=0.0005,
        data={"max": 7},
    )
    return ServiceStats(
        name="math", id="ID1", version="1.0.0", started=STARTED, metadata={"a": "b"}, endpoints=[endpoint]
    )


def test_our_ping_info_and_stats_json_is_what_nats_py_micro_reads():
    ping = PingResponse(name="math", id="ID1", version="1.0.0", metadata={"a": "b"})
    theirs_ping = NatsPyServicePing.from_dict(json.loads(json.dumps(ping.to_wire())))
    assert (theirs_ping.name, theirs_ping.id, theirs_ping.version, theirs_ping.metadata) == (
        "math",
        "ID1",
        "1.0.0",
        {"a": "b"},
    )
    assert ping.to_wire()["type"] == "io.nats.micro.v1.ping_response"

    info = ServiceInfo(
        name="math",
        id="ID1",
        version="1.0.0",
        description="adds",
        endpoints=[EndpointInfo(name="add", subject="math.add", queue_group="q", metadata={"k": "v"})],
    )
    theirs_info = NatsPyServiceInfo.from_dict(json.loads(json.dumps(info.to_wire())))
    assert theirs_info.description == "adds" and theirs_info.endpoints[0].subject == "math.add"
    assert theirs_info.type == "io.nats.micro.v1.info_response"

    wire = json.loads(json.dumps(sample_stats().to_wire()))
    assert wire["started"] == "2026-01-02T03:04:05.000000Z"
    assert wire["endpoints"][0]["processing_time"] == 2_000_000 and wire["type"] == "io.nats.micro.v1.stats_response"
    theirs_stats = NatsPyServiceStats.from_dict(wire)  # strptime("%Y-%m-%dT%H:%M:%S.%fZ"): the fraction is needed
    assert theirs_stats.started == STARTED.replace(tzinfo=None)
    assert theirs_stats.endpoints[0].average_processing_time == 500_000
    assert theirs_stats.endpoints[0].last_error == "400:bad numbers"


def test_what_others_write_is_read_leniently():
    # nats-py writes null for a missing description and data; Go writes null metadata and 9 fraction digits
    stats = ServiceStats.from_wire(
        {
            "type": "io.nats.micro.v1.stats_response",
            "name": "go",
            "id": "X",
            "version": "1.0.0",
            "metadata": None,
            "started": "2026-01-02T03:04:05.123456789Z",
            "endpoints": [{"name": "e", "subject": "e", "queue_group": "q", "num_requests": 2, "processing_time": 10}],
        }
    )
    assert stats.started == datetime(2026, 1, 2, 3, 4, 5, 123456, tzinfo=timezone.utc)
    assert stats.metadata == {} and stats.endpoints[0].data is None and stats.endpoints[0].processing_time == 1e-8
    natspy = NatsPyServiceInfo(name="py", id="Y", version="1.0.0").to_dict()
    assert ServiceInfo.from_wire(natspy).description == ""
    endpoint = NatsPyEndpointStats("e", "e", "q", 1, 0, 5, 5).to_dict()
    assert EndpointStats.from_wire(endpoint).last_error == ""
    assert ServiceStats.from_wire(sample_stats().to_wire()) == sample_stats()


@pytest.mark.parametrize(
    "document",
    [
        {"name": 1, "id": "X", "version": "1"},
        {"name": "n", "id": "X", "version": "1", "metadata": {"k": 1}},
        {"name": "n", "id": "X", "version": "1", "endpoints": "e"},
    ],
)
def test_a_malformed_answer_is_a_protocol_error_naming_the_field(document):
    with pytest.raises(errors.ProtocolError, match="INFO reply"):
        ServiceInfo.from_wire(document)


def test_service_errors_carry_a_numeric_code_and_one_line_description():
    error = ServiceError(404, "no such\r\norder")
    assert error.headers == {"Nats-Service-Error": "no such order", "Nats-Service-Error-Code": "404"}
    assert str(error) == "404: no such order" and isinstance(error, errors.JetStreamError)
    with pytest.raises(errors.InvalidTypeError):
        ServiceError("404", "text")  # type: ignore[arg-type]
    long = ServiceError(500, "x" * 5000)
    assert len(long.description) == 1024
    read = ServiceError.from_reply(Headers({"Nats-Service-Error": ["gone"], "Nats-Service-Error-Code": ["410"]}), b"d")
    assert read is not None and (read.code, read.description, read.data) == (410, "gone", b"d")
    odd = ServiceError.from_reply(Headers({"Nats-Service-Error": ["odd"], "Nats-Service-Error-Code": ["E42"]}))
    assert odd is not None and odd.code == 500 and "E42" in odd.description
    assert ServiceError.from_reply(Headers({"Other": ["x"]})) is None


def decoded(command: bytes | tuple[bytes, ...]) -> tuple[bytes, dict[str, str], bytes]:
    """(the protocol line, the headers, the payload) of a PUB or HPUB command."""
    raw = command if isinstance(command, bytes) else b"".join(command)
    line, _, rest = raw.partition(b"\r\n")
    if line.startswith(b"HPUB"):
        header_size = int(line.split()[-2])
        block, payload = rest[:header_size], rest[header_size:-2]
        return line, dict(parse_header_block(block)[2].items()), payload
    return line, {}, rest[:-2]


@pytest.mark.parametrize(
    ("value", "payload"),
    [
        (b"raw", b"raw"),
        (bytearray(b"ba"), b"ba"),
        ("text \u00e9", "text \u00e9".encode()),
        ({"a": [1, 2]}, b'{"a":[1,2]}'),
        ([1, "x"], b'[1,"x"]'),
        (None, b""),
    ],
)
def test_what_a_handler_returns_becomes_the_reply(value, payload):
    line, headers, body = decoded(encode_reply(b"_INBOX.x", value, 1024))
    assert line.startswith(b"PUB _INBOX.x ") and headers == {} and body == payload


def test_a_response_carries_headers_and_a_bad_value_or_a_too_large_one_is_refused():
    line, headers, body = decoded(encode_reply(b"_INBOX.x", Response({"ok": True}, {"Content-Type": "json"}), 1024))
    assert line.startswith(b"HPUB") and headers == {"Content-Type": "json"} and body == b'{"ok":true}'
    with pytest.raises(errors.InvalidTypeError, match="a handler returned int"):
        encode_reply(b"_INBOX.x", 42, 1024)
    with pytest.raises(errors.MaxPayloadError):
        encode_reply(b"_INBOX.x", b"x" * 2000, 1024)


def test_a_request_parses_its_body_or_answers_400():
    request = Request("e", "e.sub", "_INBOX.r", b'{"n": 1}', b"NATS/1.0\r\nTrace: on\r\n\r\n")
    assert request.json() == {"n": 1} and request.text() == '{"n": 1}' and request.headers["Trace"] == "on"
    with pytest.raises(ServiceError) as raised:
        Request("e", "e", "", b"not json", None).json()
    assert raised.value.code == 400
    with pytest.raises(ServiceError) as raised:
        Request("e", "e", "", b"\xff", None).text()
    assert raised.value.code == 400 and Request("e", "e", "", b"", None).headers == {}
