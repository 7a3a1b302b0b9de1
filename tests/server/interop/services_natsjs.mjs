// The nats.js side of tests/server/interop/test_services_natsjs.py (nats.js 2.29, its services API).
// 1. nats.js's services client finds the service OURS (run by jetstream_sync) and calls it; prints {"read": ...}.
// 2. It starts a nats.js service THEIRS, prints {"ready": {"id": ...}}, and serves until its stdin closes.
import { connect, headers, ServiceError, ServiceErrorCodeHeader, ServiceErrorHeader } from "nats";

const nc = await connect({ servers: process.env.NATS_URL });
const ours = process.env.OURS;
const theirs = process.env.THEIRS;
const all = async (iterator) => {
  const items = [];
  for await (const item of await iterator) items.push(item);
  return items;
};

const client = nc.services.client(); // its defaults: until 300 ms pass without an answer, at most 2 s
const pings = await all(client.ping(ours));
const id = pings[0].id;
const infos = await all(client.info(ours, id));
const reply = await nc.request("js.greet", "nats.js", { timeout: 5000 });
const h = headers();
h.set("Caller", "nats.js");
const failed = await nc.request("js.greet", "", { timeout: 5000, headers: h });
const stats = await all(client.stats(ours, id));
const read = {
  pings: pings.map((p) => ({ type: p.type, name: p.name, id: p.id, version: p.version, metadata: p.metadata })),
  info: infos.map((i) => ({ description: i.description, endpoints: i.endpoints })),
  greet: reply.string(),
  error: { code: failed.headers.get(ServiceErrorCodeHeader), description: failed.headers.get(ServiceErrorHeader) },
  stats: stats.map((s) => ({ started: s.started, endpoints: s.endpoints })),
};
console.log(JSON.stringify({ read }));

const service = await nc.services.add({
  name: theirs,
  version: "3.1.4",
  description: "from nats.js",
  metadata: { lang: "js" },
});
const group = service.addGroup("natsjs");
group.addEndpoint("sum", {
  metadata: { args: "numbers" },
  handler: (err, msg) => {
    const numbers = msg.json();
    if (!Array.isArray(numbers)) {
      msg.respondError(400, "a list of numbers, please");
      return;
    }
    msg.respond(JSON.stringify({ sum: numbers.reduce((a, b) => a + b, 0) }));
  },
});
group.addEndpoint("fail", {
  handler: () => {
    throw new ServiceError(451, "unavailable for legal reasons");
  },
});
// "ready" means the server has the service's subscriptions: add() and addEndpoint() only queue their SUBs, and
// a PING sent before the server had them came back as no responders (an empty list) on a loaded machine
await nc.flush();
console.log(JSON.stringify({ ready: { id: service.info().id } }));

process.stdin.resume();
await new Promise((resolve) => process.stdin.on("end", resolve));
await service.stop();
await nc.close();
