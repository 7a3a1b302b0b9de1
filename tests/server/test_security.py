"""Security against a real nats-server: every auth method, subject permissions, TLS, and secrets kept out of sight.

Each auth method gets its own nats-server (user/password, token, nkey, and a decentralized-auth operator with a
credentials file whose JWTs are signed here). A right secret connects; a wrong one raises AuthorizationError at
once, after at most two attempts at the server (counted in its monitoring ``/connz?state=closed``). TLS uses a
throwaway CA from ``trustme``. The secret strings must never show in repr(), logs or exception text.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import os
import secrets
import ssl
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import jetstream_sync
from jetstream_sync import errors
from jetstream_sync.testing import EmbeddedServer
from tests.helpers import our_threads, wait_until

nkeys = pytest.importorskip("nkeys", reason="nkey and credentials auth need the nkeys package")
trustme = pytest.importorskip("trustme", reason="the TLS tests make their certificates with trustme")

_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))
_FAILS_WITHIN = 3.0  # seconds: a rejected secret or a bad certificate must not make connect() wait
_AUTH_FAILURE = "Authentication Failure"  # the reason nats-server records for a rejected CONNECT
_CALLBACKS = "jetstream-sync-callbacks"
_LOGGERS = ("", "jetstream_sync", "jetstream_sync.testing", "nats", "nats.aio.client", "asyncio")


# -- nkeys and JWTs ---------------------------------------------------------------------------------------------


def new_keypair(prefix: int) -> Any:
    """A fresh nkey pair of one role (operator, account, user); ``.seed`` and ``.public_key`` are bytes."""
    return nkeys.from_seed(bytearray(nkeys.encode_seed(os.urandom(32), prefix)))


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def encode_jwt(issuer: Any, subject: str, name: str, nats: dict[str, Any]) -> str:
    """A NATS JWT as nsc would write it: base64url header and claims, signed with the issuer's ed25519 nkey."""
    claims: dict[str, Any] = {
        "iat": int(time.time()),
        "iss": issuer.public_key.decode(),
        "name": name,
        "sub": subject,
        "nats": {"version": 2, **nats},
    }
    digest = hashlib.sha256(json.dumps(claims, sort_keys=True).encode()).digest()
    claims["jti"] = base64.b32encode(digest).decode().rstrip("=")
    header = _b64(json.dumps({"typ": "JWT", "alg": "ed25519-nkey"}).encode())
    body = _b64(json.dumps(claims).encode())
    signature = issuer.sign(f"{header}.{body}".encode())
    return f"{header}.{body}.{_b64(signature)}"


_UNLIMITED = {"subs": -1, "data": -1, "payload": -1, "imports": -1, "exports": -1, "wildcards": True, "conn": -1}
_UNLIMITED_JS = {"mem_storage": -1, "disk_storage": -1, "streams": -1, "consumer": -1}


def creds_text(user_jwt: str, seed: str) -> str:
    return (
        f"-----BEGIN NATS USER JWT-----\n{user_jwt}\n------END NATS USER JWT------\n\n"
        "************************* IMPORTANT *************************\n"
        "NKEY Seed printed below can be used to sign and prove identity.\n\n"
        f"-----BEGIN USER NKEY SEED-----\n{seed}\n------END USER NKEY SEED------\n"
    )


