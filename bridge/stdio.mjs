// The stdio channel shared by hpd's Node scripts (bridge/pi_bridge.mjs, src/hpd/serve/pi_episode.mjs):
// one JSON object per line each way. The first line from Python is the setup (`first`); after it,
// `ask(type, payload)` writes {type, id, ...payload} and resolves with Python's line carrying that id.
// `strict`: an answer with an unknown id is an error (the conformance bridge) instead of being ignored.
import { createInterface } from "node:readline";

export function openChannel({ strict = false } = {}) {
  const out = (obj) => process.stdout.write(JSON.stringify(obj) + "\n");
  const rl = createInterface({ input: process.stdin, crlfDelay: Infinity });
  const waiting = new Map();
  let nextId = 0;
  let haveFirst = false;
  let gotFirst;
  const first = new Promise((resolve) => (gotFirst = resolve));

  rl.on("line", (line) => {
    if (!line.trim()) return;
    const msg = JSON.parse(line);
    if (!haveFirst) {
      haveFirst = true;
      gotFirst(msg);
      return;
    }
    const resolve = waiting.get(msg.id);
    if (!resolve) {
      if (strict) throw new Error(`bridge: no request with id ${msg.id}`);
      return;
    }
    waiting.delete(msg.id);
    resolve(msg);
  });

  function ask(type, payload) {
    const id = nextId++;
    return new Promise((resolve) => {
      waiting.set(id, resolve);
      out({ type, id, ...payload });
    });
  }

  function close() {
    rl.close();
    process.stdin.destroy();
  }

  return { out, first, ask, close };
}
