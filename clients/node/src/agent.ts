// The connection to `custody agent`: one agent per Node process, started on first use, spoken to
// in JSON lines over a Unix stream socket on its descriptor 3 (docs/agent.md in custody).

import { spawn as nodeSpawn, type ChildProcess } from 'node:child_process';
import type net from 'node:net';
import os from 'node:os';
import { findBinary } from './binary.js';

/** The protocol this client speaks; an agent announcing another one is refused. */
export const PROTOCOL = 1;

/** The agent's first message. */
export interface Hello {
  event: 'hello';
  protocol: number;
  version: string;
  pid: number;
  containment: string;
  capabilities: string[];
  max_line: number;
}

/**
 * An error reply of the agent. `code` is the protocol's error code (`not-found`, `bad-request`,
 * ...), kept apart from errno-style codes, which {@link spawn} maps it to where Node has one.
 */
export class AgentError extends Error {
  readonly code: string;
  constructor(code: string, message: string) {
    super(message);
    this.name = 'AgentError';
    this.code = code;
  }
}

/** What an `exit` event says: the exit code, or the number of the signal that killed the child. */
export type ExitListener = (code: number | null, signal: NodeJS.Signals | null) => void;

/** Called, once, for every child still held when the agent itself ends. */
export type LostListener = (err: Error) => void;

interface Pending {
  onReply?: (reply: Record<string, unknown>) => void;
  resolve: (reply: Record<string, unknown>) => void;
  reject: (err: Error) => void;
}

interface Held {
  exit: ExitListener;
  lost: LostListener;
  ref: boolean;
}

// Number to name, the first name winning, as child_process reports them: 6 is SIGABRT, not its
// alias SIGIOT listed after it (a Map built in order would keep the last).
const signalNames = new Map<number, NodeJS.Signals>();
for (const [name, n] of Object.entries(os.constants.signals)) {
  if (!signalNames.has(n)) signalNames.set(n, name as NodeJS.Signals);
}

/**
 * One running agent. Its children die with this Node process however it ends: the agent's owner
 * is its parent, watched through a handle, and the socket's end of file stops every scope.
 */
export class Agent {
  readonly process: ChildProcess;
  readonly ready: Promise<Hello>;
  private readonly sock: net.Socket;
  private readonly pending = new Map<number, Pending>();
  private readonly held = new Map<number, Held>();
  private nextId = 1;
  private chunks: Buffer[] = [];
  private refs = 0;
  private ended: Error | null = null;

  constructor(bin: string = findBinary()) {
    if (process.platform === 'win32') {
      // The agent's --fd is a Unix socket; on Windows Node's 'pipe' is a named pipe the agent
      // does not take as its --fd, and --socket with a named pipe is not wired here yet.
      const err: NodeJS.ErrnoException = new Error('custody: the Node client does not run on Windows yet');
      err.code = 'ERR_CUSTODY_UNSUPPORTED';
      throw err;
    }
    // detached: the agent gets a session of its own, so a terminal's ^C (sent to the foreground
    // process group, which holds this Node process) does not kill the agent and with it every
    // child before the program's own SIGINT handler has had its say. The agent still dies with
    // this process: it watches its parent through a pidfd, and its socket reaches end of file.
    // stdio 0-2 are inherited so that a child's "inherit" is this process's stream; descriptor 3
    // is libuv's "pipe", which on POSIX is a socketpair(AF_UNIX, SOCK_STREAM): the agent's --fd.
    this.process = nodeSpawn(bin, ['agent', '--fd', '3'], {
      stdio: ['inherit', 'inherit', 'inherit', 'pipe'],
      detached: true,
    });
    this.sock = this.process.stdio[3] as net.Socket;
    let hello: (h: Hello) => void = () => {};
    let fail: (err: Error) => void = () => {};
    this.ready = new Promise<Hello>((resolve, reject) => {
      hello = resolve;
      fail = reject;
    });
    // A caller that never awaits `ready` (a start that failed first) must not see an unhandled
    // rejection: the error reaches it through its request.
    this.ready.catch(() => {});
    this.process.on('error', (err) => {
      fail(err);
      this.end(err);
    });
    this.process.on('exit', (code, signal) => {
      const err = new AgentError('agent-exited', `custody agent exited (${signal ?? `status ${code}`})`);
      fail(err);
      this.end(err);
    });
    if (!this.sock) return; // spawn failed: 'error' follows
    this.sock.on('error', (err) => this.end(err));
    this.sock.on('close', () => this.end(new AgentError('agent-exited', 'custody agent closed its socket')));
    let first = true;
    this.sock.on('data', (chunk: Buffer) => {
      for (const line of this.lines(chunk)) {
        let msg: Record<string, unknown>;
        try {
          msg = JSON.parse(line);
        } catch {
          continue; // not ours to answer: the agent never sends bad JSON on purpose
        }
        if (first) {
          first = false;
          const h = msg as unknown as Hello;
          if (h.event !== 'hello' || h.protocol !== PROTOCOL) {
            const err = new AgentError('protocol', `custody agent speaks protocol ${String(h.protocol)}, this client ${PROTOCOL}`);
            fail(err);
            this.sock.destroy();
            this.end(err);
            return;
          }
          hello(h);
          this.unref();
          continue;
        }
        this.dispatch(msg);
      }
    });
    // Held until the hello: whoever started the agent is about to use it.
    this.refs = 1;
  }