def operator_setup(directory: Path) -> tuple[str, Path, Path, str]:
    """Operator, system account, account and user, all signed here.

    Returns the server config (``operator``, ``resolver: MEMORY``, ``resolver_preload``), a good creds file, a
    creds file with the right JWT but another seed (a wrong secret), and the good user seed.
    """
    operator = new_keypair(nkeys.PREFIX_BYTE_OPERATOR)
    system = new_keypair(nkeys.PREFIX_BYTE_ACCOUNT)
    account = new_keypair(nkeys.PREFIX_BYTE_ACCOUNT)
    user = new_keypair(nkeys.PREFIX_BYTE_USER)
    system_pub, account_pub = system.public_key.decode(), account.public_key.decode()
    operator_jwt = encode_jwt(
        operator, operator.public_key.decode(), "op", {"type": "operator", "system_account": system_pub}
    )
    system_jwt = encode_jwt(operator, system_pub, "SYS", {"type": "account", "limits": _UNLIMITED})
    account_jwt = encode_jwt(
        operator, account_pub, "app", {"type": "account", "limits": {**_UNLIMITED, **_UNLIMITED_JS}}
    )
    user_claims = {"type": "user", "pub": {}, "sub": {}, "subs": -1, "data": -1, "payload": -1}
    user_jwt = encode_jwt(account, user.public_key.decode(), "app-user", user_claims)
    config = (
        f"operator: {operator_jwt}\n"
        f"system_account: {system_pub}\n"
        "resolver: MEMORY\n"
        f"resolver_preload: {{\n  {system_pub}: {system_jwt}\n  {account_pub}: {account_jwt}\n}}\n"
    )
    good = directory / "user.creds"
    good.write_text(creds_text(user_jwt, user.seed.decode()), encoding="utf-8")
    wrong = directory / "wrong.creds"
    wrong_seed = new_keypair(nkeys.PREFIX_BYTE_USER).seed.decode()
    wrong.write_text(creds_text(user_jwt, wrong_seed), encoding="utf-8")
    return config, good, wrong, user.seed.decode()


# -- servers, one per auth method -------------------------------------------------------------------------------


@dataclass
class Secured:
    """A server that wants one kind of secret, the connect() arguments that pass and fail, and the secrets."""

    method: str
    server: EmbeddedServer
    good: dict[str, Any]
    bad: dict[str, Any]
    secrets: list[str] = field(default_factory=list)


def _secured(method: str, directory: Path) -> tuple[str, dict[str, Any], dict[str, Any], list[str]]:
    if method == "user_password":
        password, wrong = secrets.token_hex(16), secrets.token_hex(16)
        config = f'authorization {{ user: alice, password: "{password}" }}'
        return config, {"user": "alice", "password": password}, {"user": "alice", "password": wrong}, [password, wrong]
    if method == "token":
        token, wrong = secrets.token_hex(16), secrets.token_hex(16)
        return f'authorization {{ token: "{token}" }}', {"token": token}, {"token": wrong}, [token, wrong]
    if method in ("nkey_seed", "nkey_seed_file"):
        user, stranger = new_keypair(nkeys.PREFIX_BYTE_USER), new_keypair(nkeys.PREFIX_BYTE_USER)
        config = f"authorization {{ users = [ {{ nkey: {user.public_key.decode()} }} ] }}"
        seed, wrong = user.seed.decode(), stranger.seed.decode()
        if method == "nkey_seed":
            return config, {"nkey_seed": seed}, {"nkey_seed": wrong}, [seed, wrong]
        (directory / "user.nk").write_text(seed + "\n", encoding="utf-8")
        (directory / "wrong.nk").write_text(wrong + "\n", encoding="utf-8")
        good = {"nkey_seed_file": directory / "user.nk"}
        return config, good, {"nkey_seed_file": directory / "wrong.nk"}, [seed, wrong]
    assert method == "credentials"
    config, good_creds, wrong_creds, seed = operator_setup(directory)
    wrong_seed = wrong_creds.read_text(encoding="utf-8").split("SEED-----\n")[1].split("\n")[0]
    return config, {"credentials": good_creds}, {"credentials": wrong_creds}, [seed, wrong_seed]


AUTH_METHODS = ["user_password", "token", "nkey_seed", "nkey_seed_file", "credentials"]


