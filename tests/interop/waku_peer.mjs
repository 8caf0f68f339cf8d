// A JSON-lines peer around js-waku's @waku/sds (the reference SDS implementation),
// driven by tests/interop/test_waku_interop.py.
//
// Usage: node waku_peer.mjs <npm prefix where @waku/sds is installed>
//
// Reads one JSON object per line on stdin and answers with exactly one JSON line on
// stdout: {"ok": true, ...result} or {"ok": false, "error": "..."}. Nothing else is
// ever written to stdout. Bytes travel as lowercase hex, bigints as decimal strings.
// Several MessageChannels ("peers") live in one process, addressed by a name.
//
// Every operation that pushes into a channel calls processTasks() before it answers,
// and reports the channel's ErrorTask events raised meanwhile in "task_errors".

import { createInterface } from "node:readline";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const prefix = process.argv[2];
if (!prefix) {
  process.stderr.write("usage: node waku_peer.mjs <npm prefix>\n");
  process.exit(2);
}
const pkgDir = join(prefix, "node_modules", "@waku", "sds");
const load = (rel) => import(pathToFileURL(join(pkgDir, rel)).href);

const sdsModule = await load("dist/index.js");
// DefaultBloomFilter (BloomFilter bound to the Nim hashN) is not re-exported by the
// package index in 0.0.8; take it from its dist path.
const bloomModule = await load("dist/bloom_filter/bloom.js");
const pkg = JSON.parse(
  await (await import("node:fs/promises")).readFile(join(pkgDir, "package.json"), "utf8")
);

const {
  MessageChannel,
  MessageChannelEvent,
  Message,
  isContentMessage,
  isSyncMessage,
  isEphemeralMessage,
} = sdsModule;
const { DefaultBloomFilter } = bloomModule;
// SDS-R scheduling, also only reachable through its dist path.
const { RepairManager } = await load("dist/message_channel/repair/repair.js");
const { hashToInteger } = await load("dist/message_channel/repair/utils.js");

// ---------------------------------------------------------------- encoding helpers

const toHex = (bytes) => Buffer.from(bytes).toString("hex");
const fromHex = (hex) => new Uint8Array(Buffer.from(hex ?? "", "hex"));

function kindOf(message) {
  if (isContentMessage(message)) return "content";
  if (isSyncMessage(message)) return "sync";
  if (isEphemeralMessage(message)) return "ephemeral";
  return "unknown";
}

function entryToJson(entry) {
  return {
    message_id: entry.messageId,
    retrieval_hint_hex: entry.retrievalHint == null ? null : toHex(entry.retrievalHint),
    sender_id: entry.senderId ?? null,
  };
}

function messageToJson(message) {
  return {
    kind: kindOf(message),
    message_id: message.messageId,
    channel_id: message.channelId,
    sender_id: message.senderId,
    lamport_timestamp:
      message.lamportTimestamp == null ? null : message.lamportTimestamp.toString(),
    causal_history: (message.causalHistory ?? []).map(entryToJson),
    bloom_filter_hex: message.bloomFilter == null ? null : toHex(message.bloomFilter),
    repair_request: (message.repairRequest ?? []).map(entryToJson),
    content_hex: message.content == null ? null : toHex(message.content),
  };
}

// Event details: a message id, a Message, a list of HistoryEntry, or a small record.
function detailToJson(detail) {
  if (detail == null) return null;
  if (typeof detail === "string") return detail;
  if (typeof detail === "bigint") return detail.toString();
  if (detail instanceof Uint8Array) return toHex(detail);
  if (detail instanceof Message) {
    const m = messageToJson(detail);
    delete m.bloom_filter_hex; // 18 KB of noise per event
    return m;
  }
  if (Array.isArray(detail)) {
    return detail.map((d) =>
      d && typeof d === "object" && "messageId" in d && !(d instanceof Message)
        ? entryToJson(d)
        : detailToJson(d)
    );
  }
  if (detail instanceof Error) return { error: String(detail) };
  if (typeof detail === "object") {
    const out = {};
    for (const [k, v] of Object.entries(detail)) {
      if (k === "params") continue; // task params hold raw payloads and closures
      out[k] = detailToJson(v);
    }
    return out;
  }
  return detail;
}

