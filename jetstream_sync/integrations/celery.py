"""Celery: one client per worker process ([`JetStream`][jetstream_sync.integrations.celery.JetStream]), and a result
backend on a KV bucket ([`ResultBackend`][jetstream_sync.integrations.celery.ResultBackend]).

    app = Celery("tasks", broker=...)
    app.conf.jetstream = {"SERVERS": ["nats://127.0.0.1:4222"], "NAME": "tasks"}
    jetstream = JetStream(app)

    @app.task
    def ship(order_id):
        jetstream.js.publish("orders.shipped", order_id.encode(), msg_id=order_id)

Celery's prefork pool forks its worker processes from the main one, and a client inherited through fork() is
unusable. So nothing connects when the app is made:
[`JetStream.client`][jetstream_sync.integrations.celery.JetStream.client] connects in the process that first uses it
(``process_client``), and each pool process gets its own. A pool process can end without running ``atexit`` hooks
(billiard leaves with ``os._exit``), which would drop publishes still buffered and acks not yet sent; so the extension
closes the process's clients on ``worker_process_shutdown`` (and the main process's on ``worker_shutdown``), which
writes out what is buffered first.

The settings are the keys of ``ConnectionSettings.from_mapping`` (``SERVERS``, ``NAME``, ``CREDENTIALS``,
``TLS_CA_FILE``, ``TIMEOUT``, ...) in ``app.conf.jetstream`` (or the name given as ``setting``); they are
checked when the extension is made if the app has them by then, else on first use.

The broker is the kombu transport ``jetstream_sync.integrations.kombu.Transport``; importing this module also
registers the ``jetstream://`` scheme with kombu (broker) and with Celery (result backend), so an app that
imports it selects both with two settings; docs/frameworks/celery.md has the settings.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Mapping, MutableSet
from typing import Any

from celery import Celery, signals, states
from celery.app import backends as celery_backends
from celery.backends.base import KeyValueStoreBackend
from celery.exceptions import TimeoutError as CeleryTimeoutError
from kombu.utils.encoding import bytes_to_str
from kombu.utils.url import parse_url

from .. import errors
from ..client import Client
from ..jetstream import JetStream as JetStreamContext
from ..jetstream.kv import KeyValue
from ..models import KeyValueConfig, StorageType
from . import kombu as _kombu  # noqa: F401 - importing it registers the jetstream:// broker scheme
from ._clients import close_process_clients, process_client
from ._connection import ConnectionSettings, redacted

__all__ = ["JetStream", "ResultBackend"]

log = logging.getLogger("jetstream_sync.integrations")


class JetStream:
    """The jetstream_sync extension of a Celery app: ``client`` and ``js`` of the current process."""

    def __init__(self, app: Celery, *, setting: str = "jetstream") -> None:
        if not isinstance(app, Celery):
            raise errors.InvalidTypeError("app", f"must be a celery.Celery, got {type(app).__name__}")
        if not isinstance(setting, str) or not setting:
            raise errors.InvalidArgumentError("setting", "must be the name of a key of app.conf")
        self.app = app
        self.setting = setting
        self._settings: ConnectionSettings | None = None
        if app.conf.get(setting) is not None:
            self.settings()  # checked now: a bad setting fails when the app is made, not in the first task
        signals.worker_process_shutdown.connect(_close_clients, weak=False)
        signals.worker_shutdown.connect(_close_clients, weak=False)

    def __repr__(self) -> str:
        return f"<JetStream for Celery app {self.app.main!r}>"

    def settings(self) -> ConnectionSettings:
        """The connection settings read from ``app.conf[setting]`` (read and checked once)."""
        if self._settings is None:
            raw = self.app.conf.get(self.setting)
            if not isinstance(raw, Mapping):
                raise errors.InvalidArgumentError(
                    f"app.conf.{self.setting}",
                    "must be a dict of connection settings, e.g. {'SERVERS': ['nats://127.0.0.1:4222']}",
                )
            self._settings = ConnectionSettings.from_mapping(raw, source=f"app.conf.{self.setting}")
        return self._settings

    @property
    def client(self) -> Client:
        """This process's client (connected on first use; a forked pool process connects its own)."""
        return process_client(self.settings())

    @property
    def js(self) -> JetStreamContext:
        """A JetStream context on this process's client (cheap: make one per use)."""
        return self.client.jetstream()


