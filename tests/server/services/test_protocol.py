"""Services against a real server: ADR-32 discovery (each verb for all services, by name, by instance id),
endpoints, groups and queue groups, replies and error replies, stats and reset, endpoints added while running,
and what a service does when its client closes or reconnects.

There was no services code before this (no ``jetstream_sync.services``): every test here is new behaviour.
"""

from __future__ import annotations

import json
import logging
import threading

import pytest

import jetstream_sync
from jetstream_sync import errors
from jetstream_sync.services import (
    EndpointStats,
    Request,
    Response,
    Service,
    ServiceClient,
    ServiceError,
)
from tests.helpers import wait_until


def math_service(name: str) -> Service:
    service = Service(name, "1.2.3", description="adds numbers", metadata={"team": "core"})
    numbers = service.group("math", queue_group="adders")

    @numbers.endpoint(metadata={"schema": "pair"})
    def add(request: Request) -> dict[str, int]:
        a, b = request.json()
        if not isinstance(a, int) or not isinstance(b, int):
            raise ServiceError(400, "two integers, please", data=b"[1, 2]")
        return {"sum": a + b}

    @service.endpoint(subject="echo.*")
    def echo(request: Request) -> Response:
        return Response(request.data, {"Subject": request.subject, "Endpoint": request.endpoint})

    @service.endpoint()
    def broken(request: Request) -> bytes:
        raise KeyError("a secret detail")

    @service.endpoint()
    def wrong(request: Request) -> int:
        return 42  # not a reply

    return service


def answers(client, subject: str) -> list[dict[str, object]]:
    """Every answer to a discovery request. One client's IO thread answers for all of its instances, in one
    burst: 0.15 s of silence after the first answer ends them."""
    try:
        return [json.loads(reply.data) for reply in client.request_many(subject, timeout=3, stall=0.15)]
    except errors.NoRespondersError:
        return []


def test_discovery_answers_every_verb_for_all_by_name_and_by_id(client, started, name):
    other = f"{name}_other"
    first = math_service(name).start(client)
    second = math_service(name).start(client)
    third = Service(other, "0.1.0").start(client)
    started.extend([first, second, third])
    ids = {first.id, second.id}
    assert len({first.id, second.id, third.id}) == 3

    for verb, kind in (("PING", "ping"), ("INFO", "info"), ("STATS", "stats")):
        everyone = answers(client, f"$SRV.{verb}")
        assert {a["id"] for a in everyone} >= {*ids, third.id}
        assert all(a["type"] == f"io.nats.micro.v1.{kind}_response" for a in everyone)
        by_name = answers(client, f"$SRV.{verb}.{name}")
        assert sorted(a["id"] for a in by_name) == sorted(ids) and {a["version"] for a in by_name} == {"1.2.3"}
        by_id = answers(client, f"$SRV.{verb}.{name}.{second.id}")
        assert [a["id"] for a in by_id] == [second.id]
        assert answers(client, f"$SRV.{verb}.{name}.NOSUCHID") == []
        assert answers(client, f"$SRV.{verb}.{other}") == [json.loads(json.dumps(getattr(third, kind)().to_wire()))]

    info = json.loads(client.request(f"$SRV.INFO.{name}.{first.id}", timeout=2).data)
    assert info == {
        "type": "io.nats.micro.v1.info_response",
        "name": name,
        "id": first.id,
        "version": "1.2.3",
        "description": "adds numbers",
        "metadata": {"team": "core"},
        "endpoints": [
            {"name": "add", "subject": "math.add", "queue_group": "adders", "metadata": {"schema": "pair"}},
            {"name": "echo", "subject": "echo.*", "queue_group": "q", "metadata": {}},
            {"name": "broken", "subject": "broken", "queue_group": "q", "metadata": {}},
            {"name": "wrong", "subject": "wrong", "queue_group": "q", "metadata": {}},
        ],
    }
    # the typed client reads the same
    services = ServiceClient(client)
    assert sorted(p.id for p in services.ping(name)) == sorted(ids)
    assert services.info(name, first.id)[0].endpoints[0].subject == "math.add"
    assert services.ping(name, "NOSUCHID") == []


def test_replies_errors_and_the_stats_they_leave(client, started, name, caplog):
    instance = math_service(name).start(client)
    started.append(instance)
    services = ServiceClient(client)
    assert json.loads(services.request("math.add", b"[2, 3]").data) == {"sum": 5}
    reply = services.request("echo.x", b"hello", headers={"Trace": "t1"})
    assert reply.data == b"hello" and reply.headers["Subject"] == "echo.x" and reply.headers["Endpoint"] == "echo"

    with pytest.raises(ServiceError) as raised:  # a deliberate error: its code, description and data
        services.request("math.add", b'["a", 1]')
    assert (raised.value.code, raised.value.description, raised.value.data) == (400, "two integers, please", b"[1, 2]")
    with pytest.raises(ServiceError) as raised:  # not JSON: Request.json() answers 400
        services.request("math.add", b"{")
    assert raised.value.code == 400 and "not JSON" in raised.value.description
    caplog.clear()
    with caplog.at_level(logging.ERROR, logger="jetstream_sync"):
        raw = client.request("broken", b"", timeout=2)  # anything else: 500 with the class name only
        assert raw.headers["Nats-Service-Error-Code"] == "500" and raw.headers["Nats-Service-Error"] == "KeyError"
        with pytest.raises(ServiceError, match="500: InvalidTypeError"):
            services.request("wrong")
    failures = [r for r in caplog.records if r.name == "jetstream_sync" and r.levelno == logging.ERROR]
    assert len(failures) == 2  # each logged once, with its traceback
    assert "endpoint broken failed on broken" in failures[0].getMessage() and failures[0].exc_info is not None
    assert "a secret detail" not in raw.headers["Nats-Service-Error"]
    assert "a handler returned int" in str(failures[1].exc_info[1])

    stats = {e.name: e for e in services.stats(name, instance.id)[0].endpoints}
    assert (stats["add"].num_requests, stats["add"].num_errors, stats["add"].last_error) == (
        3,
        2,
        stats["add"].last_error,
    )
    assert stats["add"].last_error.startswith("400:the request body is not JSON")
    assert (stats["broken"].num_requests, stats["broken"].num_errors, stats["broken"].last_error) == (
        1,
        1,
        "500:KeyError",
    )
    assert stats["echo"].num_errors == 0 and stats["echo"].processing_time > 0
    add = stats["add"]
    assert add.average_processing_time == pytest.approx(add.processing_time / 3, rel=0.01)
    assert stats == {e.name: e for e in instance.stats().endpoints}  # what STATS says is what stats() says

    before = instance.started
    instance.reset()
    after = services.stats(name, instance.id)[0]
    assert all(e.num_requests == e.num_errors == 0 and e.last_error == "" for e in after.endpoints)
    assert after.started > before


