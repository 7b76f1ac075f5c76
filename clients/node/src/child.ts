// spawn(): child_process.spawn's shape, with the child started by the custody agent in a scope of
// its own that dies with this Node process however it ends.

import { EventEmitter } from 'node:events';
import fs from 'node:fs';
import type net from 'node:net';
import os from 'node:os';
import { PassThrough, type Readable, type Stream, type Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { agent, AgentError, type Agent } from './agent.js';
import { closeSet, fetchAhead, socketOf, streamNames, takeSet, withdrawn } from './fifos.js';

/** One entry of `stdio`, as child_process takes it (`'ipc'` excepted). */
export type StdioEntry = 'pipe' | 'overlapped' | 'ignore' | 'inherit' | number | Stream | null | undefined;

export interface SpawnOptions {
  /** The child's working directory; default `process.cwd()` at the call, as child_process. */
  cwd?: string | URL;
  /** The child's whole environment; default `process.env` at the call, as child_process. */
  env?: NodeJS.ProcessEnv;
  /** As child_process: one value for all three streams, or one per stream. Default `'pipe'`. */
  stdio?: StdioEntry | StdioEntry[];
  /** Run `command` (and `args` joined by spaces) through `/bin/sh -c`, or the shell named. */
  shell?: boolean | string;
  /** Aborting it kills the child's scope with `killSignal`, and `'error'` gets an AbortError. */
  signal?: AbortSignal;
  /** The signal of `kill()` without an argument and of an abort; default `'SIGTERM'`. */
  killSignal?: NodeJS.Signals | number;
  /**
   * execa's option: when `kill()` sends `killSignal` and the child has not exited this many
   * milliseconds later, its scope gets SIGKILL. Default 5000; `true` is the default; `false`
   * never forces.
   */
  forceKillAfterDelay?: number | boolean;
  /** Accepted and ignored: every child is in a scope of its own, and dies with its owner. */
  detached?: boolean;
  /** Accepted and ignored (Windows only in child_process). */
  windowsHide?: boolean;
  /** The ledger row's purpose (non-empty, no `:`); default the agent's. */
  purpose?: string;
  /** Milliseconds between the request to exit and the kill, for `stop()` and the final stop. */
  grace?: number;
  /** `true`: the row is not reapable after a crash. */
  keep?: boolean;
  /** The spawn tag's variable (`CUSTODY_SPAWN` by default; `HERMES_SPAWN` to share Hermes's). */
  tagEnv?: string;
}

/** The typed result of {@link CustodyChildProcess.stop}. */
export interface StopResult {
  outcome: 'exited' | 'already-exited' | 'no-authority' | 'permission-denied' | 'timed-out';
  /** Whether the request to exit (SIGTERM) was sent. */
  requested: boolean;
  /** Whether the kill after the grace was needed. */
  forced: boolean;
  /** Why, for every outcome but `exited`. */
  reason: string;
}

const defaultForceKillAfterDelay = 5000;
type Wire = 'pipe' | 'null' | 'inherit' | 'stdout';

function signalName(signal: NodeJS.Signals | number): NodeJS.Signals {
  const signals = os.constants.signals as Record<string, number>;
  if (typeof signal === 'number') {
    const name = Object.keys(signals).find((k) => signals[k] === signal);
    if (name) return name as NodeJS.Signals;
  } else if (signal in signals) {
    return signal;
  }
  const err: NodeJS.ErrnoException = new TypeError(`Unknown signal: ${String(signal)}`);
  err.code = 'ERR_UNKNOWN_SIGNAL';
  throw err;
}

/** The descriptor a Stream stands on, if it is one of this process's standard streams. */
function streamFd(s: Stream): number | undefined {
  const fd = (s as unknown as { fd?: unknown }).fd;
  return typeof fd === 'number' ? fd : undefined;
}

function normalizeStdio(stdio: SpawnOptions['stdio']): StdioEntry[] {
  const all = Array.isArray(stdio) ? [...stdio] : [stdio, stdio, stdio];
  all.forEach((e, i) => {
    if ((e as unknown) === 'ipc') throw new TypeError('custody: stdio "ipc" is not supported');
    // The agent gives a child three streams: a fourth descriptor asked for is not silently lost.
    if (i >= 3 && e !== undefined && e !== null && e !== 'ignore') throw new TypeError(`custody: stdio[${i}]: only three streams are supported`);
  });
  const entries = all.slice(0, 3);
  while (entries.length < 3) entries.push(undefined);
  return entries;
}

/**
 * What each stream is on the wire, and which need the client to copy between a descriptor or
 * Stream of its own and a pipe. The agent cannot receive this process's descriptors (Node has no
 * SCM_RIGHTS), and it inherited only descriptors 0-2 when it started, so a stream mapped to its
 * own standard descriptor (`stdio: [0, 1, 2]`, `process.stdout` for stdout) is "inherit", stderr
 * sent where an inherited stdout goes is "stdout" (`2>&1`), and any other descriptor or Stream is
 * served through a pipe this process copies: the child then sees a pipe, not that file.
 */
function plan(entries: StdioEntry[]): { wire: Wire[]; copy: (number | Stream | null)[] } {
  const wire: Wire[] = [];
  const copy: (number | Stream | null)[] = [];
  entries.forEach((e, i) => {
    copy.push(null);
    if (e === undefined || e === null || e === 'pipe' || e === 'overlapped') return wire.push('pipe');
    if (e === 'ignore') return wire.push('null');
    if (e === 'inherit') return wire.push('inherit');
    const fd = typeof e === 'number' ? e : streamFd(e as Stream);
    if (fd === i) return wire.push('inherit');
    if (i === 2 && fd === 1 && wire[1] === 'inherit') return wire.push('stdout');
    if (typeof e !== 'number' && typeof e !== 'object') throw new TypeError(`custody: bad stdio entry ${String(e)}`);
    copy[i] = e;
    return wire.push('pipe');
  });
  return { wire, copy };
}

function spawnError(code: string, errno: number, file: string, args: string[], message: string): NodeJS.ErrnoException {
  const err: NodeJS.ErrnoException & { spawnargs?: string[] } = new Error(`spawn ${file} ${code}`);
  err.errno = -errno;
  err.code = code;
  err.syscall = `spawn ${file}`;
  err.path = file;
  err.spawnargs = args;
  err.cause = message;
  return err;
}

/**
 * A child started by the custody agent, shaped like child_process's ChildProcess: the same
 * streams, properties and events (`spawn`, `exit`, `close`, `error`), with `kill()` acting on the
 * child's whole scope (its cgroup, or its process group where no cgroup can be had).
 *
 * Unlike child_process, the start is asynchronous: `pid` is `undefined` until `'spawn'`, and a
 * `kill()` before then is sent once the child runs. The streams exist at once.
 */
export class CustodyChildProcess extends EventEmitter {
  stdin: Writable | null = null;
  stdout: Readable | null = null;
  stderr: Readable | null = null;
  readonly stdio: [Writable | null, Readable | null, Readable | null];
  pid: number | undefined = undefined;
  exitCode: number | null = null;
  signalCode: NodeJS.Signals | null = null;
  killed = false;
  readonly connected = false;
  readonly spawnfile: string;
  readonly spawnargs: string[];
  /** What the child's scope is: `cgroup`, `process-group` or `job`; set at `'spawn'`. */
  containment: string | undefined = undefined;

  private readonly agent: Agent;
  private readonly started: Promise<boolean>;
  private readonly killSignal: NodeJS.Signals;
  private readonly forceKillAfterDelay: number | false;
  private forceTimer: NodeJS.Timeout | null = null;
  private exited = false;
  private closed = false;
  private openStreams = 0;
  private held = true;
  private spawned = false;
  private early: (() => void) | null = null;

  constructor(file: string, args: string[], options: SpawnOptions) {
    super();
    this.spawnfile = file;
    this.spawnargs = [file, ...args];
    this.killSignal = signalName(options.killSignal ?? 'SIGTERM');
    const fk = options.forceKillAfterDelay ?? true;
    this.forceKillAfterDelay = fk === true ? defaultForceKillAfterDelay : fk === false ? false : fk;
    const { wire, copy } = plan(normalizeStdio(options.stdio));
    const ends: (PassThrough | null)[] = wire.map((w, i) => (w === 'pipe' && copy[i] === null ? new PassThrough() : null));
    this.stdin = ends[0];
    this.stdout = ends[1];
    this.stderr = ends[2];
    this.stdio = [this.stdin, this.stdout, this.stderr];
    for (const s of ends) {
      if (!s) continue;
      this.openStreams++;
      s.once('close', () => {
        this.openStreams--;
        this.maybeClose();
      });
    }
    this.agent = agent();
    this.started = this.start(file, args, options, wire, copy, ends);
    if (options.signal) this.watchAbort(options.signal);
  }

  private async start(
    file: string,
    args: string[],
    options: SpawnOptions,
    wire: Wire[],
    copy: (number | Stream | null)[],
    ends: (PassThrough | null)[],
  ): Promise<boolean> {
    const socks: (net.Socket | null)[] = [null, null, null];
    const request: Record<string, unknown> = {
      argv: [file, ...args],
      env: Object.fromEntries(Object.entries(options.env ?? process.env).filter(([, v]) => v !== undefined)),
      cwd: options.cwd instanceof URL ? fileURLToPath(options.cwd) : (options.cwd ?? process.cwd()),
      stdio: wire.map((w) => (w === 'pipe' ? 'fifo' : w)),
    };
    if (options.purpose !== undefined) request.purpose = options.purpose;
    if (options.grace !== undefined) request.grace = options.grace / 1000;
    if (options.keep !== undefined) request.keep = options.keep;
    if (options.tagEnv !== undefined) request.tag_env = options.tagEnv;
    const streams = streamNames.filter((_, i) => wire[i] === 'pipe');
    try {
      for (let attempt = 0; ; attempt++) {
        const set = streams.length > 0 ? await takeSet(this.agent, streams, attempt > 0) : null;
        if (set) request.fifos = set.token;
        try {
          await this.agent.request('start', request, (reply) => {
            this.pid = reply.pid as number;
            this.containment = reply.containment as string;
            this.agent.hold(this.pid, (code, signal) => this.onExit(code, signal), (err) => this.onLost(err), this.held);
          });
        } catch (err) {
          if (set) closeSet(set);
          if (attempt === 0 && withdrawn(err)) continue;
          throw err;
        }
        if (set) {
          streams.forEach((name) => (socks[streamNames.indexOf(name)] = socketOf(set.fds[name] as number, name === 'stdin')));
          fetchAhead(this.agent, streams);
        }
        break;
      }
    } catch (err) {
      process.nextTick(() => this.failStart(err as Error, file, args, ends));
      return false;
    }
    this.connect(socks, copy, ends);
    // Emitted outside this async function, as child_process emits from the event loop: a
    // listener's throw is then an uncaught exception, not a rejection of `started`.
    process.nextTick(() => {
      this.spawned = true;
      this.emit('spawn');
      if (this.early) this.early();
    });
    return true;
  }

  private connect(socks: (net.Socket | null)[], copy: (number | Stream | null)[], ends: (PassThrough | null)[]): void {
    socks.forEach((sock, i) => {
      if (!sock) return;
      const end = ends[i];
      const other = copy[i];
      // The caller destroying a stream closes the pipe, as destroying child_process's socket
      // does: a child still writing gets EPIPE (SIGPIPE) rather than blocking on a full pipe.
      // Only a destroy: after a stream's normal end the socket flushes and ends by itself.
      end?.once('close', () => {
        if (!end.readableEnded) sock.destroy();
      });
      if (i === 0) {
        // The caller's writes go to the child; the child closing its stdin is EPIPE here, as
        // child_process reports it: an 'error' on stdin.
        const src: Readable = end ?? (typeof other === 'number' ? fs.createReadStream('', { fd: other, autoClose: false }) : (other as Readable));
        sock.on('error', (err) => (end ? end.destroy(err) : sock.destroy()));
        src.pipe(sock);
        return;
      }
      sock.on('error', (err) => end?.destroy(err));
      if (end) {
        sock.pipe(end);
        return;
      }
      // A copy to a descriptor or Stream of the caller's: 'close' waits until it is written,
      // as it would be by the child itself. The caller's descriptor stays open, its Stream
      // unended, as child_process leaves them.
      this.openStreams++;
      const done = () => {
        this.openStreams--;
        this.maybeClose();
      };
      if (typeof other === 'number') {
        const dst = fs.createWriteStream('', { fd: other, autoClose: false });
        dst.once('finish', done);
        dst.once('error', done);
        sock.once('error', () => dst.end());
        sock.pipe(dst);
      } else {
        sock.once('close', done);
        sock.pipe(other as Writable, { end: false });
      }
    });
  }

  private failStart(err: Error, file: string, args: string[], ends: (PassThrough | null)[]): void {
    let e: Error = err;
    if (err instanceof AgentError && err.code === 'not-found') {
      e = spawnError('ENOENT', os.constants.errno.ENOENT, file, args, err.message);
    } else if (err instanceof AgentError && err.code === 'permission-denied') {
      e = spawnError('EACCES', os.constants.errno.EACCES, file, args, err.message);
    }
    // child_process sets exitCode to the negative errno of a failed spawn, then emits 'error'
    // and 'close' (never 'exit').
    this.exitCode = typeof (e as NodeJS.ErrnoException).errno === 'number' ? ((e as NodeJS.ErrnoException).errno as number) : null;
    this.exited = true;
    this.emit('error', e);
    // 'close' a turn of the event loop later, as child_process's closes of the stdio handles
    // come: a caller that awaits 'error' and then listens for 'close' still sees it.
    setImmediate(() => {
      for (const s of ends) s?.destroy();
      this.maybeClose();
    });
  }

  private onExit(code: number | null, signal: NodeJS.Signals | null): void {
    if (!this.spawned) {
      // The exit came in the same read as the start's reply: 'spawn' goes first.
      this.early = () => this.onExit(code, signal);
      return;
    }
    if (this.forceTimer) clearTimeout(this.forceTimer);
    this.exitCode = code;
    this.signalCode = signal;
    this.exited = true;
    // As child_process does at exit: nothing can read what is still written to stdin, and an
    // output stream nobody ever read is drained, so that 'close' comes (its flushStdio).
    this.stdin?.destroy();
    for (const s of [this.stdout, this.stderr]) {
      if (s && s.readableFlowing === null) s.resume();
    }
    this.emit('exit', code, signal);
    this.maybeClose();
  }

  private onLost(err: Error): void {
    if (!this.spawned) {
      this.early = () => this.onLost(err);
      return;
    }
    if (this.forceTimer) clearTimeout(this.forceTimer);
    // The agent ended under this child: its supervisor stops the child's scope, but no exit
    // status will be known, and none is made up.
    this.emit('error', err);
  }

  private maybeClose(): void {
    if (this.closed || !this.exited || this.openStreams > 0) return;
    this.closed = true;
    this.emit('close', this.exitCode, this.signalCode);
  }

  private watchAbort(signal: AbortSignal): void {
    const onAbort = () => {
      if (this.exited) return;
      this.kill(this.killSignal);
      const err = new Error('The operation was aborted', { cause: signal.reason });
      err.name = 'AbortError';
      (err as NodeJS.ErrnoException).code = 'ABORT_ERR';
      this.emit('error', err);
    };
    if (signal.aborted) process.nextTick(onAbort);
    else signal.addEventListener('abort', onAbort, { once: true });
  }

  /**
   * Sends `signal` (default `killSignal`) to every process of the child's scope, and returns
   * whether the child was still running. With `forceKillAfterDelay`, a `killSignal` the scope
   * has not obeyed in time is followed by SIGKILL.
   */
  kill(signal?: NodeJS.Signals | number): boolean {
    const name = signalName(signal ?? this.killSignal);
    if (this.exited) return false;
    this.killed = true;
    this.send(name);
    if (name === this.killSignal && name !== 'SIGKILL' && this.forceKillAfterDelay !== false && !this.forceTimer) {
      this.forceTimer = setTimeout(() => {
        if (!this.exited) this.send('SIGKILL');
      }, this.forceKillAfterDelay);
      this.forceTimer.unref();
    }
    return true;
  }

  private send(signal: NodeJS.Signals): void {
    this.started.then(async (ok) => {
      if (!ok || this.exited) return;
      try {
        await this.agent.request('signal', { pid: this.pid, signal, target: 'scope' });
      } catch (err) {
        // The child exiting while the signal is in flight is what kill() after exit is: nothing.
        if (!(err instanceof AgentError && err.code === 'no-such-child')) this.emit('error', err);
      }
    });
  }

  /**
   * Stops the child's scope through the agent: the request to exit (SIGTERM), `grace`
   * milliseconds (default the start's), then SIGKILL; resolves to the typed outcome once the stop
   * has ended, and the agent no longer holds the child. After `'exit'` it still ends what is left
   * of the scope. Rejects when the child never started.
   */
  async stop(options: { grace?: number } = {}): Promise<StopResult> {
    const ok = await this.started;
    if (!ok) throw new Error(`custody: stop: ${this.spawnfile} never started`);
    // Asked even after 'exit': the leader's exit leaves what it started in its scope (a
    // detached grandchild), and the stop is what ends them.
    const already: StopResult = { outcome: 'already-exited', requested: false, forced: false, reason: 'the child had exited before the stop' };
    const fields: Record<string, unknown> = { pid: this.pid };
    if (options.grace !== undefined) fields.grace = options.grace / 1000;
    try {
      const r = await this.agent.request('stop', fields);
      return { outcome: r.outcome as StopResult['outcome'], requested: !!r.requested, forced: !!r.forced, reason: String(r.reason ?? '') };
    } catch (err) {
      if (err instanceof AgentError && err.code === 'no-such-child') return already;
      throw err;
    }
  }

  /** As ChildProcess.ref: a running child keeps the event loop alive (the default). */
  ref(): void {
    if (this.held) return;
    this.held = true;
    if (this.pid !== undefined) this.agent.setRef(this.pid, true);
  }

  /** As ChildProcess.unref: Node may exit while the child runs (and the child then dies with it). */
  unref(): void {
    if (!this.held) return;
    this.held = false;
    if (this.pid !== undefined) this.agent.setRef(this.pid, false);
  }
}

/**
 * child_process options the agent has no field for. Refused rather than ignored: a child started
 * as another user, or without the timeout asked for, would be a success that is not one.
 * (`detached` and `windowsHide` are accepted: every child is in a scope of its own already.)
 */
const unsupportedOptions = ['uid', 'gid', 'argv0', 'timeout', 'serialization'] as const;

/**
 * Starts `command` with `args` as child_process.spawn does, as an owned child of this Node
 * process: born in a scope of its own, covered by custody's owner-death supervisor, recorded in
 * the ledger. When this process ends, by any cause (even SIGKILL), the child's whole scope is
 * stopped.
 */
export function spawn(command: string, args?: readonly string[] | SpawnOptions, options?: SpawnOptions): CustodyChildProcess {
  if (!Array.isArray(args)) {
    options = args as SpawnOptions | undefined;
    args = [];
  }
  const opts = options ?? {};
  for (const name of unsupportedOptions) {
    if ((opts as Record<string, unknown>)[name] !== undefined) {
      const err: NodeJS.ErrnoException = new TypeError(`custody: spawn option "${name}" is not supported`);
      err.code = 'ERR_CUSTODY_UNSUPPORTED';
      throw err;
    }
  }
  let file = command;
  let argv = [...(args as readonly string[])];
  if (opts.shell) {
    argv = ['-c', [command, ...argv].join(' ')];
    file = typeof opts.shell === 'string' ? opts.shell : '/bin/sh';
  }
  return new CustodyChildProcess(file, argv, opts);
}