@pytest.fixture(scope="module", params=AUTH_METHODS)
def secured(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    method = request.param
    directory = tmp_path_factory.mktemp(method)
    config, good, bad, secret_values = _secured(method, directory)
    with EmbeddedServer(config=config) as server:
        yield Secured(method, server, good, bad, secret_values)


def closed_connections(server: EmbeddedServer, reason: str) -> int:
    """How many closed client connections the server recorded with this reason."""
    with _DIRECT.open(f"{server.monitor_url}/connz?state=closed&limit=100000", timeout=2) as response:
        connz = json.loads(response.read())
    return sum(1 for conn in connz.get("connections") or [] if conn.get("reason") == reason)


def roundtrip(nc: jetstream_sync.Client) -> None:
    """Core publish/subscribe and a JetStream API call work on this connection."""
    subject = f"sec.{uuid.uuid4().hex}"
    sub = nc.subscribe(subject)
    nc.publish(subject, b"hello")
    assert sub.next_msg(timeout=5).data == b"hello"
    sub.unsubscribe()
    assert nc.jetstream().account_info().limits.max_streams == -1


# -- 1. authentication ------------------------------------------------------------------------------------------


def test_right_secret_connects(secured: Secured) -> None:
    with jetstream_sync.connect(secured.server.url, name=f"sec-{secured.method}", **secured.good) as nc:
        assert nc.is_connected
        assert nc.server_info["auth_required"] is True
        roundtrip(nc)


def test_no_secret_is_refused(secured: Secured) -> None:
    with pytest.raises(errors.AuthorizationError):
        jetstream_sync.connect(secured.server.url)
    wait_until(lambda: not our_threads(), timeout=2)


def test_wrong_secret_fails_at_once_without_a_retry_storm(secured: Secured) -> None:
    server = secured.server
    before = closed_connections(server, _AUTH_FAILURE)
    started = time.monotonic()
    with pytest.raises(errors.AuthorizationError, match="rejected the credentials") as caught:
        jetstream_sync.connect(server.url, connect_timeout=2, **secured.bad)
    elapsed = time.monotonic() - started
    assert elapsed < _FAILS_WITHIN, f"connect() took {elapsed:.2f}s to report rejected credentials"
    assert "Authorization Violation" in str(caught.value)
    assert not isinstance(caught.value, errors.NoServersError)
    # The server closes the rejected connections; give it a moment to record them, then no more may come.
    wait_until(lambda: closed_connections(server, _AUTH_FAILURE) > before, timeout=5)
    time.sleep(0.5)  # an observation window: a retry storm would show up here; an absence cannot be waited for
    attempts = closed_connections(server, _AUTH_FAILURE) - before
    assert 1 <= attempts <= 2, f"the server saw {attempts} connect attempts with the wrong secret"
    wait_until(lambda: not our_threads(), timeout=2)


def test_each_server_is_tried_at_most_twice_with_a_wrong_secret() -> None:
    password = secrets.token_hex(16)
    config = f'authorization {{ user: alice, password: "{password}" }}'
    with EmbeddedServer(config=config) as one, EmbeddedServer(config=config) as two:
        started = time.monotonic()
        with pytest.raises(errors.AuthorizationError):
            jetstream_sync.connect([one.url, two.url], user="alice", password="not-" + password)
        assert time.monotonic() - started < _FAILS_WITHIN
        for server in (one, two):
            wait_until(lambda server=server: closed_connections(server, _AUTH_FAILURE) >= 1, timeout=5)
        time.sleep(0.5)  # an observation window: further attempts would show up here; an absence cannot be waited for
        attempts = [closed_connections(server, _AUTH_FAILURE) for server in (one, two)]
        assert all(1 <= n <= 2 for n in attempts), f"attempts per server: {attempts}"


@pytest.mark.parametrize("secured", ["nkey_seed", "nkey_seed_file", "credentials"], indirect=True)
def test_missing_nkeys_package_is_named(secured: Secured, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "nkeys", None)  # import nkeys now raises ImportError
    with pytest.raises(errors.InvalidArgumentError, match="nkeys") as caught:
        jetstream_sync.connect(secured.server.url, **secured.good)
    assert caught.value.field in ("nkey_seed", "nkey_seed_file", "credentials")
    wait_until(lambda: not our_threads(), timeout=2)


@pytest.mark.parametrize("secured", ["nkey_seed"], indirect=True)
@pytest.mark.parametrize("kind", ["nkey_seed", "nkey_seed_file"])
def test_malformed_nkey_seed_is_an_argument_error(secured: Secured, kind: str, tmp_path: Path) -> None:
    seed = "SU" + secrets.token_hex(20).upper()  # looks like a user seed, is none
    path = tmp_path / "bad.nk"
    path.write_text(seed, encoding="utf-8")
    argument = {"nkey_seed": seed} if kind == "nkey_seed" else {"nkey_seed_file": path}
    with pytest.raises(errors.InvalidArgumentError, match="not a usable nkey seed") as caught:
        jetstream_sync.connect(secured.server.url, **argument)
    assert caught.value.field == kind
    assert seed not in "\n".join(_exception_texts(caught.value))
    wait_until(lambda: not our_threads(), timeout=2)


# -- 2. subject permissions -------------------------------------------------------------------------------------

_PERMISSIONS = """
authorization {
  users = [
    { user: limited, password: "%s",
      permissions: { publish: { deny: ["secret.>"] }, subscribe: { deny: ["secret.>"] } } }
  ]
}
"""


@pytest.fixture(scope="module")
def restricted() -> Iterator[tuple[EmbeddedServer, str]]:
    password = secrets.token_hex(16)
    with EmbeddedServer(config=_PERMISSIONS % password) as server:
        yield server, password


class Reported:
    """An error callback that remembers each error and the thread it ran on."""

    def __init__(self) -> None:
        self.errors: list[BaseException] = []
        self.threads: list[str] = []
        self._lock = threading.Lock()

    def __call__(self, exc: BaseException) -> None:
        with self._lock:
            self.errors.append(exc)
            self.threads.append(threading.current_thread().name)

    def of(self, cls: type[BaseException]) -> list[BaseException]:
        with self._lock:
            return [exc for exc in self.errors if isinstance(exc, cls)]


@pytest.mark.parametrize(
    ("violate", "operation"),
    [
        (lambda nc: nc.publish("secret.x", b"no"), "publish"),
        (lambda nc: nc.subscribe("secret.>"), "subscription"),
    ],
    ids=["publish", "subscribe"],
)
def test_permission_violation_reaches_the_error_callback_typed(
    restricted: tuple[EmbeddedServer, str], violate: Callable[[jetstream_sync.Client], object], operation: str
) -> None:
    server, password = restricted
    reported = Reported()
    with jetstream_sync.connect(server.url, user="limited", password=password, error_callback=reported) as nc:
        violate(nc)
        nc.flush()
        wait_until(lambda: reported.of(errors.PermissionViolationError), timeout=5)
        exc = reported.of(errors.PermissionViolationError)[0]
        assert f"permissions violation for {operation}" in str(exc).lower()  # nats-py lowercases -ERR texts
        assert "secret." in str(exc)
        assert set(reported.threads) == {_CALLBACKS}
        # The violation does not cost the connection: allowed subjects still work.
        assert nc.is_connected
        sub = nc.subscribe("public.x")
        nc.publish("public.x", b"ok")
        assert sub.next_msg(timeout=5).data == b"ok"
    assert not [e for e in reported.errors if not isinstance(e, errors.PermissionViolationError)]


def test_permission_violation_without_callback_is_logged(
    restricted: tuple[EmbeddedServer, str], caplog: pytest.LogCaptureFixture
) -> None:
    server, password = restricted
    with (
        caplog.at_level(logging.WARNING, logger="jetstream_sync"),
        jetstream_sync.connect(server.url, user="limited", password=password) as nc,
    ):
        nc.publish("secret.y", b"no")
        nc.flush()
        wait_until(lambda: "permissions violation for publish" in caplog.text.lower(), timeout=5)
    assert any(r.levelno == logging.WARNING and "secret.y" in r.getMessage() for r in caplog.records)
    assert password not in caplog.text


# -- 3. TLS -----------------------------------------------------------------------------------------------------


@dataclass
class TLSSetup:
    ca: Any
    server: EmbeddedServer

    def trusting(self) -> ssl.SSLContext:
        return _trusting(self.ca)


def _tls_server(directory: Path, ca: Any, extra: str = "") -> EmbeddedServer:
    cert = ca.issue_cert("127.0.0.1", "localhost")
    cert.private_key_pem.write_to_path(str(directory / "server.key"))
    cert.cert_chain_pems[0].write_to_path(str(directory / "server.pem"))
    ca.cert_pem.write_to_path(str(directory / "ca.pem"))
    config = (
        "tls {\n"
        f'  cert_file: "{directory / "server.pem"}"\n'
        f'  key_file: "{directory / "server.key"}"\n'
        "  timeout: 2\n"
        f"{extra}}}"
    )
    return EmbeddedServer(config=config)


def _trusting(ca: Any) -> ssl.SSLContext:
    context = ssl.create_default_context()
    ca.configure_trust(context)
    return context


@pytest.fixture(scope="module")
def tls_setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TLSSetup]:
    ca = trustme.CA()
    with _tls_server(tmp_path_factory.mktemp("tls"), ca) as server:
        yield TLSSetup(ca, server)


