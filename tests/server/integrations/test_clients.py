"""process_client: one client per process and settings, a new one after a close, and a fork's child its own."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator

import pytest

from jetstream_sync import Client, errors
from jetstream_sync.integrations._clients import close_process_clients, process_client
from jetstream_sync.integrations._connection import ConnectionSettings
from tests.helpers import run_in_fork, wait_until


@pytest.fixture(autouse=True)
def _close_process_clients() -> Iterator[None]:
    yield
    close_process_clients()


@pytest.fixture
def settings(nats_server) -> ConnectionSettings:
    return ConnectionSettings(servers=(nats_server.url,), name="process-client-tests")


def from_threads(settings: ConnectionSettings, count: int = 8) -> list[Client]:
    """``process_client(settings)`` asked by ``count`` threads at once (released by one barrier)."""
    seen: list[Client] = []
    barrier = threading.Barrier(count)

    def ask() -> None:
        barrier.wait(timeout=5)
        seen.append(process_client(settings))

    threads = [threading.Thread(target=ask) for _ in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    return seen


def test_the_same_client_for_the_same_settings_from_every_thread(settings, nats_server):
    first = process_client(settings)
    assert process_client(ConnectionSettings(servers=[nats_server.url], name="process-client-tests")) is first
    seen = from_threads(settings)
    assert len(seen) == 8 and all(client is first for client in seen)
    other = process_client(ConnectionSettings(servers=(nats_server.url,), name="other"))
    assert other is not first and other.is_connected and first.is_connected


def test_threads_racing_for_a_new_client_share_one_connection(nats_server):
    settings = ConnectionSettings(servers=(nats_server.url,), name="racing")  # not cached yet
    seen = from_threads(settings)
    assert len(seen) == 8 and len({id(client) for client in seen}) == 1


def test_a_new_client_after_close(settings):
    first = process_client(settings)
    close_process_clients()
    assert first.is_closed
    second = process_client(settings)
    assert second is not first and second.is_connected
    second.close()  # closed by its user: the next call connects again
    third = process_client(settings)
    assert third is not second and third.jetstream().account_info() is not None


def test_a_connect_failure_reaches_the_caller_and_the_next_call_tries_again(unused_port):
    settings = ConnectionSettings(servers=(f"nats://127.0.0.1:{unused_port}",), connect_timeout=0.5)
    for _ in range(2):
        with pytest.raises(errors.NoServersError):
            process_client(settings)


# Python 3.12+ warns on fork() in a process with threads: this test forks one on purpose.
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_a_forked_child_makes_its_own_client_and_the_parent_keeps_its_one(settings, js, stream):
    parent = process_client(settings)
    parent.jetstream().publish(f"{stream.name}.parent", b"before the fork")

    def child() -> bool:
        try:
            parent.jetstream().publish(f"{stream.name}.x", b"through the parent's client")
            return False  # the inherited client must refuse
        except errors.ForkedClientError:
            pass
        own = process_client(settings)
        ack = own.jetstream().publish(f"{stream.name}.child", b"from the child")
        close_process_clients()
        return own is not parent and ack.stream == stream.name

    assert run_in_fork(child) == 0
    assert process_client(settings) is parent and parent.is_connected
    ack = parent.jetstream().publish(f"{stream.name}.parent", b"after the fork")
    assert ack.seq == 3
    assert stream.get_last_msg(f"{stream.name}.child").data == b"from the child"


def test_clients_are_closed_at_exit_so_a_last_publish_is_delivered(settings, js, stream):
    code = (
        "from jetstream_sync.integrations._clients import process_client\n"
        "from jetstream_sync.integrations._connection import ConnectionSettings\n"
        f"client = process_client(ConnectionSettings(servers=({settings.servers[0]!r},)))\n"
        f"client.publish({stream.name + '.exit'!r}, b'last words')  # coalesced, not flushed\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
    wait_until(lambda: stream.info().state.messages == 1)
