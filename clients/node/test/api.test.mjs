// spawn(): child_process's shape, against the built custody binary.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import { closed, firstLine, fixture, helper, identify, readAll, waitGone } from './helpers.mjs';
import { findBinary, spawn } from '../dist/index.js';
import { shippedBinary } from '../dist/binary.js';

/** Ends `child`'s scope after the test, whatever the test did. */
function cleanup(t, child) {
  t.after(async () => {
    if (child.exitCode === null && child.signalCode === null && child.pid !== undefined) await child.stop({ grace: 100 }).catch(() => {});
  });
  return child;
}

test('pipes, pid, events and exit status as child_process', async (t) => {
  const child = cleanup(t, spawn('sh', ['-c', 'read line; echo "got $line"; echo oops >&2; exit 3']));
  const events = [];
  child.on('spawn', () => events.push('spawn'));
  child.on('exit', (code, signal) => events.push(`exit ${code} ${signal}`));
  assert.equal(child.pid, undefined);
  assert.ok(child.stdin && child.stdout && child.stderr);
  assert.deepEqual(child.stdio, [child.stdin, child.stdout, child.stderr]);
  child.stdin.end('hello\n');
  const [out, err, [code, signal]] = await Promise.all([readAll(child.stdout), readAll(child.stderr), closed(child)]);
  assert.equal(out, 'got hello\n');
  assert.equal(err, 'oops\n');
  assert.deepEqual([code, signal], [3, null]);
  assert.deepEqual(events, ['spawn', 'exit 3 null']);
  assert.equal(typeof child.pid, 'number');
  assert.equal(child.exitCode, 3);
  assert.equal(child.signalCode, null);
  assert.ok(['cgroup', 'process-group'].includes(child.containment), child.containment);
});

test('spawn(command, options) without args, env and cwd', async (t) => {
  const dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'custody-node-')));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const child = cleanup(t, spawn('pwd', { cwd: dir, env: { PATH: process.env.PATH, FOO: 'bar' } }));
  assert.equal(await readAll(child.stdout), `${dir}\n`);
  const env = cleanup(t, spawn('sh', ['-c', 'echo "$FOO ${CUSTODY_SPAWN%%:*}"'], { env: { PATH: process.env.PATH, FOO: 'bar' } }));
  assert.equal(await readAll(env.stdout), 'bar v1\n');
  assert.deepEqual(await closed(env), [0, null]);
});

test('shell: true runs the command line through /bin/sh', async (t) => {
  const child = cleanup(t, spawn('echo $((6 * 7))', [], { shell: true }));
  assert.equal(await readAll(child.stdout), '42\n');
});

test('a missing program emits ENOENT, then close, as child_process', async () => {
  const child = spawn('/nonexistent/custody-no-such-program', ['a']);
  const events = [];
  const err = await new Promise((resolve) => child.on('error', resolve));
  child.on('exit', () => events.push('exit'));
  const [code] = await new Promise((resolve) => child.on('close', (...a) => resolve(a)));
  assert.equal(err.code, 'ENOENT');
  assert.equal(err.errno, -os.constants.errno.ENOENT);
  assert.equal(err.syscall, 'spawn /nonexistent/custody-no-such-program');
  assert.equal(err.path, '/nonexistent/custody-no-such-program');
  assert.deepEqual(err.spawnargs, ['a']);
  assert.equal(code, -os.constants.errno.ENOENT);
  assert.deepEqual(events, []);
  assert.equal(child.pid, undefined);
  // Looked up in PATH too.
  const bare = spawn('custody-no-such-program-in-path');
  assert.equal((await new Promise((resolve) => bare.on('error', resolve))).code, 'ENOENT');
});

test('a child that closes its stdout early: end of file, then exit, then close', async (t) => {
  const child = cleanup(t, spawn('sh', ['-c', 'echo early; exec >&-; read go; exit 5']));
  const order = [];
  child.on('exit', () => order.push('exit'));
  assert.equal(await readAll(child.stdout), 'early\n');
  order.push('stdout end');
  // The child still runs, blocked on stdin: its stdout ended without its exit.
  assert.equal(child.exitCode, null);
  child.stdin.end('go\n');
  assert.deepEqual(await closed(child), [5, null]);
  assert.deepEqual(order, ['stdout end', 'exit']);
});

