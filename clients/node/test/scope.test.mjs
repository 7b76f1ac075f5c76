// The scope: kill() reaches a descendant that left the child's session, and the owner's death,
// by SIGKILL, ends every child's tree.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { closed, firstLine, fixture, helper, identify, skipUnprivileged, waitGone } from './helpers.mjs';
import { spawn } from '../dist/index.js';

// A child whose own child calls setsid (a new session and process group: out of reach of a
// process-group kill) and prints its PID; both then run until killed, bounded by sleep's 120 s
// should custody fail to end them.
export const treeScript = 'setsid sleep 120 & echo $!; exec sleep 120';

test('kill() ends a setsid descendant with the child (cgroup scope)', async (t) => {
  const child = spawn('sh', ['-c', treeScript], { stdio: ['ignore', 'pipe', 'inherit'] });
  t.after(() => child.stop({ grace: 100 }).catch(() => {}));
  const grandchild = identify(Number(await firstLine(child.stdout)));
  if (child.containment !== 'cgroup') {
    child.kill('SIGKILL');
    await closed(child);
    return skipUnprivileged(t, `no cgroup containment here (${child.containment}): a setsid descendant leaves a process group`);
  }
  const leader = identify(child.pid);
  assert.equal(child.kill('SIGTERM'), true);
  assert.deepEqual(await closed(child), [null, 'SIGTERM']);
  await waitGone([leader, grandchild]);
});

test('the owner SIGKILLed: every child, its setsid descendant and the agent are gone', async (t) => {
  const h = helper(t, fixture('owner.mjs'), ['3']);
  const [containment, agentPid, ...pids] = (await h.line('ready ')).split(' ');
  if (containment !== 'cgroup') return skipUnprivileged(t, `no cgroup containment here (${containment})`);
  const ids = [identify(Number(agentPid)), ...pids.map((p) => identify(Number(p)))];
  assert.equal(ids.length, 1 + 3 * 2);
  h.child.kill('SIGKILL');
  assert.deepEqual(await h.exited, [null, 'SIGKILL']);
  await waitGone(ids);
});

test('the owner dies of an uncaught exception: every child and its descendant are gone', async (t) => {
  const h = helper(t, fixture('owner.mjs'), ['2', 'throw']);
  const [containment, agentPid, ...pids] = (await h.line('ready ')).split(' ');
  if (containment !== 'cgroup') return skipUnprivileged(t, `no cgroup containment here (${containment})`);
  const ids = [identify(Number(agentPid)), ...pids.map((p) => identify(Number(p)))];
  h.child.stdin.write('die\n');
  assert.deepEqual(await h.exited, [1, null]);
  await waitGone(ids);
});
