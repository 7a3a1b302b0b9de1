"""``manage.py jetstream_consume`` as a deployment runs it: a subprocess against a real server (the example
project's manage.py and handler), acking what the handler returns from, nak'ing what it raises on, draining
on SIGTERM and SIGINT with exit 0; a bad handler path or a missing consumer fails before anything runs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from jetstream_sync import AckPolicy, ConsumerConfig, StreamConfig
from tests.helpers import REPO_ROOT, wait_until

MANAGE = REPO_ROOT / "examples" / "django_project" / "manage.py"


def command(url: str, *args: str) -> list[str]:
    return [sys.executable, str(MANAGE), "jetstream_consume", *args]


def start(url: str, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "NATS_URL": url}
    return subprocess.Popen(
        command(url, *args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=REPO_ROOT
    )


def run(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NATS_URL": url}
    return subprocess.run(command(url, *args), capture_output=True, text=True, env=env, cwd=REPO_ROOT, timeout=60)


@pytest.fixture
def orders(js, name):
    js.create_stream(StreamConfig(name=name, subjects=[f"{name}.>"]))
    js.create_consumer(name, ConsumerConfig(durable_name="fulfilment", ack_policy=AckPolicy.EXPLICIT, ack_wait=30))
    return name


def publish_orders(js, stream: str, items: list[str]) -> None:
    for n, item in enumerate(items, 1):
        js.publish(f"{stream}.{item}", json.dumps({"item": item, "n": n}).encode())


def all_acked(js, stream: str, count: int) -> bool:
    info = js.consumer_info(stream, "fulfilment")
    return info.ack_floor.stream_seq == count and info.num_ack_pending == 0 and info.num_pending == 0


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_consumes_acks_and_drains_on_a_signal(nats_server, js, orders, sig):
    items = ["book", "flaky", "lamp", "chair", "desk", "pen"]
    publish_orders(js, orders, items)
    worker = start(nats_server.url, orders, "fulfilment", "--handler", "shop.handlers.fulfil", "--workers", "3")
    try:
        wait_until(lambda: all_acked(js, orders, len(items)), timeout=20)
        worker.send_signal(sig)
        out, err = worker.communicate(timeout=30)
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.communicate()
    assert worker.returncode == 0, err
    assert "consuming" in out and " and stopped after " in out
    assert "handler failed on" in err and "RuntimeError: the warehouse did not answer" in err  # logged, nak'd
    assert "fulfilled order 2 (flaky), delivery 2" in err  # redelivered at once and acked the second time
    assert err.count("fulfilled order") == len(items)
    assert js.consumer_info(orders, "fulfilment").delivered.stream_seq == len(items)


def test_a_handler_path_that_does_not_import_fails_clearly(nats_server, orders):
    result = run(nats_server.url, orders, "fulfilment", "--handler", "shop.handlers.nope")
    assert result.returncode == 1
    assert "CommandError: --handler 'shop.handlers.nope' cannot be imported" in result.stderr
    result = run(nats_server.url, orders, "fulfilment", "--handler", "shop.settings.DEBUG")
    assert result.returncode == 1 and "is a bool, not a function" in result.stderr


def test_a_missing_consumer_fails_clearly(nats_server, orders):
    result = run(nats_server.url, orders, "nobody", "--handler", "shop.handlers.fulfil")
    assert result.returncode == 1 and f"CommandError: {orders}/nobody" in result.stderr
    result = run(nats_server.url, orders, "fulfilment", "--handler", "shop.handlers.fulfil", "--workers", "0")
    assert result.returncode == 1 and "--workers must be at least 1" in result.stderr
