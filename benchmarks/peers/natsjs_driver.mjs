// Benchmark driver for nats.js 3.4 (@nats-io/transport-node, jetstream, kv, obj) on node.
//
// benchmarks/run.py prepares the server state for one case, copies this file into the npm cache directory
// that holds node_modules (node resolves packages from the script's directory) and runs
//
//     node natsjs_driver.mjs '<job json>'
//
// The job and the cases are described in benchmarks/peers/README.md. Each case uses nats.js's own idiomatic
// API on one connection: `warmup` operations of the same kind first, then `count` timed ones. The result is
// one JSON line on stdout: {"client", "seconds", "cpu", "count"} and, for the latency cases, p50_ms/p99_ms.
// Anything else goes to stderr; a failed check or a stall exits non-zero with the reason on stderr.

import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { performance } from "node:perf_hooks";

import { connect } from "@nats-io/transport-node";
import { jetstream } from "@nats-io/jetstream";
import { Kvm } from "@nats-io/kv";
import { Objm } from "@nats-io/obj";

const STALL_MS = 120_000; // no progress for this long: give up
const FETCH_EXPIRES_MS = 10_000; // fetch/next: the server ends a pull that finds nothing after this

// Progress counter, bumped by every operation; the watchdog fails the run when it stops moving.
let progress = 0;

function fail(reason) {
  process.stderr.write(`natsjs_driver: ${reason}\n`);
  process.exit(1);
}

function check(ok, reason) {
  if (!ok) {
    throw new Error(reason);
  }
}

function startWatchdog() {
  let seen = -1;
  let since = Date.now();
  const timer = setInterval(() => {
    if (progress !== seen) {
      seen = progress;
      since = Date.now();
    } else if (Date.now() - since > STALL_MS) {
      fail(`no progress for ${STALL_MS / 1000} s (${progress} operations done)`);
    }
  }, 1_000);
  timer.unref();
}

function clientVersion() {
  // the package's "exports" does not include package.json: find it above the resolved entry point
  const require = createRequire(import.meta.url);
  let dir = dirname(require.resolve("@nats-io/jetstream"));
  for (;;) {
    try {
      const pkg = JSON.parse(readFileSync(join(dir, "package.json"), "utf8"));
      if (pkg.name === "@nats-io/jetstream") {
        return pkg.version;
      }
    } catch {
      // no package.json at this level
    }
    const up = dirname(dir);
    check(up !== dir, "cannot find @nats-io/jetstream's package.json");
    dir = up;
  }
}

function readJob() {
  const arg = process.argv[2];
  check(arg, "usage: node natsjs_driver.mjs '<job json>'");
  const job = JSON.parse(arg);
  for (const field of ["url", "case", "size", "count", "warmup"]) {
    check(job[field] !== undefined, `job has no ${field}`);
  }
  check(job.count > 0 && job.warmup >= 0, "count must be > 0 and warmup >= 0");
  return job;
}

function bytes(size) {
  const data = new Uint8Array(size);
  for (let i = 0; i < size; i++) {
    data[i] = i % 251;
  }
  return data;
}

// --- measuring -------------------------------------------------------------------------------------------

// A clock over the timed part: wall time with performance.now(), CPU (user + system) with process.cpuUsage().
function startClock() {
  return { t0: performance.now(), cpu0: process.cpuUsage() };
}

function stopClock(clock) {
  const seconds = (performance.now() - clock.t0) / 1000;
  const cpu = process.cpuUsage(clock.cpu0);
  return { seconds, cpu: (cpu.user + cpu.system) / 1e6 };
}

// Nearest-rank percentile of sorted values.
function percentile(sorted, p) {
  const rank = Math.max(1, Math.ceil((p / 100) * sorted.length));
  return sorted[rank - 1];
}

function latencyFigures(latencies) {
  const sorted = Float64Array.from(latencies).sort();
  return { p50_ms: percentile(sorted, 50), p99_ms: percentile(sorted, 99) };
}

// Times `count` calls of `op(i)`, each one's latency recorded; `after(result)` runs outside the latency.
async function timeEach(count, op, after) {
  const latencies = new Float64Array(count);
  const clock = startClock();
  for (let i = 0; i < count; i++) {
    const t = performance.now();
    const result = await op(i);
    latencies[i] = performance.now() - t;
    after?.(result);
  }
  return { ...stopClock(clock), ...latencyFigures(latencies) };
}

// Times `work()` as a whole.
async function timeAll(work) {
  const clock = startClock();
  await work();
  return stopClock(clock);
}

// Warm-up then timed latency loop of the same operation.
async function latencyCase(job, op, after) {
  for (let i = 0; i < job.warmup; i++) {
    const result = await op(i);
    after?.(result);
  }
  return timeEach(job.count, op, after);
}

