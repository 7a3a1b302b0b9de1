"""What the service commands share (``flask jetstream service``, ``manage.py jetstream_service``): finding the
service a path names, and running it until SIGTERM or SIGINT, then stopping it gracefully.

The command is the process, as a consume command is (``_consume.py``): SIGTERM (a deployment) or Ctrl-C stops the
service gracefully (no new requests; the ones taken are finished and answered; exit 0), a second signal stops at
once (the connection closes: requests waiting and handlers still running are abandoned, their callers time out;
exit 1), and a service that stops
by itself or a stop that outlasts its timeout is an error the framework reports in its own way:
`CommandFailed`.
"""

from __future__ import annotations

import importlib
import logging
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager

from .. import errors
from ..client import Client
from ..services import Service
from ._consume import CommandFailed, _signals_to

__all__ = ["load_service", "run_service_until_signalled"]

log = logging.getLogger("jetstream_sync.integrations")

#: how often the waiting main thread looks at whether the service stopped by itself
_POLL = 0.25


def load_service(path: str) -> Service:
    """The [`Service`][jetstream_sync.services.Service] that ``path`` names: ``package.module:attribute`` or
    ``package.module.attribute``, a Service or a function of no arguments returning one (a factory).
    CommandFailed saying what is wrong otherwise."""
    if ":" in path:
        module_name, _, attribute = path.partition(":")
    else:
        module_name, _, attribute = path.rpartition(".")
    if not module_name or not attribute:
        raise CommandFailed(f"{path!r} is not of the form package.module:service")
    try:
        target: object = importlib.import_module(module_name)
    except ImportError as exc:
        raise CommandFailed(f"cannot import {module_name!r}: {exc}") from exc
    for part in attribute.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise CommandFailed(f"{module_name!r} has no {attribute!r}") from None
    if not isinstance(target, Service) and callable(target):
        target = target()
    if not isinstance(target, Service):
        raise CommandFailed(f"{path!r} is a {type(target).__name__}, not a jetstream_sync.services.Service")
    return target


def run_service_until_signalled(
    service: Service,
    client: Client,
    *,
    workers: int | None,
    stop_timeout: float,
    say: Callable[[str], None],
    around: Callable[[], AbstractContextManager[object]] | None = None,
) -> int:
    """Run ``service`` on ``client`` until SIGTERM or SIGINT, then stop it within ``stop_timeout`` seconds and
    flush its replies; returns how many requests it answered. ``say`` tells the person running the command what
    happens. CommandFailed when the service cannot start, stops by itself, does not stop in time, or a second
    signal stops it at once."""
    signals: list[int] = []
    signalled = threading.Event()

    def on_signal(signum: int) -> None:
        signals.append(signum)
        signalled.set()

    label = f"{service.name} {service.version}"
    with _signals_to(on_signal):
        try:
            instance = service.start(client, workers=workers, around=around)
        except errors.JetStreamError as exc:
            raise CommandFailed(f"cannot start service {label}: {exc}") from exc
        subjects = ", ".join(endpoint.subject for endpoint in instance.endpoints) or "no endpoints"
        say(f"serving {label} as {instance.id} ({subjects}); SIGTERM or Ctrl-C stops it")
        while not signalled.wait(_POLL):
            if instance.wait(0):
                raise CommandFailed(f"service {label} stopped: {instance.error!r}")
        log.info("service %s: signal %d, stopping", label, signals[0])
        say(f"stopping {label}: taking no new requests, finishing those in hand")
        failure: list[BaseException] = []

        def stop() -> None:
            try:
                instance.stop(stop_timeout)
            except errors.JetStreamError as exc:
                failure.append(exc)

        stopper = threading.Thread(target=stop, name=f"jetstream-sync-service-{service.name}-stop", daemon=True)
        stopper.start()
        while stopper.is_alive():
            stopper.join(0.1)  # short slices: a second signal stops at once
            if len(signals) > 1 and stopper.is_alive():
                log.warning("service %s: second signal, stopping without finishing the requests in hand", label)
                client.close(timeout=1.0)  # the instance stops at once; what waits is dropped
                raise CommandFailed(f"service {label} stopped at once on a second signal")
        if failure:
            client.flush(timeout=stop_timeout)  # what was answered goes out before the process exits
            raise CommandFailed(str(failure[0]))
    client.flush(timeout=stop_timeout)
    answered = sum(endpoint.num_requests for endpoint in instance.stats().endpoints)
    say(f"stopped {label} after {answered} request(s)")
    return answered
