"""The Flask extension for real: a Flask app on a real nats-server, requests over HTTP through a werkzeug
server, a forked worker, and ``python -m flask jetstream consume`` as a subprocess stopped by a signal."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Callable, Iterator

import pytest
from flask import Flask
from werkzeug.serving import BaseWSGIServer, make_server

from jetstream_sync import AckPolicy, ConsumerConfig, errors
from jetstream_sync.integrations import close_process_clients
from jetstream_sync.integrations.flask import JetStream, acking, settings_of
from tests.helpers import REPO_ROOT, run_in_fork, wait_until
from tests.server.integrations.flask_apps import create_app

APP = "tests.server.integrations.flask_apps"


@pytest.fixture(autouse=True)
def _close_process_clients() -> Iterator[None]:
    yield
    close_process_clients()


@pytest.fixture
def app(nats_server, name) -> Flask:
    return create_app({"JETSTREAM_SERVERS": nats_server.url, "JETSTREAM_NAME": f"flask-{name}"})


@pytest.fixture
def http(app) -> Iterator[str]:
    """The app behind a real HTTP server on loopback, one thread per request; yields its base URL."""
    server: BaseWSGIServer = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, name="werkzeug", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        thread.join(5)
        server.server_close()


def call(url: str, data: bytes | None = None) -> dict[str, object]:
    with urllib.request.urlopen(urllib.request.Request(url, data=data), timeout=10) as response:
        return json.loads(response.read())  # type: ignore[no-any-return]


def connections_named(nats_server, name: str) -> int:
    with urllib.request.urlopen(f"{nats_server.monitor_url}/connz?limit=1024", timeout=5) as response:
        return sum(1 for c in json.loads(response.read())["connections"] if c.get("name") == name)


def test_requests_over_http_publish_and_read_back_through_one_client(app, http, stream, nats_server, name):
    assert connections_named(nats_server, f"flask-{name}") == 0  # init_app connected nothing
    replies: dict[str, dict[str, object]] = {}
    lock = threading.Lock()

    def post(worker: int) -> None:
        for i in range(10):
            reply = call(f"{http}/publish/{stream.name}.w{worker}", f"{worker}-{i}".encode())
            with lock:
                replies[f"{worker}-{i}"] = reply

    threads = [threading.Thread(target=post, args=(w,)) for w in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(replies) == 80 and {r["stream"] for r in replies.values()} == {stream.name}
    assert sorted(r["seq"] for r in replies.values()) == list(range(1, 81))
    assert len({r["client"] for r in replies.values()}) == 1  # every request thread used the process's one client
    assert call(f"{http}/last/{stream.name}/{stream.name}.w3") == {"seq": replies["3-9"]["seq"], "data": "3-9"}
    wait_until(lambda: connections_named(nats_server, f"flask-{name}") == 1)


def test_bad_settings_fail_at_app_creation_naming_the_key(nats_server, tmp_path):
    with pytest.raises(errors.InvalidArgumentError, match=r"^app\.config\['JETSTREAM_SERVERS'\]: is required"):
        create_app({})
    with pytest.raises(errors.InvalidArgumentError, match=r"^app\.config\['JETSTREAM_TIMEOUT'\]: must be > 0"):
        create_app({"JETSTREAM_SERVERS": nats_server.url, "JETSTREAM_TIMEOUT": 0})
    with pytest.raises(errors.InvalidArgumentError, match=r"^app\.config\['JETSTREAM_SERVER'\]: is not a connection"):
        create_app({"JETSTREAM_SERVERS": nats_server.url, "JETSTREAM_SERVER": nats_server.url})
    missing = tmp_path / "user.creds"
    with pytest.raises(errors.InvalidArgumentError, match=r"^app\.config\['JETSTREAM_CREDENTIALS'\]: file .* does not"):
        create_app({"JETSTREAM_SERVERS": nats_server.url, "JETSTREAM_CREDENTIALS": str(missing)})
    with pytest.raises(errors.InvalidTypeError, match=r"^app\.config\['JETSTREAM_SERVERS'\]: must be a URL"):
        create_app({"JETSTREAM_SERVERS": 4222})


def test_the_settings_are_read_from_the_environment_and_named_after_the_app(nats_server, monkeypatch):
    monkeypatch.setenv("FLASK_JETSTREAM_SERVERS", nats_server.url)
    monkeypatch.setenv("FLASK_JETSTREAM_TIMEOUT", "2.5")  # from_prefixed_env parses it as JSON: a float
    settings = settings_of(create_app())
    assert settings.servers == (nats_server.url,)
    assert settings.timeout == 2.5 and settings.name == "tests.server.integrations.flask_apps"


def test_several_apps_each_with_its_own_settings(nats_server):
    shared = JetStream()
    apps = []
    for label in ("a", "b"):
        app = Flask(f"app_{label}")
        app.config.update(JETSTREAM_SERVERS=nats_server.url, JETSTREAM_NAME=f"app-{label}")
        shared.init_app(app)
        apps.append(app)
    clients = []
    for app in apps:
        with app.app_context():
            clients.append(shared.client)
            assert shared.client is clients[-1] and shared.js is shared.js
            assert shared.client.options.name == app.config["JETSTREAM_NAME"]
    assert clients[0] is not clients[1]
    with pytest.raises(RuntimeError, match="needs an app"):
        shared.client  # noqa: B018 - the property is the call under test
    single = Flask("single")
    single.config["JETSTREAM_SERVERS"] = nats_server.url
    bound = JetStream(single)
    assert bound.client.options.name == "single"  # outside any app context: the app it was created with
    with apps[0].app_context():
        assert bound.client is clients[0]  # inside one: the current app's


def test_an_app_without_init_app_says_so():
    app = Flask("bare")
    with app.app_context(), pytest.raises(RuntimeError, match=r"call jetstream.init_app\(app\)"):
        JetStream().client  # noqa: B018


# Python 3.12+ warns on fork() in a process with threads: this test forks one on purpose, as gunicorn does.
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_a_worker_forked_after_the_app_was_used_makes_its_own_client(app, stream):
    with app.test_client() as http_client:
        parent = http_client.post(f"/publish/{stream.name}.parent", data=b"p").get_json()

    def worker() -> bool:
        with app.test_client() as http_client:
            reply = http_client.post(f"/publish/{stream.name}.child", data=b"c").get_json()
        close_process_clients()
        return bool(reply["seq"] == 2 and reply["client"] != parent["client"])

    assert run_in_fork(worker) == 0
    with app.test_client() as http_client:
        again = http_client.post(f"/publish/{stream.name}.parent", data=b"p").get_json()
    assert again["seq"] == 3 and again["client"] == parent["client"]


def test_acking_acks_after_the_handler_and_naks_when_it_raises(app, js, stream):
    cons = stream.create_or_update_consumer(ConsumerConfig(durable_name="acking", ack_policy=AckPolicy.EXPLICIT))
    js.publish(f"{stream.name}.a", b"ok")
    js.publish(f"{stream.name}.b", b"boom")
    seen: list[bytes] = []

    def handler(msg) -> None:
        seen.append(msg.data)
        if msg.data == b"boom":
            raise ValueError("boom")

    wrapped = acking(handler, app)
    for msg in cons.fetch(2, expires=2.0):
        if msg.data == b"boom":
            with pytest.raises(ValueError, match="boom"):
                wrapped(msg)
        else:
            wrapped(msg)
        assert msg.is_acked
    again = list(cons.fetch(1, expires=2.0))  # the nak'ed one comes back at once
    assert [m.data for m in again] == [b"boom"] and again[0].metadata.num_delivered == 2
    acking(lambda m: m.term(), app)(again[0])  # acknowledged by the handler: nothing more is sent
    wait_until(lambda: cons.info().num_ack_pending == 0 and cons.info().num_pending == 0)


@pytest.mark.parametrize(
    ("handler", "message"),
    [
        ("no_colon", "is not of the form package.module:function"),
        ("tests.server.integrations.no_such_module:f", "cannot import 'tests.server.integrations.no_such_module'"),
        (f"{APP}:missing", "has no 'missing'"),
        (f"{APP}:NOT_A_HANDLER", "is a int, not a function"),
    ],
)
def test_a_bad_handler_is_a_usage_error(app, handler, message):
    result = app.test_cli_runner().invoke(args=["jetstream", "consume", "S", "C", "--handler", handler])
    assert result.exit_code == 2, result.output
    assert "Invalid value for '--handler'" in result.output and message in result.output


def test_a_missing_consumer_fails_with_one_line(app, stream):
    result = app.test_cli_runner().invoke(
        args=["jetstream", "consume", stream.name, "NOPE", "--handler", f"{APP}:forward"]
    )
    assert result.exit_code == 1
    assert result.output.startswith(f"Error: cannot consume {stream.name}/NOPE: ") and "Traceback" not in result.output


def signalled(nats_server, ready: Callable[[], bool], signum: int, *args: str) -> tuple[int, str]:
    """Run ``python -m flask --app ... <args>`` against ``nats_server``, wait until ``ready()``, send ``signum``;
    return the exit code and stderr. A command that exits early fails the wait; one that hangs is killed."""
    env = {**os.environ, "FLASK_JETSTREAM_SERVERS": nats_server.url, "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(
        [sys.executable, "-m", "flask", "--app", f"{APP}:create_app", *args],
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:

        def running_and_ready() -> bool:
            assert process.poll() is None, process.communicate()
            return ready()

        wait_until(running_and_ready, timeout=20, interval=0.05)
        process.send_signal(signum)
        _out, err = process.communicate(timeout=20)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    return process.returncode, err


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_the_consume_command_handles_acks_and_drains_on_a_signal(nats_server, js, stream, signum):
    cons = stream.create_or_update_consumer(
        ConsumerConfig(durable_name="worker", filter_subject=f"{stream.name}.in.>", ack_policy=AckPolicy.EXPLICIT)
    )
    count = 20
    for i in range(count - 1):
        js.publish(f"{stream.name}.in.{i}", f"job {i}".encode())
    js.publish(f"{stream.name}.in.last", b"fail-once")

    def all_handled() -> bool:
        info = cons.info()
        return info.num_pending == 0 and info.num_ack_pending == 0 and stream.info().state.messages == 2 * count

    code, err = signalled(
        nats_server,
        all_handled,
        signum,
        *("jetstream", "consume", stream.name, "worker", "--handler", f"{APP}:forward", "--workers", "2"),
    )
    assert code == 0, err
    assert f"consuming {stream.name}/worker" in err and f"drained {stream.name}/worker" in err
    assert "failing once on purpose" in err  # the handler's exception was logged, the message nak'ed
    info = cons.info()
    assert (info.num_pending, info.num_ack_pending, info.ack_floor.stream_seq) == (0, 0, count)
    assert stream.get_last_msg(f"{stream.name}.out.last").data == b"fail-once"


def test_a_drain_that_outlasts_its_timeout_exits_1_and_leaves_the_rest_for_redelivery(nats_server, js, stream):
    cons = stream.create_or_update_consumer(ConsumerConfig(durable_name="slow", ack_policy=AckPolicy.EXPLICIT))
    js.publish(f"{stream.name}.in.1", b"never finished")
    code, err = signalled(
        nats_server,
        lambda: cons.info().num_ack_pending == 1,  # the handler has it
        signal.SIGTERM,
        *("jetstream", "consume", stream.name, "slow", "--handler", f"{APP}:stuck", "--drain-timeout", "0.5"),
    )
    assert code == 1, err
    assert f"Error: {stream.name}/slow not drained within 0.5 s; the rest will be redelivered" in err
    assert cons.info().num_ack_pending == 1  # not acked: the server redelivers it after ack_wait
