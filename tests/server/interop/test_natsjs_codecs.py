"""KV codecs interoperate with nats.js (node), both ways: a bucket written through jetstream_sync's
``Base64KeyCodec.natsjs()`` and a JSON value codec is read by nats.js through its built-in ``Base64KeyCodec``
(``entry.json()``, ``kv.keys()``), and what nats.js writes there we read back decoded; a second bucket uses
orbit.go's ``kvcodec.Base64Codec`` layout (per-token base64url keys, base64url values), which the nats.js side
implements with node's own base64url, so our orbit flavour is checked against an independent implementation.

Uses the nats.js install of test_natsjs.py (skipped, saying so, without node and npm)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

from jetstream_sync import KeyValueConfig
from jetstream_sync.codecs import Base64Codec, Base64KeyCodec, CodecChain, JsonCodec, TextCodec
from tests.server.interop.test_natsjs import natsjs  # noqa: F401 - the session fixture installing nats.js

SCRIPT = Path(__file__).with_name("natsjs_codecs.mjs")


def test_kv_codecs_round_trip_with_natsjs(natsjs, nats_server, js, name):  # noqa: F811
    natsjs_kv = js.create_key_value(KeyValueConfig(bucket=f"{name}_njs")).with_codecs(
        key_codec=Base64KeyCodec.natsjs(), value_codec=JsonCodec()
    )
    orbit_kv = js.create_key_value(KeyValueConfig(bucket=f"{name}_orbit")).with_codecs(
        key_codec=Base64KeyCodec(), value_codec=CodecChain(TextCodec(), Base64Codec())
    )
    natsjs_kv.put("from py.order 1", {"id": 1, "who": "jetstream_sync", "ok": True})
    orbit_kv.put("tenants.acme inc.ünïcode", "written by jetstream_sync ✓")
    # what is stored is the other clients' layout
    assert natsjs_kv.get("from py.order 1").raw_key == "ZnJvbSBweQ==.b3JkZXIgMQ=="
    assert orbit_kv.get("tenants.acme inc.ünïcode").raw_key == "dGVuYW50cw.YWNtZSBpbmM.w7xuw69jb2Rl"

    script = natsjs / "codecs.mjs"
    shutil.copyfile(SCRIPT, script)  # node resolves packages from the script's directory
    result = subprocess.run(
        ["node", str(script)],
        env={**os.environ, "NATS_URL": nats_server.url, "NATSJS_BUCKET": f"{name}_njs",
             "ORBIT_BUCKET": f"{name}_orbit"},
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    read = json.loads(result.stdout.strip().splitlines()[-1])

    # nats.js read what we wrote, keys decoded by its own codec
    assert read["natsjs"] == {
        "value": {"id": 1, "who": "jetstream_sync", "ok": True},
        "key": "from py.order 1",
        "keys": ["from py.order 1"],
    }
    assert read["orbit"] == {"value": "written by jetstream_sync ✓", "key": "tenants.acme inc.ünïcode"}
    # we read what nats.js wrote
    theirs = natsjs_kv.get("from js.order 2")
    assert theirs.value == {"id": 2, "who": "nats.js", "tags": ["a", "b"]}
    assert sorted(natsjs_kv.keys()) == ["from js.order 2", "from py.order 1"]
    assert sorted(natsjs_kv.keys("from js.*")) == ["from js.order 2"]
    assert orbit_kv.get("tenants.from js").value == "ø bytes from nats.js"
    with orbit_kv.watch("tenants.>") as w:
        seen = {}
        while (entry := w.next(5)) is not None:
            seen[entry.key] = entry.value
    assert seen == {
        "tenants.acme inc.ünïcode": "written by jetstream_sync ✓",
        "tenants.from js": "ø bytes from nats.js",
    }