  private *lines(chunk: Buffer): Generator<string> {
    let start = 0;
    for (let nl = chunk.indexOf(10); nl !== -1; nl = chunk.indexOf(10, start)) {
      this.chunks.push(chunk.subarray(start, nl));
      const line = Buffer.concat(this.chunks).toString('utf8');
      this.chunks = [];
      start = nl + 1;
      yield line;
    }
    if (start < chunk.length) this.chunks.push(chunk.subarray(start));
  }

  private dispatch(msg: Record<string, unknown>): void {
    if (typeof msg.event === 'string') {
      const pid = msg.pid as number;
      if (msg.event === 'exit' || msg.event === 'handed') {
        const h = this.held.get(pid);
        if (!h) return;
        this.forget(pid);
        if (msg.event === 'exit') {
          const sig = typeof msg.signal === 'number' ? (signalNames.get(msg.signal) ?? null) : null;
          h.exit(typeof msg.code === 'number' ? msg.code : null, sig);
        }
      }
      return; // lost-cover, covered and unknown events: nothing for a child_process caller to do
    }
    const p = this.pending.get(msg.id as number);
    if (!p) return;
    this.pending.delete(msg.id as number);
    this.unref();
    if (msg.ok === true) {
      p.onReply?.(msg);
      p.resolve(msg);
    } else {
      const e = (msg.error ?? {}) as { code?: string; message?: string };
      p.reject(new AgentError(e.code ?? 'unknown', e.message ?? 'custody agent refused the request'));
    }
  }

  /**
   * Sends one request and resolves to the agent's reply, or rejects with its error. `onReply`
   * sees a successful reply synchronously, before any later message is read: a start's `exit`
   * event may come in the same read as its reply, and is routed only to a child already held.
   */
  async request(
    op: string,
    fields: Record<string, unknown> = {},
    onReply?: (reply: Record<string, unknown>) => void,
  ): Promise<Record<string, unknown>> {
    if (this.ended) throw this.ended;
    // Held while in flight: an unref'd socket would let Node exit with a start half done.
    this.ref();
    let hello: Hello;
    try {
      hello = await this.ready;
    } catch (err) {
      this.unref();
      throw err;
    }
    if (!serves(hello, op)) {
      this.unref();
      throw new AgentError('unsupported', `custody agent ${hello.version} does not serve "${op}"`);
    }
    if (this.ended) {
      this.unref();
      throw this.ended;
    }
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { onReply, resolve, reject });
      this.sock.write(JSON.stringify({ ...fields, id, op }) + '\n');
    });
  }

  /**
   * Routes `pid`'s `exit` event to `exit` and, with `ref`, keeps the event loop alive until it
   * comes, as a running ChildProcess does.
   */
  hold(pid: number, exit: ExitListener, lost: LostListener, ref = true): void {
    if (this.ended) {
      lost(this.ended);
      return;
    }
    this.held.set(pid, { exit, lost, ref });
    if (ref) this.ref();
  }

  /** Says whether the running child `pid` keeps the event loop alive. */
  setRef(pid: number, ref: boolean): void {
    const h = this.held.get(pid);
    if (!h || h.ref === ref) return;
    h.ref = ref;
    if (ref) this.ref();
    else this.unref();
  }

  /** Stops routing `pid`'s events (after its exit, a release or a hand-over). */
  forget(pid: number): void {
    const h = this.held.get(pid);
    if (!h) return;
    this.held.delete(pid);
    if (h.ref) this.unref();
  }

  /** Reports whether the agent can take requests. */
  get alive(): boolean {
    return this.ended === null;
  }

  private ref(): void {
    if (this.refs++ === 0 && !this.ended) {
      this.process.ref();
      this.sock?.ref();
    }
  }

  private unref(): void {
    if (this.refs > 0) this.refs--;
    if (this.refs === 0) {
      // The agent alone never keeps Node alive: with no child and no request, Node may exit,
      // and the agent follows it (end of file on its socket).
      this.process.unref();
      this.sock?.unref();
    }
  }

  private end(err: Error): void {
    if (this.ended) return;
    this.ended = err;
    if (current === this) current = null;
    for (const p of this.pending.values()) p.reject(err);
    this.pending.clear();
    const held = [...this.held.values()];
    this.held.clear();
    this.refs = 0;
    this.process.unref();
    this.sock?.unref();
    for (const h of held) h.lost(err);
  }

  /** Ends the connection: the agent stops every child it still holds and exits. */
  close(): void {
    this.sock?.end();
  }
}

/**
 * Reports whether the agent serves `op`. `start` and `ping` are always served; `fifos` is named
 * by the `fifo` capability (the stdio entry) or by its own name.
 */
function serves(hello: Hello, op: string): boolean {
  if (op === 'start' || op === 'ping') return true;
  if (op === 'fifos' && hello.capabilities.includes('fifo')) return true;
  return hello.capabilities.includes(op);
}

let current: Agent | null = null;

/** Returns this process's agent, starting it on first use (and again after one ended). */
export function agent(): Agent {
  if (current === null || !current.alive) current = new Agent();
  return current;
}

/** Reports whether an agent is running now, without starting one. */
export function agentRunning(): boolean {
  return current !== null && current.alive;
}
