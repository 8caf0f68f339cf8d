// The js-waku side of bench/core.py: two @waku/sds 0.0.8 MessageChannels exchange
// N content messages, alternating sender, every message received by the other.
// Prints one JSON line: send/receive msg/s (and the last 1,000), bytes per message.
// Usage: node bench/waku_core.mjs N <node_modules dir holding @waku/sds>
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const n = Number(process.argv[2] ?? "1000");
const modules = process.argv[3];
const { MessageChannel, Message } = await import(
  pathToFileURL(join(modules, "@waku", "sds", "dist", "index.js")).href
);

const a = new MessageChannel("bench-0", "alice");
const b = new MessageChannel("bench-0", "bob");
const TAIL = 1000;
let tSend = 0, tRecv = 0, tailSend = 0, tailRecv = 0, bytes = 0;
const enc = new TextEncoder();

for (let i = 0; i < n; i++) {
  const [src, dst] = i % 2 === 0 ? [a, b] : [b, a];
  let wire;
  const t0 = performance.now();
  src.pushOutgoingMessage(enc.encode(`message ${i}: the quick brown fox`), async (m) => {
    wire = m.encode();
    return { success: true };
  });
  await src.processTasks();
  const t1 = performance.now();
  dst.pushIncomingMessage(Message.decode(wire), undefined);
  await dst.processTasks();
  dst.sweepIncomingBuffer();
  const t2 = performance.now();
  tSend += t1 - t0;
  tRecv += t2 - t1;
  if (i >= n - TAIL) { tailSend += t1 - t0; tailRecv += t2 - t1; }
  bytes += wire.length;
}
const tail = Math.min(TAIL, n);
console.log(JSON.stringify({
  send_per_s: n / (tSend / 1000),
  recv_per_s: n / (tRecv / 1000),
  tail_send_per_s: tail / (tailSend / 1000),
  tail_recv_per_s: tail / (tailRecv / 1000),
  bytes_per_msg: bytes / n,
}));
