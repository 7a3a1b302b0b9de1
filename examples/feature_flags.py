"""Feature flags from a key-value bucket: a watcher keeps a dict current while another thread flips flags.

python examples/feature_flags.py                          # an embedded nats-server
python examples/feature_flags.py nats://127.0.0.1:4222    # or your own server (JetStream enabled)

A web app reads its flags on every request, so they must be local (a dict lookup) and current. One watcher
thread per process does that: it loads every flag, signals once the initial values are in (the watcher's
``None``), then applies each change as it happens. The watcher rides out server restarts and reconnects by
itself, so the dict never silently goes stale.
"""

from __future__ import annotations

import contextlib
import sys
import threading

import jetstream_sync
from jetstream_sync import KeyValueConfig, KeyValueOp
from jetstream_sync.testing import ServerNotInstalledError


class Flags:
    """A thread-safe view of the ``flags`` bucket, kept current by a watcher on its own thread."""

    def __init__(self, kv: jetstream_sync.KeyValue) -> None:
        self._values: dict[str, str] = {}
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self.loaded = threading.Event()
        self._watcher = kv.watch_all()
        self._thread = threading.Thread(target=self._follow, name="flags-watcher", daemon=True)
        self._thread.start()

    def _follow(self) -> None:
        for entry in self._watcher:
            if entry is None:  # every flag that existed at the start is in
                self.loaded.set()
                continue
            with self._changed:
                if entry.operation is KeyValueOp.PUT:
                    self._values[entry.key] = entry.value.decode()
                else:
                    self._values.pop(entry.key, None)
                self._changed.notify_all()

    def get(self, name: str, default: str = "off") -> str:
        with self._lock:
            return self._values.get(name, default)

    def wait_for(self, name: str, value: str | None, timeout: float = 5.0) -> bool:
        """Block until flag ``name`` has ``value`` (None: is unset); the demo's way to show a change arrived."""
        with self._changed:
            return self._changed.wait_for(lambda: self._values.get(name) == value, timeout)

    def close(self) -> None:
        self._watcher.stop()
        self._thread.join(5)


def run(url: str) -> None:
    with jetstream_sync.connect(url, name="feature-flags") as nc:
        js = nc.jetstream()
        kv = js.create_or_update_key_value(KeyValueConfig(bucket="flags", history=5))
        kv.put("checkout.new_flow", b"off")
        kv.put("search.v2", b"on")

        flags = Flags(kv)
        if not flags.loaded.wait(5):
            raise SystemExit("the flags did not load")
        print(f"loaded: checkout.new_flow={flags.get('checkout.new_flow')} search.v2={flags.get('search.v2')}")

        def operator() -> None:  # someone flipping flags from another thread (or another service)
            kv.put("checkout.new_flow", b"on")
            kv.delete("search.v2")

        flipper = threading.Thread(target=operator)
        flipper.start()
        flipper.join()
        if not (flags.wait_for("checkout.new_flow", "on") and flags.wait_for("search.v2", None)):
            raise SystemExit("a change did not arrive")
        print(f"after the flip: checkout.new_flow={flags.get('checkout.new_flow')} search.v2={flags.get('search.v2')}")
        history = [e.value.decode() or e.operation.name for e in kv.history("checkout.new_flow")]
        print(f"history of checkout.new_flow: {', '.join(history)}")
        flags.close()
        js.delete_key_value("flags")


def main() -> None:
    if len(sys.argv) > 1:
        run(sys.argv[1])
        return
    from jetstream_sync.testing import EmbeddedServer

    with EmbeddedServer() as server, contextlib.suppress(KeyboardInterrupt):
        print(f"started an embedded nats-server at {server.url}")
        run(server.url)


if __name__ == "__main__":
    try:
        main()
    except ServerNotInstalledError as exc:  # no nats-server to start: the message names the extra that has one
        sys.exit(f"{exc}; or give a running server: python examples/feature_flags.py nats://127.0.0.1:4222")