test('writing to a child that closed its stdin is an error on stdin, not a crash', async (t) => {
  const child = cleanup(t, spawn('sh', ['-c', 'exec <&-; echo closed; read x 2>/dev/null; sleep 30'], { stdio: ['pipe', 'pipe', 'ignore'] }));
  assert.equal(await firstLine(child.stdout), 'closed\n');
  const err = await new Promise((resolve) => {
    child.stdin.on('error', resolve);
    const spam = () => child.stdin.write(Buffer.alloc(65536), (e) => (e ? undefined : setImmediate(spam)));
    spam();
  });
  assert.equal(err.code, 'EPIPE');
  child.kill('SIGKILL');
  assert.deepEqual(await closed(child), [null, 'SIGKILL']);
});

test('destroying stdout closes the pipe: a child still writing gets SIGPIPE', async (t) => {
  const child = cleanup(t, spawn('yes', [], { stdio: ['ignore', 'pipe', 'inherit'] }));
  assert.equal(await firstLine(child.stdout), 'y\n');
  child.stdout.destroy();
  assert.deepEqual(await closed(child), [null, 'SIGPIPE']);
});

test("stdio 'ignore', a descriptor and a Stream", async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'custody-node-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'out');
  const fd = fs.openSync(file, 'w');
  const child = cleanup(t, spawn('sh', ['-c', 'echo to-fd; echo to-null >&2'], { stdio: ['ignore', fd, 'ignore'] }));
  assert.equal(child.stdin, null);
  assert.equal(child.stdout, null);
  assert.equal(child.stderr, null);
  assert.deepEqual(await closed(child), [0, null]);
  fs.closeSync(fd);
  assert.equal(fs.readFileSync(file, 'utf8'), 'to-fd\n');
  // A Stream of the caller's: written before 'close', and left open.
  const out = new PassThrough();
  let got = '';
  out.on('data', (d) => (got += d));
  const viaStream = cleanup(t, spawn('echo', ['to-stream'], { stdio: ['ignore', out, 'inherit'] }));
  assert.deepEqual(await closed(viaStream), [0, null]);
  assert.equal(got, 'to-stream\n');
  assert.equal(out.writableEnded, false);
});

test("stdio 'inherit' is the owner's own stream", async (t) => {
  const h = helper(t, fixture('inherit.mjs'));
  assert.equal(await h.line('inherited '), 'hello');
  assert.equal(await h.line('merged '), 'stderr');
  assert.deepEqual(await h.exited, [0, null]);
});

test('kill() signals the scope; exit reports the signal', async (t) => {
  const child = cleanup(t, spawn('sleep', ['60'], { stdio: 'ignore' }));
  await new Promise((resolve) => child.on('spawn', resolve));
  assert.equal(child.kill(), true);
  assert.equal(child.killed, true);
  assert.deepEqual(await closed(child), [null, 'SIGTERM']);
  assert.equal(child.signalCode, 'SIGTERM');
  assert.equal(child.kill(), false);
  assert.throws(() => child.kill('SIGNOPE'), { code: 'ERR_UNKNOWN_SIGNAL' });
});

test('a child killed by a signal it sent itself: signalCode names it as child_process does', async (t) => {
  const child = cleanup(t, spawn('sh', ['-c', 'kill -ABRT $$'], { stdio: 'ignore' }));
  assert.deepEqual(await closed(child), [null, 'SIGABRT']);
});

test('kill() before spawn is sent once the child runs', async (t) => {
  const child = cleanup(t, spawn('sleep', ['60'], { stdio: 'ignore' }));
  assert.equal(child.kill('SIGKILL'), true);
  assert.deepEqual(await closed(child), [null, 'SIGKILL']);
});

test('forceKillAfterDelay: a child that ignores SIGTERM gets SIGKILL', async (t) => {
  const child = cleanup(t, spawn('sh', ['-c', 'trap "" TERM; echo ready; while :; do read x; done'], { forceKillAfterDelay: 200 }));
  assert.equal(await firstLine(child.stdout), 'ready\n');
  child.kill();
  assert.deepEqual(await closed(child), [null, 'SIGKILL']);
});

