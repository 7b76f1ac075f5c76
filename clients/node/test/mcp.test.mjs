// CustodyStdioClientTransport with the SDK's Client and a real SDK server.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { fixture, helper, identify, skipUnprivileged, waitFor, waitGone } from './helpers.mjs';
import { CustodyStdioClientTransport } from '../dist/mcp.js';
import { agent } from '../dist/agent.js';

test('a Client lists and calls tools; close() ends the server and its detached grandchild', async (t) => {
  const transport = new CustodyStdioClientTransport({ command: process.execPath, args: [fixture('mcp-server.mjs')], stderr: 'pipe' });
  assert.ok(transport.stderr, 'stderr is there before start');
  const client = new Client({ name: 'custody-test', version: '1.0.0' });
  let closedEvents = 0;
  await client.connect(transport);
  transport.onclose = ((prev) => () => {
    closedEvents++;
    prev?.();
  })(transport.onclose);
  t.after(() => client.close());
  const tools = (await client.listTools()).tools.map((x) => x.name).sort();
  assert.deepEqual(tools, ['echo', 'pids']);
  const echo = await client.callTool({ name: 'echo', arguments: { text: 'custody' } });
  assert.deepEqual(echo.content, [{ type: 'text', text: 'custody' }]);
  const pids = JSON.parse((await client.callTool({ name: 'pids', arguments: {} })).content[0].text);
  assert.equal(pids.server, transport.pid);
  const server = identify(pids.server);
  const grandchild = identify(pids.grandchild);
  await client.close();
  assert.ok(['exited', 'already-exited'].includes(transport.lastStop?.outcome), JSON.stringify(transport.lastStop));
  await waitFor('onclose', () => closedEvents === 1);
  const { containment } = await agent().ready;
  if (containment !== 'cgroup') {
    await waitGone([server]);
    return skipUnprivileged(t, `no cgroup containment here (${containment}): a detached grandchild leaves a process group`);
  }
  await waitGone([server, grandchild]);
});

test('the host SIGKILLed: the server, its detached grandchild and the agent are gone', async (t) => {
  const h = helper(t, fixture('mcp-host.mjs'));
  const [containment, agentPid, serverPid, grandchildPid, tools] = (await h.line('ready ')).split(' ');
  assert.equal(tools, 'echo,pids');
  if (containment !== 'cgroup') return skipUnprivileged(t, `no cgroup containment here (${containment})`);
  const ids = [identify(Number(agentPid)), identify(Number(serverPid)), identify(Number(grandchildPid))];
  h.child.kill('SIGKILL');
  assert.deepEqual(await h.exited, [null, 'SIGKILL']);
  await waitGone(ids);
});

test('close(): stdin closed, the wait, then the request to exit, then the kill after the grace', async (t) => {
  // A server deaf to both its stdin's end and SIGTERM: only the kill ends it.
  const stubborn = `process.on('SIGTERM', () => console.error('term')); process.stdin.on('end', () => console.error('eof')); process.stdin.resume(); setInterval(() => {}, 1000);`;
  const transport = new CustodyStdioClientTransport({ command: process.execPath, args: ['-e', stubborn], stderr: 'pipe', closeTimeout: 300, grace: 300 });
  let said = '';
  transport.stderr.on('data', (d) => (said += d));
  await transport.start();
  const server = identify(transport.pid);
  t.after(() => transport.close());
  await transport.close();
  assert.deepEqual(transport.lastStop, { outcome: 'exited', requested: true, forced: true, reason: transport.lastStop.reason });
  await waitGone([server]);
  await waitFor('its stderr', () => said.includes('term'));
  assert.deepEqual(said.trim().split('\n'), ['eof', 'term']);
});
