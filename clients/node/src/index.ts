// custody for Node: child_process.spawn's shape for children that die with their owner however it
// dies. The MCP transport is in "custody/mcp" (it needs @modelcontextprotocol/sdk).

export { spawn, CustodyChildProcess, type SpawnOptions, type StdioEntry, type StopResult } from './child.js';
export { AgentError, PROTOCOL, type Hello } from './agent.js';
export { findBinary } from './binary.js';
