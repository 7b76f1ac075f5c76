// Test helpers: process identity from /proc (PID + start ticks, so a recycled PID is never taken
// for the process the test started), polls with deadlines, and the privileged-skip rule.

import fs from 'node:fs';
import os from 'node:os';
import { spawn as nodeSpawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { once } from 'node:events';
import { after } from 'node:test';
import { agent, agentRunning } from '../dist/agent.js';

export const here = path.dirname(fileURLToPath(import.meta.url));
export const fixture = (name) => path.join(here, 'fixtures', name);

if (!process.env.CUSTODY_BIN) {
  throw new Error('CUSTODY_BIN must name the built custody binary (go build -o DIR/custody ./cmd/custody)');
}

// A ledger of the tests' own, so that their rows never mix with the user's: set before the first
// spawn starts the agent (which, like every fixture, inherits it), removed when this file's tests
// have run. The agent writes the ledger as it ends (its rows removed), and makes the directory
// again if it is gone by then: the agent is ended, and its exit awaited, first. The exit handler
// is for a run cut short before the hook.
if (!process.env.CUSTODY_LEDGER) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'custody-node-ledger-'));
  process.env.CUSTODY_LEDGER = path.join(dir, 'spawn-ledger.json');
  after(async () => {
    if (agentRunning()) {
      const a = agent();
      const exited = a.process.exitCode === null && a.process.signalCode === null ? once(a.process, 'exit') : null;
      a.close();
      await exited;
    }
    fs.rmSync(dir, { recursive: true, force: true });
  });
  process.on('exit', () => fs.rmSync(dir, { recursive: true, force: true }));
}

/** The start ticks of `pid` (field 22 of /proc/PID/stat, parsed after the last ')'), or null. */
export function startTicks(pid) {
  let stat;
  try {
    stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return null;
  }
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // fields[0] is field 3 (state): a zombie has exited.
  if (fields[0] === 'Z' || fields[0] === 'X') return null;
  return fields[19];
}

/** One incarnation: a PID and its start, read now. */
export function identify(pid) {
  const start = startTicks(pid);
  if (start === null) throw new Error(`process ${pid} is not running`);
  return { pid, start };
}

/** Reports whether the incarnation `id` still runs. */
export function alive(id) {
  return startTicks(id.pid) === id.start;
}

/** Polls `fn` every 20 ms until it returns a truthy value, or throws after `ms`. */
export async function waitFor(what, fn, ms = 30000) {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** Waits until none of `ids` runs. */
export function waitGone(ids, ms = 30000) {
  return waitFor(`${ids.map((i) => i.pid).join(', ')} to be gone`, () => ids.every((id) => !alive(id)), ms);
}

/** Resolves to everything `stream` yields, as a string. */
export async function readAll(stream) {
  let s = '';
  for await (const chunk of stream) s += chunk;
  return s;
}

/** Resolves to the first line of `stream` (newline included); the rest is read and dropped. */
export function firstLine(stream) {
  return new Promise((resolve, reject) => {
    let s = '';
    const onData = (d) => {
      s += d;
      const nl = s.indexOf('\n');
      if (nl === -1) return;
      stream.off('data', onData);
      stream.off('error', reject);
      stream.resume();
      resolve(s.slice(0, nl + 1));
    };
    stream.on('data', onData);
    stream.once('error', reject);
  });
}

/** Resolves to [code, signal] at the child's 'close' (or its 'error', rejected). */
export function closed(child) {
  return new Promise((resolve, reject) => {
    child.once('close', (code, signal) => resolve([code, signal]));
    child.once('error', reject);
  });
}

/**
 * Skips `t` for `reason`, unless CUSTODY_REQUIRE_PRIVILEGED=1 (as CI sets): there a missing
 * capability is a failure, so that a passing CI run has exercised it.
 */
export function skipUnprivileged(t, reason) {
  if (process.env.CUSTODY_REQUIRE_PRIVILEGED === '1') throw new Error(`required but unavailable: ${reason}`);
  t.skip(reason);
}

/**
 * Starts a Node helper program with child_process (the test's own owner process, to be killed),
 * reading its stdout as lines. It is killed and waited at the end of the test.
 */
export function helper(t, script, args = []) {
  const child = nodeSpawn(process.execPath, [script, ...args], { stdio: ['pipe', 'pipe', 'inherit'] });
  const lines = [];
  const waiters = [];
  let buf = '';
  child.stdout.setEncoding('utf8');
  child.stdout.on('data', (d) => {
    buf += d;
    for (let nl = buf.indexOf('\n'); nl !== -1; nl = buf.indexOf('\n')) {
      lines.push(buf.slice(0, nl));
      buf = buf.slice(nl + 1);
    }
    for (const w of waiters.splice(0)) w();
  });
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve([code, signal])));
  t.after(async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await exited;
  });
  return {
    child,
    exited,
    /** Resolves to the first line starting with `prefix`, without it. */
    async line(prefix, ms = 30000) {
      const deadline = Date.now() + ms;
      for (;;) {
        const l = lines.find((x) => x.startsWith(prefix));
        if (l !== undefined) return l.slice(prefix.length);
        if (child.exitCode !== null || child.signalCode !== null) throw new Error(`${script} exited before "${prefix}"; said: ${lines.join(' | ')}`);
        if (Date.now() > deadline) throw new Error(`timed out waiting for "${prefix}" from ${script}`);
        await new Promise((r) => {
          waiters.push(r);
          setTimeout(r, 50);
        });
      }
    },
  };
}