@pytest.mark.parametrize("scheme", ["nats", "tls"])
def test_tls_with_a_trusted_ca_connects(tls_setup: TLSSetup, scheme: str) -> None:
    url = tls_setup.server.url.replace("nats://", f"{scheme}://")
    with jetstream_sync.connect(url, tls=tls_setup.trusting()) as nc:
        assert nc.server_info["tls_required"] is True
        assert not nc._runtime._nc.gate.bound  # the socket belongs to the TLS layer: requests go through the IO thread
        roundtrip(nc)
        assert nc._runtime._nc.gate.direct_writes == 0


def test_tls_hostname_is_checked_against_the_certificate(tls_setup: TLSSetup) -> None:
    with jetstream_sync.connect(tls_setup.server.url, tls=tls_setup.trusting(), tls_hostname="localhost") as nc:
        roundtrip(nc)
    started = time.monotonic()
    with pytest.raises(errors.NoServersError, match=r"(?i)TLS.*certificate|certificate.*TLS"):
        jetstream_sync.connect(tls_setup.server.url, tls=tls_setup.trusting(), tls_hostname="elsewhere.invalid")
    assert time.monotonic() - started < _FAILS_WITHIN


@pytest.mark.parametrize(
    ("scheme", "context"),
    [
        ("nats", lambda: ssl.create_default_context()),  # the system CAs do not know our throwaway CA
        ("tls", lambda: ssl.create_default_context()),
        ("tls", lambda: None),  # no tls= at all: nats-py falls back to the system CAs
        ("nats", lambda: _trusting(trustme.CA())),  # a context that trusts another CA
    ],
    ids=["nats-system-cas", "tls-system-cas", "tls-default-context", "other-ca"],
)
def test_untrusted_certificate_fails_quickly_and_clearly(
    tls_setup: TLSSetup, scheme: str, context: Callable[[], ssl.SSLContext | None]
) -> None:
    url = tls_setup.server.url.replace("nats://", f"{scheme}://")
    started = time.monotonic()
    with pytest.raises(errors.NoServersError) as caught:
        jetstream_sync.connect(url, tls=context(), connect_timeout=2)
    elapsed = time.monotonic() - started
    assert elapsed < _FAILS_WITHIN, f"connect() took {elapsed:.2f}s to report an untrusted certificate"
    message = str(caught.value)
    assert "TLS handshake" in message
    assert "certificate verify failed" in message
    assert isinstance(caught.value.__cause__, ssl.SSLError)
    wait_until(lambda: not our_threads(), timeout=2)


