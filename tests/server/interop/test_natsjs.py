"""Interop with nats.js (node): what this client writes to a KV bucket, an object store and a stream, nats.js
reads through its own APIs, and what nats.js writes there this client reads, values, metadata and headers.

nats.js 3.4 (@nats-io/transport-node, jetstream, kv, obj) is installed with npm into a cache directory the first
time (``~/.cache/jetstream-sync/natsjs-3.4.0``); without ``node`` and ``npm`` the test is skipped, saying so.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from jetstream_sync import KeyValueConfig, ObjectMeta, ObjectStoreConfig, StreamConfig, errors

NATSJS = "3.4.0"
PACKAGES = [f"@nats-io/{name}@{NATSJS}" for name in ("transport-node", "jetstream", "kv", "obj")]
SCRIPT = Path(__file__).with_name("natsjs.mjs")


@pytest.fixture(scope="session")
def natsjs() -> Path:
    """The directory holding nats.js's node_modules (installed once, then reused)."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("node and npm are not installed: the nats.js interop test needs them")
    home = Path(
        os.environ.get("JETSTREAM_SYNC_NATSJS_DIR", Path.home() / ".cache" / "jetstream-sync" / f"natsjs-{NATSJS}")
    )
    if not (home / "node_modules" / "@nats-io" / "obj").is_dir():
        home.mkdir(parents=True, exist_ok=True)
        (home / "package.json").write_text('{"name": "natsjs-interop", "private": true}\n')
        subprocess.run(
            ["npm", "install", "--no-audit", "--no-fund", "--loglevel=error", *PACKAGES],
            cwd=home, check=True, timeout=300,
        )  # fmt: skip
    return home


def test_kv_object_store_and_headers_round_trip_with_natsjs(natsjs, nats_server, js, name):
    subject = f"{name.lower()}.events"
    js.create_stream(StreamConfig(name=name, subjects=[f"{name.lower()}.>"]))
    kv = js.create_key_value(KeyValueConfig(bucket=f"{name}_kv", history=5))
    kv.put("from.py", b"hello from jetstream_sync")
    kv.put("to.delete", b"soon gone")
    store = js.create_object_store(ObjectStoreConfig(bucket=f"{name}_obj"))
    ours = bytes(range(256)) * 1200  # 300 KiB in 64 KiB chunks: several of them
    store.put("py.bin", ours, ObjectMeta(name="py.bin", description="from jetstream_sync", max_chunk_size=64 * 1024))

    script = natsjs / "interop.mjs"
    shutil.copyfile(SCRIPT, script)  # node resolves packages from the script's directory
    result = subprocess.run(
        ["node", str(script)],
        env={**os.environ, "NATS_URL": nats_server.url, "KV_BUCKET": f"{name}_kv", "OBJ_BUCKET": f"{name}_obj",
             "SUBJECT": subject},
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    read = json.loads(result.stdout.strip().splitlines()[-1])

    # nats.js read what we wrote
    assert read["kv"]["value"] == "hello from jetstream_sync"
    assert read["obj"] == {
        "size": len(ours),
        "sha256": hashlib.sha256(ours).hexdigest(),
        "description": "from jetstream_sync",
    }
    # we read what nats.js wrote
    assert kv.get("from.js").value == b"hello from nats.js"
    with pytest.raises(errors.KeyNotFoundError):
        kv.get("to.delete")  # nats.js's delete marker is a delete to us
    theirs = store.get_bytes("js.bin")
    assert theirs == bytes((i * 7) % 251 for i in range(300 * 1024))
    assert store.info("js.bin").description == "from nats.js"
    stored = js.stream(name).get_msg(read["pub"]["seq"])
    assert stored.data == b"published by nats.js" and stored.headers["Trace"] == "from-js"
    assert stored.headers["Nats-Msg-Id"] == "js-1"
    assert js.publish(subject, b"again", msg_id="js-1").duplicate  # nats.js's msg_id deduplicates ours