def test_a_queue_group_shares_requests_and_none_gives_every_instance_each_one(client, started, name):
    service = Service(name, "1.0.0")

    @service.endpoint()
    def shared(request: Request) -> bytes:
        return b"ok"

    @service.endpoint(queue_group="")
    def everyone(request: Request) -> bytes:
        return request.endpoint.encode()

    first, second = service.start(client), service.start(client)
    started.extend([first, second])
    for _ in range(20):
        assert client.request("shared", timeout=2).data == b"ok"
    counts = [next(e.num_requests for e in i.stats().endpoints if e.name == "shared") for i in (first, second)]
    assert sum(counts) == 20  # each request answered once, by one of them
    replies = list(client.request_many("everyone", max_replies=2, timeout=3))
    assert len(replies) == 2  # no queue group: both instances answer
    assert [e.queue_group for e in first.info().endpoints] == ["q", ""]


def test_an_endpoint_added_while_running_is_served_and_listed(client, started, name):
    service = Service(name, "1.0.0")
    instance = service.start(client)
    started.append(instance)
    assert instance.info().endpoints == []
    service.add_endpoint("late", lambda request: b"here")  # ADR-32: endpoints may come after the start
    assert client.request("late", timeout=2).data == b"here"
    assert [e.subject for e in ServiceClient(client).info(name)[0].endpoints] == ["late"]


def test_the_stats_handler_runs_off_the_io_thread_and_fills_data(client, started, name):
    threads: list[str] = []

    def stats_handler(stats: EndpointStats) -> dict[str, object]:
        threads.append(threading.current_thread().name)
        return {"seen": stats.num_requests}

    service = Service(name, "1.0.0", stats_handler=stats_handler)
    service.add_endpoint("one", lambda request: b"1")
    instance = service.start(client)
    started.append(instance)
    client.request("one", timeout=2)
    (stats,) = ServiceClient(client).stats(name)
    assert stats.endpoints[0].data == {"seen": 1}
    assert threads == ["jetstream-sync-callbacks"]


def test_handlers_run_on_the_worker_threads_inside_around(client, started, name):
    entered: list[str] = []

    class Around:
        def __enter__(self) -> None:
            entered.append(threading.current_thread().name)

        def __exit__(self, *exc: object) -> None:
            entered.append("exit")

    service = Service(name, "1.0.0", workers=2)
    service.add_endpoint("where", lambda request: threading.current_thread().name)
    instance = service.start(client, around=Around)
    started.append(instance)
    thread = client.request("where", timeout=2).data.decode()
    assert thread.startswith(f"jetstream-sync-service-{name}-w")
    assert entered == [thread, "exit"]


def test_closing_the_client_stops_its_instances(nats_server, name):
    service = Service(name, "1.0.0")
    service.add_endpoint("one", lambda request: b"1")
    with jetstream_sync.connect(nats_server.url) as nc:
        instance = service.start(nc)
        assert instance.is_running
    assert instance.wait(2) and not instance.is_running
    assert isinstance(instance.error, errors.ConnectionClosedError)
    with jetstream_sync.connect(nats_server.url) as other:
        assert ServiceClient(other, timeout=0.5).ping(name) == []


def test_a_service_keeps_serving_across_a_reconnect(nats_server_function, name):
    service = Service(name, "1.0.0")
    service.add_endpoint("one", lambda request: b"1")
    with jetstream_sync.connect(nats_server_function.url, reconnect_wait=0.1) as nc:
        instance = service.start(nc)
        nats_server_function.restart()
        wait_until(lambda: nc.reconnects == 1 and nc.is_connected, timeout=10)
        assert nc.request("one", timeout=2).data == b"1"
        assert [p.id for p in ServiceClient(nc).ping(name)] == [instance.id]
        instance.stop(5)


def test_starting_on_a_closed_client_or_with_too_much_metadata_is_refused(nats_server, client, name):
    with jetstream_sync.connect(nats_server.url) as nc:
        pass
    with pytest.raises(errors.ConnectionClosedError):
        Service(name, "1.0.0").start(nc)
    huge = Service(name, "1.0.0", metadata={"blob": "x" * client.max_payload})
    with pytest.raises(errors.InvalidArgumentError, match="max_payload"):
        huge.start(client)
    assert ServiceClient(client, timeout=0.5).ping(name) == []  # nothing left subscribed