// Races `promise` against a timer; the timer is only for the rare waits that nats.js does not bound itself.
function within(promise, what, ms = STALL_MS) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no answer in ${ms / 1000} s`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

// --- publishing ------------------------------------------------------------------------------------------

async function corePublish(nc, job) {
  const payload = bytes(job.size);
  const burst = async (n) => {
    for (let i = 0; i < n; i++) {
      nc.publish(job.subject, payload);
    }
    progress += n;
    await within(nc.flush(), "flush");
  };
  await burst(job.warmup);
  return timeAll(() => burst(job.count));
}

function checkAck(job, pa) {
  check(pa && pa.stream === job.stream && pa.seq > 0, `bad publish ack ${JSON.stringify(pa)}`);
  progress++;
}

async function jsPublish(js, job) {
  const payload = bytes(job.size);
  return latencyCase(job, async () => {
    checkAck(job, await js.publish(job.subject, payload));
  });
}

// At most `window` js.publish calls unacknowledged: a sliding window, a new publish as soon as one is acked.
// Measured against batches of `window` awaited with Promise.all: as fast at 128 B, faster at 16 KiB (the
// pipe never drains between batches).
async function publishWindowed(js, job, payload, n) {
  const window = job.window;
  let inFlight = 0;
  let error = null;
  let wake = null;
  const settled = () => {
    inFlight--;
    if (wake) {
      const w = wake;
      wake = null;
      w();
    }
  };
  const onAck = (pa) => {
    try {
      checkAck(job, pa);
    } catch (err) {
      error ??= err;
    }
    settled();
  };
  const onError = (err) => {
    error ??= err;
    settled();
  };
  for (let i = 0; i < n && !error; i++) {
    if (inFlight >= window) {
      await new Promise((resolve) => (wake = resolve));
    }
    inFlight++;
    js.publish(job.subject, payload).then(onAck, onError);
  }
  while (inFlight > 0) {
    await new Promise((resolve) => (wake = resolve));
  }
  if (error) {
    throw error;
  }
}

async function publishAsync(js, job) {
  check(job.window > 0, "publish_async needs window > 0");
  const payload = bytes(job.size);
  await publishWindowed(js, job, payload, job.warmup);
  return timeAll(() => publishWindowed(js, job, payload, job.count));
}

// --- consuming -------------------------------------------------------------------------------------------

// The continuous consume with a callback; the clock runs from the warmup-th message handled to the last.
async function consume(js, job, ack) {
  check(job.batch > 0, `${job.case} needs batch > 0`);
  const consumer = await js.consumers.get(job.stream, job.consumer);
  const total = job.warmup + job.count;
  let handled = 0;
  let clock = null;
  let figures = null;
  let overrun = false;
  let finished;
  const done = new Promise((resolve) => (finished = resolve));
  const callback = (m) => {
    if (ack) {
      m.ack();
    }
    handled++;
    progress++;
    if (handled === job.warmup) {
      clock = startClock();
    } else if (handled === total) {
      figures = stopClock(clock);
      finished();
    } else if (handled > total) {
      overrun = true;
    }
  };
  if (job.warmup === 0) {
    clock = startClock();
  }
  const messages = await consumer.consume({ max_messages: job.batch, callback });
  const ended = messages.closed().then((err) => {
    if (!figures) {
      throw err || new Error(`consume ended after ${handled} of ${total} messages`);
    }
  });
  await Promise.race([done, ended]);
  await within(messages.close(), "closing the consume");
  check(!overrun && handled === total, `consume handled ${handled} messages, expected ${total}`);
  return figures;
}

// consume() without a callback, iterated: the iterator form, as our messages()
async function messagesAck(js, job) {
  check(job.batch > 0, `${job.case} needs batch > 0`);
  const consumer = await js.consumers.get(job.stream, job.consumer);
  const total = job.warmup + job.count;
  let handled = 0;
  let clock = null;
  let figures = null;
  if (job.warmup === 0) {
    clock = startClock();
  }
  const messages = await consumer.consume({ max_messages: job.batch });
  for await (const m of messages) {
    m.ack();
    handled++;
    progress++;
    if (handled === job.warmup) {
      clock = startClock();
    } else if (handled === total) {
      figures = stopClock(clock);
      break;
    }
  }
  await within(messages.close(), "closing the consume");
  check(figures !== null, `the consume iterator ended after ${handled} of ${total} messages`);
  return figures;
}

async function fetchAll(consumer, job, n) {
  let left = n;
  while (left > 0) {
    const batch = await consumer.fetch({ max_messages: Math.min(job.batch, left), expires: FETCH_EXPIRES_MS });
    let got = 0;
    for await (const m of batch) {
      m.ack();
      got++;
    }
    check(got > 0, `a fetch found no message with ${left} still expected`);
    progress += got;
    left -= got;
  }
}

async function fetchAck(js, job) {
  check(job.batch > 0, "fetch_ack needs batch > 0");
  const consumer = await js.consumers.get(job.stream, job.consumer);
  await fetchAll(consumer, job, job.warmup);
  return timeAll(() => fetchAll(consumer, job, job.count));
}

// consumer.next() each finding a stored message; the ack after it stays outside the latency.
async function nextWaiting(js, job) {
  const consumer = await js.consumers.get(job.stream, job.consumer);
  const next = async () => {
    const m = await consumer.next({ expires: FETCH_EXPIRES_MS });
    check(m !== null, "next() found no message");
    progress++;
    return m;
  };
  return latencyCase(job, next, (m) => m.ack());
}

// --- key-value and object store ----------------------------------------------------------------------------

async function kvGet(js, job) {
  const kv = await new Kvm(js).open(job.bucket);
  return latencyCase(job, async () => {
    const entry = await kv.get("k");
    check(entry !== null && entry.value.length === job.size, `kv.get("k") gave ${entry?.value.length} bytes`);
    progress++;
  });
}

async function kvPut(js, job) {
  const kv = await new Kvm(js).open(job.bucket);
  const value = bytes(job.size);
  return latencyCase(job, async () => {
    const revision = await kv.put("k", value);
    check(revision > 0, `kv.put gave revision ${revision}`);
    progress++;
  });
}

async function objPut(js, job) {
  const store = await new Objm(js).open(job.bucket);
  const data = bytes(job.size);
  const put = async (name) => {
    const info = await store.putBlob({ name }, data);
    check(info.size === job.size, `object ${name}: stored ${info.size} bytes, expected ${job.size}`);
    progress++;
  };
  for (let i = 0; i < job.warmup; i++) {
    await put(`w${i}`);
  }
  return timeAll(async () => {
    for (let i = 0; i < job.count; i++) {
      await put(`o${i}`);
    }
  });
}

// The streaming get: the chunks are counted as they arrive (nats.js checks the digest), not joined.
async function readObject(store, job) {
  const result = await store.get("obj");
  check(result !== null, "object obj not found");
  let length = 0;
  for await (const chunk of result.data) {
    length += chunk.length;
  }
  const err = await result.error;
  check(!err, `reading obj: ${err}`);
  check(length === job.size, `read ${length} bytes of obj, expected ${job.size}`);
  progress++;
}

async function objGet(js, job) {
  const store = await new Objm(js).open(job.bucket);
  for (let i = 0; i < job.warmup; i++) {
    await readObject(store, job);
  }
  return timeAll(async () => {
    for (let i = 0; i < job.count; i++) {
      await readObject(store, job);
    }
  });
}

// --- main --------------------------------------------------------------------------------------------------

const CASES = {
  core_publish: (nc, js, job) => corePublish(nc, job),
  js_publish: (nc, js, job) => jsPublish(js, job),
  publish_async: (nc, js, job) => publishAsync(js, job),
  consume_ack: (nc, js, job) => consume(js, job, true),
  consume_acknone: (nc, js, job) => consume(js, job, false),
  messages_ack: (nc, js, job) => messagesAck(js, job),
  fetch_ack: (nc, js, job) => fetchAck(js, job),
  next_waiting: (nc, js, job) => nextWaiting(js, job),
  kv_get: (nc, js, job) => kvGet(js, job),
  kv_put: (nc, js, job) => kvPut(js, job),
  obj_put: (nc, js, job) => objPut(js, job),
  obj_get: (nc, js, job) => objGet(js, job),
};

function round(x, digits) {
  return Number(x.toFixed(digits));
}

function report(client, job, figures) {
  const result = { client, seconds: round(figures.seconds, 6), cpu: round(figures.cpu, 6), count: job.count };
  if (figures.p50_ms !== undefined) {
    result.p50_ms = round(figures.p50_ms, 4);
    result.p99_ms = round(figures.p99_ms, 4);
  }
  process.stdout.write(JSON.stringify(result) + "\n");
}

async function main() {
  const job = readJob();
  const run = CASES[job.case];
  check(run, `unknown case ${JSON.stringify(job.case)}`);
  const client = `nats.js ${clientVersion()}`;
  startWatchdog();
  const nc = await connect({ servers: job.url, timeout: 20_000 });
  const js = jetstream(nc);
  const figures = await run(nc, js, job);
  await within(nc.close(), "closing the connection");
  report(client, job, figures);
}

process.on("unhandledRejection", (err) => fail(err?.stack || err));

main().then(
  () => process.exit(0),
  (err) => fail(err?.stack || err),
);
