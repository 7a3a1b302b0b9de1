"""Credentials from memory and from callbacks, against real nats-servers: read at every connection attempt (so a
rotated secret needs no restart), made off the IO thread with a bound, and never shown.

JWTs and seeds come as strings (``credentials_data``, ``user_jwt`` with ``nkey_seed``) or from functions
(``user_jwt_callback``, ``signature_callback`` with ``nkey``); tokens and user/password from ``token_callback``
and ``user_info_callback``. A function that raises or hangs fails that attempt with ConnectCallbackError.
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import jetstream_sync
from jetstream_sync import errors
from jetstream_sync.testing import EmbeddedServer
from tests.helpers import our_threads, wait_until
from tests.server.test_security import (
    _LOGGERS,
    Reported,
    _exception_texts,
    new_keypair,
    operator_setup,
    roundtrip,
)

nkeys = pytest.importorskip("nkeys", reason="nkey and JWT auth need the nkeys package")

_CONNECT_THREAD = "jetstream-sync-connect"


class Secret:
    """A secret a callback hands out: changed by the test, read by the client at every attempt."""

    def __init__(self, value: Any) -> None:
        self.value = value
        self.calls = 0
        self.threads: set[str] = set()
        self._lock = threading.Lock()

    def __call__(self) -> Any:
        with self._lock:
            self.calls += 1
            self.threads.add(threading.current_thread().name)
            return self.value


@pytest.fixture(scope="module")
def operator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[EmbeddedServer, str, str]]:
    """A decentralized-auth server, the good .creds text, and its user seed."""
    config, good, _wrong, seed = operator_setup(tmp_path_factory.mktemp("operator"))
    with EmbeddedServer(config=config) as server:
        yield server, good.read_text(encoding="utf-8"), seed


def _jwt_of(creds: str) -> str:
    return creds.split("-----BEGIN NATS USER JWT-----\n")[1].split("\n", maxsplit=1)[0]


@pytest.fixture(scope="module")
def user_password() -> Iterator[tuple[EmbeddedServer, str]]:
    password = secrets.token_hex(16)
    with EmbeddedServer(config=f'authorization {{ user: alice, password: "{password}" }}') as server:
        yield server, password


def test_credentials_data_connects_from_memory(operator: tuple[EmbeddedServer, str, str]) -> None:
    server, creds, _seed = operator
    with jetstream_sync.connect(server.url, credentials_data=creds) as nc:
        roundtrip(nc)


def test_user_jwt_with_a_seed_string(operator: tuple[EmbeddedServer, str, str], tmp_path: Path) -> None:
    server, creds, seed = operator
    with jetstream_sync.connect(server.url, user_jwt=_jwt_of(creds), nkey_seed=seed) as nc:
        roundtrip(nc)
    seed_file = tmp_path / "user.nk"
    seed_file.write_text(seed, encoding="utf-8")
    with jetstream_sync.connect(server.url, user_jwt=_jwt_of(creds), nkey_seed_file=seed_file) as nc:
        roundtrip(nc)


def test_user_jwt_and_signature_callbacks_run_on_the_connect_thread(
    operator: tuple[EmbeddedServer, str, str],
) -> None:
    server, creds, seed = operator
    jwt = Secret(_jwt_of(creds))
    signed: list[tuple[bytes, str]] = []

    def sign(nonce: bytes) -> bytes:  # as an HSM or a KMS would: the seed never reaches the client
        signed.append((nonce, threading.current_thread().name))
        pair = nkeys.from_seed(bytearray(seed.encode()))
        return bytes(pair.sign(nonce))

    # reconnect_wait: the server just connected to is tried again after it (nats-py's default: 2 s)
    with jetstream_sync.connect(server.url, user_jwt_callback=jwt, signature_callback=sign, reconnect_wait=0.05) as nc:
        roundtrip(nc)
        nc.force_reconnect()
        wait_until(lambda: nc.reconnects == 1 and nc.is_connected, timeout=10)
        roundtrip(nc)
    assert jwt.calls == 2 and len(signed) == 2  # read again for the reconnect
    assert jwt.threads == {_CONNECT_THREAD} and {thread for _, thread in signed} == {_CONNECT_THREAD}
    assert signed[0][0] != signed[1][0]  # each attempt signs its own nonce


def test_nkey_with_a_signature_callback() -> None:
    user = new_keypair(nkeys.PREFIX_BYTE_USER)
    config = f"authorization {{ users = [ {{ nkey: {user.public_key.decode()} }} ] }}"
    with EmbeddedServer(config=config) as server:
        with jetstream_sync.connect(
            server.url, nkey=user.public_key.decode(), signature_callback=lambda nonce: bytes(user.sign(nonce))
        ) as nc:
            roundtrip(nc)
        other = new_keypair(nkeys.PREFIX_BYTE_USER)
        with pytest.raises(errors.AuthorizationError):
            jetstream_sync.connect(
                server.url, nkey=user.public_key.decode(), signature_callback=lambda nonce: bytes(other.sign(nonce))
            )


def test_a_rotated_password_is_read_at_the_next_connect(user_password: tuple[EmbeddedServer, str]) -> None:
    server, password = user_password
    secret = Secret(("alice", password))
    reported = Reported()
    with jetstream_sync.connect(
        server.url, user_info_callback=secret, reconnect_wait=0.05, max_reconnect_attempts=-1, error_callback=reported
    ) as nc:
        roundtrip(nc)
        secret.value = ("alice", "rotated-away")  # the next attempt is refused: the callback was read again
        nc.force_reconnect()
        wait_until(lambda: reported.of(errors.AuthorizationError), timeout=10)
        assert not nc.is_connected
        secret.value = ("alice", password)  # rotated back: the client recovers without a restart
        nc.wait_connected(10)
        roundtrip(nc)
    assert secret.threads == {_CONNECT_THREAD}


def test_a_token_callback_is_read_at_every_connect() -> None:
    token = secrets.token_hex(16)
    with EmbeddedServer(config=f'authorization {{ token: "{token}" }}') as server:
        secret = Secret(token)
        with jetstream_sync.connect(server.url, token_callback=secret, reconnect_wait=0.05) as nc:
            roundtrip(nc)
            nc.force_reconnect()
            wait_until(lambda: nc.reconnects == 1 and nc.is_connected, timeout=10)
        assert secret.calls == 2
        with pytest.raises(errors.AuthorizationError):
            jetstream_sync.connect(server.url, token_callback=lambda: "not-" + token)


def test_a_raising_callback_fails_the_connect_with_its_cause(user_password: tuple[EmbeddedServer, str]) -> None:
    server, _password = user_password

    def broken() -> tuple[str, str]:
        raise KeyError("the secret manager has no such key")

    before = set(our_threads())
    with pytest.raises(errors.ConnectCallbackError, match="user_info_callback raised KeyError") as caught:
        jetstream_sync.connect(server.url, user_info_callback=broken)
    assert isinstance(caught.value.__cause__, KeyError)
    with pytest.raises(errors.ConnectCallbackError, match=r"must return a \(user, password\) tuple"):
        jetstream_sync.connect(server.url, user_info_callback=lambda: "alice")
    wait_until(lambda: set(our_threads()) <= before, timeout=5)


def test_a_hanging_callback_is_bounded_and_the_client_recovers(
    user_password: tuple[EmbeddedServer, str], caplog: pytest.LogCaptureFixture
) -> None:
    server, password = user_password
    release = threading.Event()

    def slow() -> tuple[str, str]:
        release.wait(10)  # a secret manager that does not answer
        return "alice", password

    started = time.monotonic()
    with (
        caplog.at_level(logging.WARNING, logger="jetstream_sync"),
        pytest.raises(errors.ConnectCallbackError, match=r"did not return within 0\.5s"),
    ):
        jetstream_sync.connect(server.url, user_info_callback=slow, connect_timeout=0.5)
    assert time.monotonic() - started < 3
    # the function keeps its thread after the failed connect, and the log says so
    assert "slow still runs on jetstream-sync-connect after the client closed" in caplog.text
    release.set()
    # with retry_on_failed_connect the stuck function costs attempts, never the IO thread: once it answers
    # in time, the client connects
    release.clear()
    reported = Reported()
    nc = jetstream_sync.connect(
        server.url,
        user_info_callback=slow,
        connect_timeout=0.5,
        retry_on_failed_connect=True,
        reconnect_wait=0.05,
        max_reconnect_attempts=-1,
        error_callback=reported,
    )
    try:
        wait_until(lambda: reported.of(errors.ConnectCallbackError), timeout=10)
        assert nc.is_reconnecting
        release.set()
        nc.wait_connected(10)
        roundtrip(nc)
    finally:
        nc.close()


def test_inconsistent_credentials_are_refused_before_connecting(operator: tuple[EmbeddedServer, str, str]) -> None:
    server, creds, seed = operator
    cases: list[tuple[dict[str, Any], str]] = [
        ({"user_jwt": _jwt_of(creds)}, "user_jwt"),  # nothing to sign with
        ({"credentials_data": creds, "nkey_seed": seed}, "nkey_seed"),
        ({"token": "a", "token_callback": lambda: "b"}, "token_callback"),
        ({"user": "a", "user_info_callback": lambda: ("a", "b")}, "user_info_callback"),
        ({"signature_callback": lambda nonce: b""}, "signature_callback"),
        ({"credentials_data": "no blocks here"}, "credentials_data"),
        ({"nkey": "not-a-key", "signature_callback": lambda nonce: b""}, "nkey"),
    ]
    for kwargs, field in cases:
        with pytest.raises(errors.InvalidArgumentError) as caught:
            jetstream_sync.connect(server.url, **kwargs)
        assert caught.value.field == field, kwargs


def test_secrets_in_memory_never_show(
    operator: tuple[EmbeddedServer, str, str],
    user_password: tuple[EmbeddedServer, str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    server, creds, seed = operator
    for name in _LOGGERS:
        caplog.set_level(logging.DEBUG, logger=name)
    jwt = _jwt_of(creds)
    texts: list[str] = []
    options = jetstream_sync.ConnectOptions(servers=server.url, credentials_data=creds)
    texts += [repr(options), str(options)]
    with jetstream_sync.connect(server.url, user_jwt=jwt, nkey_seed=seed, name="secretive") as nc:
        texts += [repr(nc), repr(nc.options)]
        roundtrip(nc)
    pw_server, password = user_password
    with pytest.raises(errors.AuthorizationError) as caught:
        jetstream_sync.connect(pw_server.url, user_info_callback=lambda: ("alice", "wrong-" + password))
    texts += _exception_texts(caught.value)
    with pytest.raises(errors.ConnectCallbackError) as caught_type:
        jetstream_sync.connect(pw_server.url, token_callback=lambda: 12345)
    texts += _exception_texts(caught_type.value)
    texts.append(caplog.text)
    joined = "\n".join(texts)
    for secret in (seed, jwt, password, "12345"):
        assert secret not in joined