def _close_clients(**_: Any) -> None:
    """A worker process (or the main one) is ending: close its clients, writing out what they buffered."""
    log.debug("celery worker shutting down: closing this process's clients")
    close_process_clients()


#: the errors after which a store or read may be tried again (``exception_safe_to_retry``)
_RETRYABLE = (
    errors.NotConnectedError,
    errors.TimeoutError,
    errors.NoServersError,
    errors.NoRespondersError,
    errors.ClusterUnavailableError,
)
#: how often a waiting get() reads its keys again, in case a result's notice did not come (see get_many)
REREAD = 5.0
#: how many times an increment that lost a compare-and-set race is tried again
_INCR_TRIES = 50
#: the backend options of ``result_backend_transport_options`` (the connection keys in lower case pass too)
_BACKEND_OPTIONS = ("bucket", "replicas", "storage", "global_keyprefix")
_CONNECTION_OPTIONS = ("name", "token", "credentials", "nkey_seed_file", "tls_ca_file", "tls_cert_file",
                       "tls_key_file", "tls_hostname", "timeout", "connect_timeout")  # fmt: skip


class ResultBackend(KeyValueStoreBackend):  # type: ignore[misc]
    """Celery's results and states in a JetStream KV bucket (``celery_results`` by default).

    - **Selected** by ``result_backend = "jetstream://host:4222"`` in an app that imports this module, or
      without the import by ``"jetstream_sync.integrations.celery.ResultBackend+nats://host:4222"``; user and
      password in the URL, TLS with ``jetstreams://`` (or ``tls://``) and ``result_backend_transport_options``
      (``tls_ca_file``, ``token``, ``credentials``, ... as the other integrations' keys in lower case), and
      ``bucket``, ``replicas``, ``storage`` for the bucket.
    - **Expiry**: each result is written with a per-key TTL of ``result_expires`` (nats-server 2.11+; before,
      the bucket's TTL is ``result_expires`` for all keys); a chord's parts keep theirs until the chord is done.
    - **Waiting**: ``AsyncResult.get()`` and a group's ``join_native`` are woken by the write itself (a notice
      the writer publishes once the value is stored), not by polling; see
      [`get_many`][jetstream_sync.integrations.celery.ResultBackend.get_many].
    - **Chords**: the counter of finished header tasks is incremented with compare-and-set (the revision of
      the key), so two parts finishing at once both count and exactly one of them runs the body.
    - Results are readable by any process connected to the same account: another worker, a web process.
    """

    key_t = str
    implements_incr = True
    supports_native_join = True
    supports_autoexpire = True

    def __init__(self, app: Celery, url: str | None = None, **kwargs: Any) -> None:
        super().__init__(app, url=url, **kwargs)
        options = dict(self.app.conf.get("result_backend_transport_options") or {})
        unknown = set(options) - set(_BACKEND_OPTIONS) - set(_CONNECTION_OPTIONS)
        if unknown:
            raise errors.InvalidArgumentError(
                "result_backend_transport_options",
                f"unknown option(s) {sorted(unknown)}; known: {', '.join(_BACKEND_OPTIONS + _CONNECTION_OPTIONS)}",
            )
        self.bucket_name = str(options.get("bucket") or "celery_results")
        self._replicas = int(options.get("replicas") or 1)
        self._storage = StorageType(options.get("storage") or "file")
        self.url = url
        self._settings = _backend_settings(url, options, self.app)
        self._bucket: KeyValue | None = None
        self._bucket_pid = 0
        self._per_key_ttl = False

    def __reduce__(self, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None) -> Any:
        return super().__reduce__(args, {**(kwargs or {}), "url": self.url})

    def exception_safe_to_retry(self, exc: BaseException) -> bool:
        """Whether Celery may try a failed store or read again (``result_backend_always_retry``): yes for a
        connection that is down or a server that did not answer in time (a restart, a failover), no for
        anything the server refused. Celery retries stores, reads, forgets and group saves this way, each of
        which may be repeated (a result written twice is the same result); not the chord counter."""
        return isinstance(exc, _RETRYABLE)

    def as_uri(self, include_password: bool = False) -> str:
        return redacted(self._settings.servers) if not include_password else ",".join(self._settings.servers)

    # -- the bucket ------------------------------------------------------------------------------------------
    @property
    def bucket(self) -> KeyValue:
        """The bucket on this process's client (made on first use; a forked pool process makes its own)."""
        if self._bucket is None or self._bucket_pid != os.getpid() or self._bucket.jetstream.client.is_closed:
            js = process_client(self._settings).jetstream()
            version = str(js.client.server_info.get("version", "0.0.0")).lstrip("v").split(".")
            self._per_key_ttl = tuple(int(v) for v in version[:2] if v.isdigit()) >= (2, 11)
            try:
                bucket = js.key_value(self.bucket_name)
            except errors.BucketNotFoundError:
                config = KeyValueConfig(
                    bucket=self.bucket_name,
                    description="Celery task results (jetstream_sync.integrations.celery.ResultBackend)",
                    replicas=self._replicas,
                    storage=self._storage,
                    ttl=None if self._per_key_ttl or not self.expires else float(self.expires),
                    limit_marker_ttl=60.0 if self._per_key_ttl else None,
                )
                try:
                    bucket = js.create_key_value(config)
                except errors.BucketExistsError:
                    bucket = js.key_value(self.bucket_name)
            self._per_key_ttl = self._per_key_ttl and bucket.status().limit_marker_ttl is not None
            self._bucket, self._bucket_pid = bucket, os.getpid()
        return self._bucket

    def _ttl(self, seconds: float | None) -> float | None:
        if not self._per_key_ttl or not seconds:
            return None
        return max(1.0, float(seconds))

    # -- KeyValueStoreBackend ----------------------------------------------------------------------------
    def get(self, key: str) -> bytes | None:
        """The stored value of ``key``, or None when there is none (never written, expired or forgotten)."""
        try:
            return self.bucket.get(key).value
        except errors.KeyNotFoundError:  # Celery's KeyValueStoreBackend reads None as "no result yet"
            return None

    def mget(self, keys: list[str]) -> list[bytes | None]:
        """The values of ``keys`` in one batched read (None where there is none)."""
        found = self.bucket.get_many(keys)
        return [found[key].value if key in found else None for key in keys]

    def set(self, key: str, value: bytes | str) -> None:
        """Store ``value`` with the TTL of ``result_expires``, then tell the waiters (`_notice`)."""
        data = _bytes(value)
        self.bucket.put(key, data, ttl=self._ttl(self.expires))
        self._notice(key, data)

    def _notice(self, key: str, data: bytes) -> None:
        """Tell the waiters of ``key`` ([`get_many`][jetstream_sync.integrations.celery.ResultBackend.get_many]) its new
        value: a core publish of the value to ``_celery.<bucket>.<key>``, sent only once the server has stored the
        value, so that a waiter that subscribed too late for the notice is sure to read the value."""
        try:
            self.bucket.jetstream.client.publish(self._notice_subject(key), data)
        except errors.JetStreamError as exc:  # the waiters read it at their next re-read instead
            log.debug("result notice for %s not sent: %s", key, exc)

    def _store_result(
        self, task_id: str, result: Any, state: str, traceback: Any = None, request: Any = None, **kwargs: Any
    ) -> Any:
        """Store a task's state, never over a SUCCESS already stored (Celery's rule: a task run twice, after
        a lost worker or a redelivery, must not overwrite the result of the run that succeeded).

        Celery's key-value backends read the key, then write it: two round trips, and a race between them.
        Here the first state of a task (the common case: one state per task) is one ``create``, which the
        server refuses if anything is stored; only then is the stored state read, and replaced with a
        compare-and-set on its revision, so a SUCCESS written meanwhile is never overwritten either."""
        meta = self._get_result_meta(result=result, state=state, traceback=traceback, request=request)
        meta["task_id"] = bytes_to_str(task_id)
        key = self.get_key_for_task(task_id)
        data = _bytes(self.encode(meta))
        bucket = self.bucket
        ttl = self._ttl(self.expires)
        for _ in range(_INCR_TRIES):
            try:
                bucket.create(key, data, ttl=ttl)
                break
            except errors.KeyExistsError:  # a state was stored before: compare-and-set over it below
                pass
            try:
                entry = bucket.get(key)
            except errors.KeyNotFoundError:
                continue  # forgotten meanwhile: create it
            if entry.value and self.decode_result(entry.value)["status"] == states.SUCCESS:
                return result
            try:
                bucket.update(key, data, entry.revision, ttl=ttl)
                break
            except errors.KeyWrongLastSequenceError:
                continue  # written meanwhile: look again
        else:
            raise errors.KeyValueError(f"result {key!r}: {_INCR_TRIES} compare-and-set tries lost the race")
        self._notice(key, data)
        return result

    def _notice_subject(self, key: str) -> str:
        return f"_celery.{self.bucket_name}.{key}"

    def delete(self, key: str) -> None:
        """Remove ``key`` (``forget()``, a finished chord's counter)."""
        self.bucket.delete(key)

    def incr(self, key: str) -> int:
        """Add 1 to the counter at ``key`` with compare-and-set, tried again when another part won the race;
        the counter expires with the chord (``result_chord_expires``)."""
        bucket = self.bucket
        for _ in range(_INCR_TRIES):
            try:
                entry = bucket.get(key)
            except errors.KeyNotFoundError:
                try:
                    bucket.create(key, b"1", ttl=self._ttl(self.chord_expires))
                    return 1
                except errors.KeyExistsError:  # another part of the chord created it meanwhile: read it again
                    continue
            value = int(entry.value or b"0") + 1
            try:
                bucket.update(key, str(value).encode(), entry.revision, ttl=self._ttl(self.chord_expires))
                return value
            except errors.KeyWrongLastSequenceError:  # another part counted meanwhile: read it again
                continue
        raise errors.KeyValueError(f"chord counter {key!r}: {_INCR_TRIES} compare-and-set tries lost the race")

    def expire(self, key: str, value: float | None) -> None:
        """Write the key again with a TTL of ``value`` seconds (a chord keeps its parts' results alive)."""
        if not self._per_key_ttl:
            return
        bucket = self.bucket
        try:
            entry = bucket.get(key)
        except errors.KeyNotFoundError:  # nothing stored (forgotten or expired): no expiry to change
            return
        with contextlib.suppress(errors.KeyWrongLastSequenceError):  # written meanwhile, with its own TTL
            bucket.update(key, entry.value, entry.revision, ttl=self._ttl(value))

    # -- waiting for results -------------------------------------------------------------------------------
    def wait_for(
        self,
        task_id: str,
        timeout: float | None = None,
        interval: float = 0.5,
        no_ack: bool = True,
        on_interval: Any = None,
    ) -> Any:
        """The task's meta once it is ready, woken by its write (see
        [`get_many`][jetstream_sync.integrations.celery.ResultBackend.get_many])."""
        self._ensure_not_eager()
        for _task_id, meta in self.get_many([task_id], timeout=timeout, interval=interval, on_interval=on_interval):
            return meta
        raise CeleryTimeoutError("The operation timed out.")

    def get_many(
        self,
        task_ids: Any,
        timeout: float | None = None,
        interval: float = 0.5,
        no_ack: bool = True,
        on_message: Any = None,
        on_interval: Any = None,
        max_iterations: int | None = None,
        READY_STATES: frozenset[str] = states.READY_STATES,
    ) -> Any:
        """Yield ``(task_id, meta)`` as each task is ready: the ready ones now, the others as they are written.
        ``timeout`` (seconds) raises Celery's TimeoutError; ``on_interval`` is called after every wait, at
        least every ``interval`` seconds, and also when a notice ended the wait, before its result is yielded.
        Celery's ``AsyncResult.get()`` checks the task's parents there: a chord whose header task failed
        raises the header's exception, not the ``ChordError`` stored on the body a moment later (Celery's
        Redis backend does the same; its ``test_error_propagates_to_chord_from_*`` cases expect it).

        How a waiter learns of a write: it subscribes to the keys' notices
        ([`set`][jetstream_sync.integrations.celery.ResultBackend.set] publishes one once the value is stored), makes
        sure the server has the subscription (a flush), and only then reads the keys; so a value is either read or
        noticed, never missed. This costs one SUB line and a read, where a KV watch would have the server make and
        delete a consumer for every ``get()`` (measured: that took longer than the whole task round trip). A notice can
        still fail to come (a worker that lost its connection after storing, a cluster that had not yet spread the
        subscription): the keys are read again every [`REREAD`][jetstream_sync.integrations.celery.REREAD] seconds while
        waiting, so such a result arrives late
        rather than never."""
        ids = {str(t) for t in task_ids}
        for task_id in list(ids):
            cached = self._cache.get(task_id)
            if cached is not None and cached["status"] in READY_STATES:
                ids.discard(task_id)
                yield task_id, cached
        if not ids:
            return
        deadline = None if timeout is None else time.monotonic() + timeout
        by_key = {self.get_key_for_task(t): t for t in ids}
        client = self.bucket.jetstream.client
        prefix = self._notice_subject("")
        notices = client.subscribe(prefix + (next(iter(by_key)) if len(by_key) == 1 else ">"))
        try:
            client.flush()
            reread = 0.0
            while ids:
                now = time.monotonic()
                if now >= reread:  # first the read that follows the subscription; then the safety re-reads
                    reread = now + REREAD
                    for task_id, meta in self._read_ready(by_key, ids, READY_STATES):
                        if on_message is not None:
                            on_message(meta)
                        yield task_id, meta
                    continue
                left = None if deadline is None else deadline - now
                if left is not None and left <= 0:
                    raise CeleryTimeoutError(f"Operation timed out ({timeout})")
                wait = min(interval, reread - now) if left is None else min(interval, left, reread - now)
                try:
                    msg = notices.next_msg(timeout=max(0.01, wait))
                except errors.TimeoutError:
                    msg = None
                if on_interval is not None:
                    on_interval()  # after every wait, a notice too, as Celery's Redis backend calls it (see below)
                if msg is None:
                    continue
                noticed = by_key.get(msg.subject[len(prefix) :])
                if noticed is None or noticed not in ids:
                    continue  # another key (a wildcard subscription), or one already ready
                meta = self.decode_result(msg.data)
                if meta["status"] in READY_STATES:
                    self._cache[noticed] = meta
                    ids.discard(noticed)
                    if on_message is not None:
                        on_message(meta)
                    yield noticed, meta
        finally:
            with contextlib.suppress(errors.JetStreamError):  # closed or disconnected: nothing left to end
                notices.unsubscribe()

    def _read_ready(self, by_key: dict[str, str], ids: MutableSet[str], ready_states: frozenset[str]) -> list[Any]:
        """Read the keys of the tasks in ``ids`` (one read for one key); the ready ones are taken out of
        ``ids`` and returned as ``(task_id, meta)``."""
        keys = [k for k, t in by_key.items() if t in ids]
        values = [self.get(keys[0])] if len(keys) == 1 else self.mget(keys)
        ready = self._mget_to_results(values, [by_key[k] for k in keys], ready_states)
        for task_id, meta in ready.items():
            self._cache[task_id] = meta
            ids.discard(task_id)
        return list(ready.items())