// ---------------------------------------------------------------- peers

const peers = new Map();

function peer(name) {
  const p = peers.get(name);
  if (!p) throw new Error(`no such peer: ${name}`);
  return p;
}

function createPeer({ peer: name, channel, sender, options }) {
  if (peers.has(name)) throw new Error(`peer exists: ${name}`);
  const ch = new MessageChannel(channel, sender, options ?? {});
  const state = { channel: ch, events: [], taskErrors: [] };
  // @waku/sds 0.0.8's RepairManager dispatches its two "queued" events under the
  // bare names below instead of MessageChannelEvent.RepairRequestQueued /
  // RepairResponseQueued ("sds:repair:request-queued"...), so listeners on the
  // documented names never hear them. Listen to both; the recorded type is the
  // name js really dispatched.
  const misnamed = ["RepairRequestQueued", "RepairResponseQueued"];
  for (const type of [...Object.values(MessageChannelEvent), ...misnamed]) {
    ch.addEventListener(type, (event) => {
      const record = { type, detail: detailToJson(event.detail) };
      state.events.push(record);
      if (type === MessageChannelEvent.ErrorTask) {
        const err = event.detail?.error;
        state.taskErrors.push(String(err?.stack ?? err));
      }
    });
  }
  peers.set(name, state);
  return {};
}

async function drainTasks(state) {
  const before = state.taskErrors.length;
  await state.channel.processTasks();
  return state.taskErrors.slice(before);
}

// ---------------------------------------------------------------- operations

