// The nats.js side of tests/server/interop/test_natsjs.py: reads what jetstream_sync wrote and writes what it
// will read, through nats.js's own KV, object store and JetStream APIs; prints one JSON line of what it read.
import { connect, headers } from "@nats-io/transport-node";
import { jetstream } from "@nats-io/jetstream";
import { Kvm } from "@nats-io/kv";
import { Objm } from "@nats-io/obj";
import { createHash } from "node:crypto";

const nc = await connect({ servers: process.env.NATS_URL });
const read = {};

const kv = await new Kvm(nc).open(process.env.KV_BUCKET);
const entry = await kv.get("from.py");
read.kv = { value: entry.string(), revision: entry.revision };
await kv.put("from.js", "hello from nats.js");
await kv.delete("to.delete");

const store = await new Objm(nc).open(process.env.OBJ_BUCKET);
const blob = await store.getBlob("py.bin");
read.obj = { size: blob.length, sha256: createHash("sha256").update(blob).digest("hex") };
const info = await store.info("py.bin");
read.obj.description = info.description ?? null;
const ours = new Uint8Array(300 * 1024);
for (let i = 0; i < ours.length; i++) ours[i] = (i * 7) % 251;
await store.putBlob({ name: "js.bin", description: "from nats.js" }, ours);

const js = jetstream(nc);
const h = headers();
h.set("Trace", "from-js");
const ack = await js.publish(process.env.SUBJECT, "published by nats.js", { msgID: "js-1", headers: h });
read.pub = { seq: ack.seq, duplicate: ack.duplicate };

console.log(JSON.stringify(read));
await nc.close();