def _bytes(value: bytes | str) -> bytes:
    return value.encode() if isinstance(value, str) else bytes(value)


def _backend_settings(url: str | None, options: Mapping[str, Any], app: Celery) -> ConnectionSettings:
    """The backend's connection: its URL (``jetstream://``, ``nats://``, ``tls://``, ``jetstreams://``,
    with user and password) and the connection keys of ``result_backend_transport_options``; without a URL,
    ``app.conf.jetstream`` (the extension's settings)."""
    mapping: dict[str, Any] = {k.upper(): v for k, v in options.items() if k in _CONNECTION_OPTIONS}
    if url:
        parts = parse_url(url)
        scheme = "tls" if str(parts.get("transport") or "").lower() in ("jetstreams", "tls") else "nats"
        mapping["SERVERS"] = [f"{scheme}://{parts.get('hostname') or 'localhost'}:{parts.get('port') or 4222}"]
        if parts.get("userid"):
            mapping["USER"], mapping["PASSWORD"] = parts["userid"], parts.get("password")
        return ConnectionSettings.from_mapping(mapping, source="result_backend")
    raw = app.conf.get("jetstream")
    if not isinstance(raw, Mapping):
        raise errors.InvalidArgumentError(
            "result_backend", "names no server: give a URL (jetstream://host:4222) or set app.conf.jetstream"
        )
    return ConnectionSettings.from_mapping({**raw, **mapping}, source="app.conf.jetstream")


celery_backends.BACKEND_ALIASES.setdefault("jetstream", "jetstream_sync.integrations.celery:ResultBackend")
celery_backends.BACKEND_ALIASES.setdefault("jetstreams", "jetstream_sync.integrations.celery:ResultBackend")
