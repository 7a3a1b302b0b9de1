"""The app: settings.JETSTREAM read and checked without connecting (the system check), one client per process
shared by its threads, and a fresh one in a forked child (gunicorn --preload, Celery prefork)."""

from __future__ import annotations

import os
import re
import threading

import pytest
from django.core import checks
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test import override_settings

from jetstream_sync import StreamConfig
from jetstream_sync.integrations.django import close_clients, connection_settings, get_client, get_jetstream
from jetstream_sync.integrations.django.checks import E001
from tests.helpers import join_all


def jetstream_errors() -> list[checks.CheckMessage]:
    return [m for m in checks.run_checks() if m.id == E001]


def test_good_settings_pass_the_check(nats_server):
    assert jetstream_errors() == []
    call_command("check")  # raises SystemCheckError on any error


@pytest.mark.parametrize(
    ("setting", "named"),
    [
        (None, "settings.JETSTREAM is not set"),
        ({}, "JETSTREAM['SERVERS']"),
        ({"SERVERS": "nats://x:4222", "TIMOUT": 3}, "JETSTREAM['TIMOUT']"),
        ({"SERVERS": "nats://x:4222", "CREDENTIALS": "/no/such.creds"}, "JETSTREAM['CREDENTIALS']"),
        ({"SERVERS": "nats://x:4222", "TIMEOUT": -1}, "JETSTREAM['TIMEOUT']"),
        ({"SERVERS": "nats://x:4222", "PASSWORD": "p"}, "JETSTREAM['PASSWORD']"),
        (["nats://x:4222"], "JETSTREAM"),
    ],
)
def test_a_wrong_setting_is_one_error_naming_it(setting, named):
    with override_settings(JETSTREAM=setting):
        (error,) = jetstream_errors()
        assert error.level == checks.ERROR and named in error.msg
        assert "SERVERS" in error.hint and "TLS_CA_FILE" in error.hint
        with pytest.raises(SystemCheckError, match=r"jetstream_sync\.E001"):
            call_command("check")
        with pytest.raises(ImproperlyConfigured, match=re.escape(named)):
            get_client()


def test_the_check_does_not_connect():
    with override_settings(JETSTREAM={"SERVERS": "nats://127.0.0.1:1", "CONNECT_TIMEOUT": 0.2}):
        assert jetstream_errors() == []  # nothing listens there; the check never tried


def test_one_client_per_process_shared_by_threads(nats_server):
    clients: list[object] = []
    threads = [threading.Thread(target=lambda: clients.append(get_client())) for _ in range(8)]
    for t in threads:
        t.start()
    assert join_all(threads, timeout=10) == []
    assert len({id(c) for c in clients}) == 1
    assert get_jetstream().account_info() is not None
    assert connection_settings() is connection_settings()  # parsed once while the setting is unchanged


def test_a_closed_client_is_replaced(nats_server):
    first = get_client()
    close_clients()
    assert first.is_closed
    second = get_client()
    assert second is not first and not second.is_closed


def test_a_forked_child_connects_its_own_client(nats_server, js, name):
    parent = get_client()
    js.create_stream(StreamConfig(name=name, subjects=[f"{name}.>"]))
    pid = os.fork()
    if pid == 0:  # the child: its own client, usable at once; never the parent's
        code = 1
        try:
            child = get_client()
            if child is not parent and get_jetstream().publish(f"{name}.child", b"hi").seq == 1:
                code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert get_client() is parent and js.stream_info(name).state.messages == 1
