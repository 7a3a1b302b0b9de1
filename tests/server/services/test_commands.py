"""``manage.py jetstream_service`` and ``flask jetstream service`` as a deployment runs them: a subprocess against a
real server, found and called by discovery, stopped by SIGTERM or SIGINT with a request in flight, which is
finished and answered before the process exits 0; a path that names no service fails before anything runs.

The service is ``tests/server/services/served.py``; the Django project is the example project
(``examples/django_project``), the Flask app the Flask tests' (``tests/server/integrations/flask_apps.py``).
There was no services command before this: these are new behaviour.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading

import pytest

from jetstream_sync import errors
from jetstream_sync.services import ServiceClient
from tests.helpers import REPO_ROOT, wait_until

MANAGE = REPO_ROOT / "examples" / "django_project" / "manage.py"
SERVICE = "tests.server.services.served:service"


def command(kind: str, *args: str) -> list[str]:
    if kind == "django":
        return [sys.executable, str(MANAGE), "jetstream_service", *args]
    app = "tests.server.integrations.flask_apps:create_app"
    return [sys.executable, "-m", "flask", "--app", app, "jetstream", "service", *args]


def environment(url: str) -> dict[str, str]:
    # NATS_URL for the Django example project, FLASK_JETSTREAM_SERVERS for the Flask app; the repository on the
    # path so that manage.py (whose own directory is sys.path[0]) imports the tests' service module
    return {**os.environ, "NATS_URL": url, "FLASK_JETSTREAM_SERVERS": url, "PYTHONPATH": str(REPO_ROOT)}


def discovery_refused(client) -> bool:
    """True once the server says nobody listens on the service's PING subject: the stop's UNSUBs were processed,
    its endpoints' too (a stop writes those first). An empty ``ServiceClient.ping`` would not do: it is also what a
    ping slower than its timeout returns on a loaded machine."""
    try:
        client.request("$SRV.PING.served", timeout=5)
    except errors.NoRespondersError:
        return True
    return False


@pytest.mark.parametrize(("kind", "sig"), [("django", signal.SIGTERM), ("flask", signal.SIGINT)])
def test_the_command_serves_and_stops_gracefully_on_a_signal(nats_server, client, kind, sig, tmp_path):
    process = subprocess.Popen(
        command(kind, SERVICE, "--workers", "3", "--stop-timeout", "20"),
        env=environment(nats_server.url),
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    services = ServiceClient(client, timeout=0.5)
    try:

        def serving() -> bool:
            assert process.poll() is None, process.communicate()
            return bool(services.ping("served"))

        wait_until(serving, timeout=30, interval=0.1)
        (info,) = services.info("served")
        assert [e.subject for e in info.endpoints] == ["context", "slow"]
        expected = "flask:tests.server.integrations.flask_apps" if kind == "flask" else "django:shop.urls"
        assert services.request("context", timeout=5).data.decode() == expected  # the framework's context

        answer: list[bytes] = []
        in_flight = threading.Thread(
            target=lambda: answer.append(client.request("slow", str(tmp_path).encode(), timeout=20).data)
        )
        in_flight.start()
        wait_until(lambda: (tmp_path / "started").exists(), timeout=10)
        process.send_signal(sig)
        wait_until(lambda: discovery_refused(client), timeout=10)  # no new requests from now on
        with pytest.raises(errors.NoRespondersError):
            client.request("context", timeout=2)
        assert process.poll() is None  # still finishing the request in flight
        (tmp_path / "release").touch()
        out, err = process.communicate(timeout=20)
        in_flight.join(5)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, err
    assert answer == [b"finished"]  # answered before the process exited
    said = out + err
    assert "serving served 1.0.0 as" in said and "stopping served 1.0.0" in said
    assert "stopped served 1.0.0 after 2 request(s)" in said


@pytest.mark.parametrize(
    ("kind", "path", "says"),
    [
        ("django", "tests.server.services.nope:service", "cannot import 'tests.server.services.nope'"),
        ("flask", "tests.server.services.served:NOT_A_SERVICE", "is a int, not a jetstream_sync.services.Service"),
    ],
)
def test_a_path_that_names_no_service_fails_before_anything_runs(nats_server, kind, path, says):
    result = subprocess.run(
        command(kind, path), env=environment(nats_server.url), cwd=REPO_ROOT, capture_output=True, text=True, timeout=60
    )
    assert result.returncode != 0 and says in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


def test_a_path_may_name_a_factory_and_be_dotted():
    from jetstream_sync.integrations._service import load_service
    from tests.server.services.served import service

    assert load_service("tests.server.services.served:make_service") is service
    assert load_service("tests.server.services.served.service") is service
