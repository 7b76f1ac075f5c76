// Start to exit of /bin/true through custody's spawn() and through child_process.spawn,
// interleaved, medians of N (default 200): with stdio 'ignore', and with the default 'pipe'.
// The first call, which starts the agent, is reported apart.
//
//   CUSTODY_BIN=/path/to/custody node bench.mjs [N]

import { spawn as nodeSpawn } from 'node:child_process';
import os from 'node:os';
import { spawn } from './dist/index.js';
import { agent } from './dist/agent.js';

const n = Number(process.argv[2] ?? 200);
const program = '/bin/true';

function once(fn, stdio) {
  return new Promise((resolve, reject) => {
    const t0 = process.hrtime.bigint();
    const child = fn(program, [], { stdio });
    child.once('error', reject);
    child.once('exit', (code) => {
      if (code !== 0) reject(new Error(`${program} exited ${code}`));
      else resolve(Number(process.hrtime.bigint() - t0) / 1e6);
    });
  });
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

// The first call starts the agent: the time to its hello, and the first start to exit.
const t0 = process.hrtime.bigint();
const firstCall = once(spawn, 'ignore');
const hello = await agent().ready.then(() => Number(process.hrtime.bigint() - t0) / 1e6);
const first = await firstCall;
console.log(`first spawn(): agent started (to its hello) in ${hello.toFixed(2)} ms; start to exit ${first.toFixed(2)} ms`);
for (const stdio of ['ignore', 'pipe']) {
  const times = { node: [], custody: [] };
  for (let i = 0; i < n; i++) {
    // Alternate which goes first, so neither always runs on a warmer machine.
    const order = i % 2 ? ['node', 'custody'] : ['custody', 'node'];
    for (const which of order) times[which].push(await once(which === 'node' ? nodeSpawn : spawn, stdio));
  }
  const m = { node: median(times.node), custody: median(times.custody) };
  console.log(
    `stdio '${stdio}': child_process.spawn ${m.node.toFixed(2)} ms, custody spawn ${m.custody.toFixed(2)} ms, ratio ${(m.custody / m.node).toFixed(2)} (medians of ${n}, ${os.cpus().length} CPUs, node ${process.version})`,
  );
}
