// The nats.js side of tests/server/interop/test_natsjs_codecs.py: opens two buckets through nats.js KV codecs
// (its built-in Base64KeyCodec with JSON values; an orbit.go-style codec, per-token base64url keys and
// base64url values, written here with node's Buffer), reads what jetstream_sync wrote, writes what it will read,
// and prints one JSON line of what it read.
import { connect } from "@nats-io/transport-node";
import { Base64KeyCodec, Kvm } from "@nats-io/kv";

const nc = await connect({ servers: process.env.NATS_URL });
const kvm = new Kvm(nc);
const read = {};

// nats.js's own key codec, values as JSON text
const natsjs = await kvm.open(process.env.NATSJS_BUCKET, {
  codec: {
    key: Base64KeyCodec(),
    value: {
      encode: (v) => (typeof v === "string" ? new TextEncoder().encode(v) : v),
      decode: (v) => v,
    },
  },
});
const fromPy = await natsjs.get("from py.order 1");
read.natsjs = { value: fromPy.json(), key: fromPy.key, keys: [] };
for await (const k of await natsjs.keys()) read.natsjs.keys.push(k);
await natsjs.put("from js.order 2", JSON.stringify({ id: 2, who: "nats.js", tags: ["a", "b"] }));

// orbit.go's kvcodec.Base64Codec for keys and values: RawURLEncoding, each key token apart. nats.js hands a key
// codec single tokens to encode, but whole keys to decode for an entry's key (as its Base64KeyCodec, split here).
const eachToken = (k, fn) => k.split(".").map((t) => (t === "*" || t === ">" ? t : fn(t))).join(".");
const orbit = await kvm.open(process.env.ORBIT_BUCKET, {
  codec: {
    key: {
      encode: (k) => eachToken(k, (t) => Buffer.from(t, "utf8").toString("base64url")),
      decode: (k) => eachToken(k, (t) => Buffer.from(t, "base64url").toString("utf8")),
    },
    value: {
      encode: (v) =>
        new TextEncoder().encode(Buffer.from(typeof v === "string" ? v : Buffer.from(v)).toString("base64url")),
      decode: (v) => new Uint8Array(Buffer.from(new TextDecoder().decode(v), "base64url")),
    },
  },
});
const orbitEntry = await orbit.get("tenants.acme inc.ünïcode");
read.orbit = { value: orbitEntry.string(), key: orbitEntry.key };
await orbit.put("tenants.from js", "ø bytes from nats.js");

console.log(JSON.stringify(read));
await nc.close();