def test_tls_client_certificate_verified_by_the_server(tmp_path: Path) -> None:
    ca = trustme.CA()
    with _tls_server(tmp_path, ca, extra=f'  ca_file: "{tmp_path / "ca.pem"}"\n  verify: true\n') as server:
        with_cert = ssl.create_default_context()
        ca.configure_trust(with_cert)
        ca.issue_cert("client.example").configure_cert(with_cert)
        with jetstream_sync.connect(server.url, tls=with_cert) as nc:
            roundtrip(nc)
        without_cert = ssl.create_default_context()
        ca.configure_trust(without_cert)
        started = time.monotonic()
        with pytest.raises(errors.NoServersError, match="TLS handshake") as caught:
            jetstream_sync.connect(server.url, tls=without_cert)
        assert time.monotonic() - started < _FAILS_WITHIN
        assert "certificate" in str(caught.value).lower()


def test_tls_wanted_but_server_without_tls_is_refused() -> None:
    ca = trustme.CA()
    context = ssl.create_default_context()
    ca.configure_trust(context)
    with EmbeddedServer() as server:
        for url, tls in [(server.url.replace("nats://", "tls://"), context), (server.url, context)]:
            with pytest.raises(errors.NoServersError, match="does not offer TLS"):
                jetstream_sync.connect(url, tls=tls).close()


