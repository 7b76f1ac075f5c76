// CustodyStdioClientTransport: the MCP TypeScript SDK's StdioClientTransport, with the server
// started as an owned child: when the host dies, however it dies, the server's scope (the server
// and everything it started, detached or not) is stopped.

import { getDefaultEnvironment, type StdioServerParameters } from '@modelcontextprotocol/sdk/client/stdio.js';
import { ReadBuffer, serializeMessage } from '@modelcontextprotocol/sdk/shared/stdio.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { PassThrough, type Stream } from 'node:stream';
import { spawn, type CustodyChildProcess, type StdioEntry, type StopResult } from './child.js';

/** StdioClientTransport's options, and custody's own. */
export type CustodyStdioServerParameters = StdioServerParameters & {
  /** Milliseconds `close()` waits for the server to exit after its stdin closed; default 2000. */
  closeTimeout?: number;
  /** Milliseconds between the scope's request to exit and its kill; default the agent's (3 s). */
  grace?: number;
  /** The ledger row's purpose; default `mcp-helper` (a purpose reaped after a crash). */
  purpose?: string;
};

/**
 * An MCP client transport over a server's stdin and stdout, a drop-in for the SDK's
 * `StdioClientTransport` (`client.connect(new CustodyStdioClientTransport({command, args}))`).
 * `close()` follows MCP's shutdown order for stdio: close the server's stdin, wait for it to exit,
 * then stop its scope (the request to exit, the grace, the kill) so nothing it started is left.
 */
export class CustodyStdioClientTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;

  private readonly params: CustodyStdioServerParameters;
  private readonly readBuffer = new ReadBuffer();
  private readonly stderrStream: PassThrough | null = null;
  private child: CustodyChildProcess | undefined;
  /** The outcome of the scope's stop in the last `close()`, for callers that want it. */
  lastStop: StopResult | undefined;

  constructor(server: CustodyStdioServerParameters) {
    this.params = server;
    if (server.stderr === 'pipe' || server.stderr === 'overlapped') this.stderrStream = new PassThrough();
  }

  async start(): Promise<void> {
    if (this.child) {
      throw new Error('CustodyStdioClientTransport already started! If using Client class, note that connect() calls start() automatically.');
    }
    const p = this.params;
    const stderr: StdioEntry = this.stderrStream ? 'pipe' : ((p.stderr as StdioEntry | undefined) ?? 'inherit');
    const child = spawn(p.command, p.args ?? [], {
      env: { ...getDefaultEnvironment(), ...p.env },
      cwd: p.cwd,
      stdio: ['pipe', 'pipe', stderr],
      purpose: p.purpose ?? 'mcp-helper',
      grace: p.grace,
    });
    this.child = child;
    await new Promise<void>((resolve, reject) => {
      child.on('error', (error: Error) => {
        reject(error);
        this.onerror?.(error);
      });
      child.on('spawn', () => resolve());
      child.on('close', () => {
        if (this.child === child) this.child = undefined;
        this.onclose?.();
      });
      child.stdin?.on('error', (error: Error) => this.onerror?.(error));
      child.stdout?.on('data', (chunk: Buffer) => {
        try {
          this.readBuffer.append(chunk);
          this.processReadBuffer();
        } catch (error) {
          this.onerror?.(error as Error);
          this.close().catch(() => {});
        }
      });
      child.stdout?.on('error', (error: Error) => this.onerror?.(error));
      if (this.stderrStream && child.stderr) child.stderr.pipe(this.stderrStream);
    });
  }

  private processReadBuffer(): void {
    for (;;) {
      let message: JSONRPCMessage | null;
      try {
        message = this.readBuffer.readMessage();
      } catch (error) {
        this.onerror?.(error as Error);
        continue;
      }
      if (message === null) return;
      this.onmessage?.(message);
    }
  }

  /** The server's stderr when `stderr` is `'pipe'` or `'overlapped'` (available before start). */
  get stderr(): Stream | null {
    return this.stderrStream ?? this.child?.stderr ?? null;
  }

  /** The server's PID, once started. */
  get pid(): number | null {
    return this.child?.pid ?? null;
  }

  async close(): Promise<void> {
    const child = this.child;
    this.child = undefined;
    if (child) {
      const closed = new Promise<void>((resolve) => {
        if (child.exitCode !== null || child.signalCode !== null) resolve();
        else child.once('exit', () => resolve());
      });
      try {
        child.stdin?.end();
      } catch {
        // already destroyed: the server is going anyway
      }
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([closed, new Promise<void>((resolve) => (timer = setTimeout(resolve, this.params.closeTimeout ?? 2000)))]);
      clearTimeout(timer);
      // Whether or not the server exited, its scope may hold what it started: the stop asks the
      // scope to exit, waits the grace, then kills it.
      try {
        this.lastStop = await child.stop({ grace: this.params.grace });
      } catch (error) {
        this.onerror?.(error as Error);
      }
    }
    this.readBuffer.clear();
  }

  send(message: JSONRPCMessage): Promise<void> {
    return new Promise((resolve, reject) => {
      const stdin = this.child?.stdin;
      if (!stdin) {
        reject(new Error('Not connected'));
        return;
      }
      if (stdin.write(serializeMessage(message))) resolve();
      else stdin.once('drain', resolve);
    });
  }
}