const ops = {
  version: async () => ({ version: pkg.version, node: process.version }),

  create: async (req) => createPeer(req),

  // pushOutgoingMessage; the callback "broadcasts" by capturing the encoded bytes and
  // returns {success: true, retrievalHint} (hint_hex, if given, becomes the hint that
  // follow-up messages carry for this one in their causal history).
  send: async (req) => {
    const state = peer(req.peer);
    let sent = null;
    state.channel.pushOutgoingMessage(fromHex(req.content_hex), async (message) => {
      sent = message;
      return {
        success: req.success ?? true,
        retrievalHint: req.hint_hex == null ? undefined : fromHex(req.hint_hex),
      };
    });
    const taskErrors = await drainTasks(state);
    if (!sent) throw new Error(`send produced no message: ${taskErrors.join("; ")}`);
    return {
      id: sent.messageId,
      lamport_timestamp: sent.lamportTimestamp.toString(),
      data_hex: toHex(sent.encode()),
      task_errors: taskErrors,
    };
  },

  send_ephemeral: async (req) => {
    const state = peer(req.peer);
    let sent = null;
    await state.channel.pushOutgoingEphemeralMessage(
      fromHex(req.content_hex),
      async (message) => {
        sent = message;
        return true;
      }
    );
    const taskErrors = await drainTasks(state);
    if (!sent) throw new Error(`ephemeral send produced no message: ${taskErrors.join("; ")}`);
    return { id: sent.messageId, data_hex: toHex(sent.encode()), task_errors: taskErrors };
  },

  // pushOutgoingSyncMessage; sent=false when js declines (empty history, no repairs).
  sync: async (req) => {
    const state = peer(req.peer);
    let sent = null;
    const ok = await state.channel.pushOutgoingSyncMessage(async (message) => {
      sent = message;
      return true;
    });
    return {
      sent: Boolean(ok && sent),
      id: sent?.messageId ?? null,
      data_hex: sent ? toHex(sent.encode()) : null,
      repair_request: sent ? sent.repairRequest.map(entryToJson) : [],
    };
  },

  // Message.decode + pushIncomingMessage + processTasks.
  receive: async (req) => {
    const state = peer(req.peer);
    const message = Message.decode(fromHex(req.data_hex));
    if (!message) return { decoded: false, task_errors: [] };
    state.channel.pushIncomingMessage(
      message,
      req.hint_hex == null ? undefined : fromHex(req.hint_hex)
    );
    const taskErrors = await drainTasks(state);
    return { decoded: true, kind: kindOf(message), id: message.messageId, task_errors: taskErrors };
  },

  // Message.decode only: what the reference reads out of some bytes.
  decode: async (req) => {
    const message = Message.decode(fromHex(req.data_hex));
    return { decoded: Boolean(message), message: message ? messageToJson(message) : null };
  },

  events: async (req) => {
    const state = peer(req.peer);
    const events = state.events;
    state.events = [];
    return { events };
  },

  // Ids still waiting for acknowledgement, in buffer order.
  outgoing: async (req) => ({
    ids: peer(req.peer).channel.outgoingBuffer.map((m) => m.messageId),
  }),

  // Ids of received messages still waiting for dependencies.
  incoming: async (req) => ({
    ids: peer(req.peer).channel.incomingBuffer.map((m) => m.messageId),
  }),

  // The local log in order, with lamport timestamps and retrieval hints.
  history: async (req) => {
    const items = peer(req.peer).channel.localHistory.slice();
    return {
      ids: items.map((m) => m.messageId),
      entries: items.map((m) => ({
        message_id: m.messageId,
        sender_id: m.senderId,
        lamport_timestamp: m.lamportTimestamp.toString(),
        content_hex: toHex(m.content),
        retrieval_hint_hex: m.retrievalHint == null ? null : toHex(m.retrievalHint),
      })),
    };
  },

  lamport: async (req) => ({
    lamport_timestamp: peer(req.peer).channel.lamportTimestamp.toString(),
  }),

  sweep_incoming: async (req) => ({
    missing: peer(req.peer).channel.sweepIncomingBuffer().map(entryToJson),
  }),

  // SDS-R: messages whose repair response is due, encoded for rebroadcast.
  sweep_repair: async (req) => {
    const state = peer(req.peer);
    const out = [];
    await state.channel.sweepRepairIncomingBuffer(async (message) => {
      out.push({ id: message.messageId, data_hex: toHex(message.encode()) });
      return true;
    });
    return { messages: out };
  },

  // DefaultBloomFilter sized like MessageChannel's, with ids inserted in order.
  bloom: async (req) => {
    const filter = new DefaultBloomFilter({ capacity: req.capacity, errorRate: req.error_rate });
    for (const id of req.ids) filter.insert(id);
    return {
      data_hex: toHex(filter.toBytes()),
      k_hashes: filter.kHashes,
      total_bits: filter.totalBits,
    };
  },

  // DefaultBloomFilter.fromBytes(...).lookup(id) for each id.
  bloom_lookup: async (req) => {
    const filter = DefaultBloomFilter.fromBytes(fromHex(req.data_hex), {
      capacity: req.capacity,
      errorRate: req.error_rate,
    });
    return { found: req.ids.map((id) => filter.lookup(id)) };
  },

  // SDS-R: H(x) and, for each case, RepairManager's T_req / T_resp offsets (at
  // currentTime 0) and response-group membership.
  repair_schedule: async (req) => ({
    hashes: (req.strings ?? []).map((s) => hashToInteger(s).toString()),
    cases: (req.cases ?? []).map((c) => {
      const manager = new RepairManager(c.own_id, {
        tMin: c.t_min,
        tMax: c.t_max,
        numResponseGroups: c.groups,
      });
      return {
        t_req: manager.calculateTReq(c.message_id, 0),
        t_resp: manager.calculateTResp(c.original_sender, c.message_id, 0),
        in_group: manager.isInResponseGroup(c.original_sender, c.message_id),
      };
    }),
  }),

  quit: async () => {
    setImmediate(() => process.exit(0));
    return {};
  },
};

// ---------------------------------------------------------------- main loop

const write = (obj) =>
  process.stdout.write(
    JSON.stringify(obj, (_k, v) => (typeof v === "bigint" ? v.toString() : v)) + "\n"
  );

const rl = createInterface({ input: process.stdin, crlfDelay: Infinity });
for await (const line of rl) {
  if (!line.trim()) continue;
  let req;
  try {
    req = JSON.parse(line);
  } catch (err) {
    write({ ok: false, error: `bad json: ${err}` });
    continue;
  }
  const op = ops[req.op];
  if (!op) {
    write({ ok: false, error: `unknown op: ${req.op}` });
    continue;
  }
  try {
    write({ ok: true, ...(await op(req)) });
  } catch (err) {
    write({ ok: false, error: String(err?.stack ?? err) });
  }
}
process.exit(0);