test('stop() resolves to the typed outcome', async (t) => {
  const child = cleanup(t, spawn('sleep', ['60'], { stdio: 'ignore' }));
  await new Promise((resolve) => child.on('spawn', resolve));
  const done = closed(child);
  const r = await child.stop({ grace: 2000 });
  assert.deepEqual(r, { outcome: 'exited', requested: true, forced: false, reason: '' });
  assert.deepEqual(await done, [null, 'SIGTERM']);
  const again = await child.stop();
  assert.equal(again.outcome, 'already-exited');
  assert.equal(again.requested, false);
});

test('stop() of a child that ignores the request kills it after the grace', async (t) => {
  const child = cleanup(t, spawn('sh', ['-c', 'trap "" TERM; echo ready; while :; do read x; done']));
  assert.equal(await firstLine(child.stdout), 'ready\n');
  const r = await child.stop({ grace: 200 });
  assert.equal(r.outcome, 'exited');
  assert.equal(r.requested, true);
  assert.equal(r.forced, true);
});

test('an AbortSignal kills the child and emits an AbortError', async (t) => {
  const ac = new AbortController();
  const child = cleanup(t, spawn('sleep', ['60'], { stdio: 'ignore', signal: ac.signal }));
  await new Promise((resolve) => child.on('spawn', resolve));
  const err = new Promise((resolve) => child.on('error', resolve));
  ac.abort();
  assert.equal((await err).name, 'AbortError');
  await new Promise((resolve) => child.on('close', resolve));
  assert.equal(child.signalCode, 'SIGTERM');
});

test('the agent does not keep Node alive once no child is held', async (t) => {
  const h = helper(t, fixture('idle.mjs'));
  const agentPid = Number(await h.line('agent '));
  const agent = identify(agentPid);
  h.child.stdin.end('go\n');
  assert.deepEqual(await h.exited, [0, null]);
  await waitGone([agent]);
});

test('a child that is unref()ed does not keep Node alive, and dies with it', async (t) => {
  const h = helper(t, fixture('unref.mjs'));
  const child = identify(Number(await h.line('child ')));
  h.child.stdin.end('go\n');
  assert.deepEqual(await h.exited, [0, null]);
  await waitGone([child]);
});

test('100 concurrent starts', async (t) => {
  const children = Array.from({ length: 100 }, (_, i) => cleanup(t, spawn('sh', ['-c', `read x; echo "$x ${i}"`])));
  const outs = children.map(async (child, i) => {
    child.stdin.end(`n\n`);
    const [out, status] = await Promise.all([readAll(child.stdout), closed(child)]);
    return [out, status, i];
  });
  for (const [out, status, i] of await Promise.all(outs)) {
    assert.equal(out, `n ${i}\n`);
    assert.deepEqual(status, [0, null]);
  }
  assert.equal(new Set(children.map((c) => c.pid)).size, 100);
});

test('options the agent cannot honour are refused, not ignored', () => {
  for (const opt of [{ uid: 0 }, { gid: 0 }, { argv0: 'x' }, { timeout: 10 }]) {
    assert.throws(() => spawn('true', [], opt), { code: 'ERR_CUSTODY_UNSUPPORTED' });
  }
  assert.throws(() => spawn('true', [], { stdio: ['pipe', 'pipe', 'pipe', 'ipc'] }), TypeError);
});

test('the binary: CUSTODY_BIN as given, then the shipped copy, then PATH', (t) => {
  assert.throws(() => findBinary({ CUSTODY_BIN: '/nonexistent/custody' }), { code: 'ENOENT', message: /CUSTODY_BIN=\/nonexistent\/custody/ });
  assert.equal(findBinary({ CUSTODY_BIN: process.env.CUSTODY_BIN }), process.env.CUSTODY_BIN);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'custody-node-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  fs.symlinkSync(process.env.CUSTODY_BIN, path.join(dir, 'custody'));
  const shipped = fs.existsSync(shippedBinary);
  assert.equal(findBinary({ PATH: `/nonexistent:${dir}` }), shipped ? shippedBinary : path.join(dir, 'custody'));
  if (!shipped) assert.throws(() => findBinary({ PATH: '/nonexistent' }), { code: 'ENOENT', message: /tried CUSTODY_BIN \(unset\), .*bin\/custody, PATH=\/nonexistent/ });
});
