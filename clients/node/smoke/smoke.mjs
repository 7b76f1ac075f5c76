// The smoke test of an installed tarball: run from a fresh project that installed it, with no
// CUSTODY_BIN and no custody on PATH, so the binary shipped in the package is the one found.
import assert from 'node:assert/strict';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { findBinary, spawn } from 'custody';
import { CustodyStdioClientTransport } from 'custody/mcp';

assert.match(findBinary(), /node_modules\/custody\/bin\/custody$/);
const child = spawn('sh', ['-c', 'read x; echo "smoke $x"']);
child.stdin.end('ok\n');
let out = '';
for await (const chunk of child.stdout) out += chunk;
const [code] = await new Promise((resolve) => child.on('close', (...a) => resolve(a)));
assert.equal(out, 'smoke ok\n');
assert.equal(code, 0);

// An MCP server that answers initialize and tools/list by hand, over the transport.
const server = `
  process.stdin.setEncoding('utf8'); let buf = '';
  process.stdin.on('data', (d) => { buf += d; let nl; while ((nl = buf.indexOf('\\n')) >= 0) {
    const m = JSON.parse(buf.slice(0, nl)); buf = buf.slice(nl + 1); if (m.id === undefined) continue;
    const result = m.method === 'initialize'
      ? { protocolVersion: m.params.protocolVersion, capabilities: { tools: {} }, serverInfo: { name: 'smoke', version: '1' } }
      : { tools: [{ name: 'smoke', inputSchema: { type: 'object' } }] };
    process.stdout.write(JSON.stringify({ jsonrpc: '2.0', id: m.id, result }) + '\\n'); } });`;
const client = new Client({ name: 'smoke', version: '1' });
await client.connect(new CustodyStdioClientTransport({ command: process.execPath, args: ['-e', server] }));
assert.deepEqual((await client.listTools()).tools.map((t) => t.name), ['smoke']);
await client.close();
console.log('smoke: 1 passed, 0 failed');