# -- 4. secrets stay secret -------------------------------------------------------------------------------------


def _exception_texts(exc: BaseException | None) -> list[str]:
    """str() and repr() of an exception and of everything in its cause and context chain."""
    texts: list[str] = []
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        texts += [str(exc), repr(exc)]
        exc = exc.__cause__ or exc.__context__
    return texts


def test_secrets_never_show_in_repr_logs_or_errors(secured: Secured, caplog: pytest.LogCaptureFixture) -> None:
    for name in _LOGGERS:
        caplog.set_level(logging.DEBUG, logger=name)
    texts: list[str] = []
    reported = Reported()
    nc = jetstream_sync.connect(secured.server.url, name="secretive", error_callback=reported, **secured.good)
    try:
        texts += [repr(nc), str(nc), repr(nc.options), str(nc.options), repr(nc.server_info)]
        roundtrip(nc)
        nc.publish("secret.free", b"payload")
        nc.flush()
    finally:
        nc.close()
    texts += [repr(nc)]
    with pytest.raises(errors.AuthorizationError) as caught:
        jetstream_sync.connect(secured.server.url, error_callback=reported, **secured.bad)
    texts += _exception_texts(caught.value)
    for exc in reported.errors:
        texts += _exception_texts(exc)
    texts.append(caplog.text)
    texts += [record.getMessage() for record in caplog.records]
    texts.append(secured.server.log_tail(10_000))
    assert caplog.records, "nothing was logged; the capture is not working"
    joined = "\n".join(texts)
    for secret in secured.secrets:
        assert secret not in joined, f"a {secured.method} secret leaked"


def test_credentials_in_the_url_stay_out_of_connect_errors(unused_port: int, caplog: pytest.LogCaptureFixture) -> None:
    password, token = secrets.token_hex(16), secrets.token_hex(16)
    for name in _LOGGERS:
        caplog.set_level(logging.DEBUG, logger=name)
    urls = [f"nats://alice:{password}@127.0.0.1:{unused_port}", f"nats://{token}@127.0.0.1:{unused_port}"]
    with pytest.raises(errors.NoServersError, match="could not connect") as caught:
        jetstream_sync.connect(urls, connect_timeout=0.5)
    joined = "\n".join([*_exception_texts(caught.value), caplog.text])
    assert "***@127.0.0.1" in str(caught.value)
    assert password not in joined
    assert token not in joined


@pytest.mark.parametrize("secured", ["user_password"], indirect=True)
def test_credentials_in_the_url_stay_out_of_repr(secured: Secured) -> None:
    password = secured.good["password"]
    url = secured.server.url.replace("nats://", f"nats://alice:{password}@")
    with jetstream_sync.connect(url) as nc:
        assert password not in repr(nc) + repr(nc.options)
