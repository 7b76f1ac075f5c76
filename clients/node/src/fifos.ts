// The named pipes of a start (the agent's `fifos` request), opened by this process, with one set
// fetched ahead per combination of streams so that a start waits for one round trip, not two.

import fs from 'node:fs';
import net from 'node:net';
import { AgentError, type Agent } from './agent.js';

/** stdin, stdout, stderr: the protocol's stream names, in descriptor order. */
export const streamNames = ['stdin', 'stdout', 'stderr'] as const;
export type StreamName = (typeof streamNames)[number];

/** One token's pipes, opened: a descriptor per stream, not yet wrapped (nothing on the loop). */
export interface FifoSet {
  token: string;
  fds: Partial<Record<StreamName, number>>;
  at: number;
}

/**
 * How long a fetched set is used. The agent withdraws a token not used within 10 s; a set older
 * than this is closed and fetched again rather than raced against that withdrawal (a start that
 * still loses the race gets `no-such-fifo` and is retried once with a fresh set).
 */
const freshFor = 5000;

const ahead = new WeakMap<Agent, Map<string, Promise<FifoSet>>>();

/**
 * Opens the client's side of each pipe. O_NONBLOCK: the agent has its own side open already, so
 * the open cannot wait (and a blocking open would run on libuv's thread pool, whose four threads
 * a hundred concurrent starts would starve); libuv's pipe handle then reads and writes it.
 */
async function fetchSet(a: Agent, streams: StreamName[]): Promise<FifoSet> {
  const reply = await a.request('fifos', { streams });
  const paths = reply.paths as Record<StreamName, string>;
  const { O_RDONLY, O_WRONLY, O_NONBLOCK } = fs.constants;
  const set: FifoSet = { token: reply.token as string, fds: {}, at: Date.now() };
  try {
    for (const name of streams) set.fds[name] = fs.openSync(paths[name], (name === 'stdin' ? O_WRONLY : O_RDONLY) | O_NONBLOCK);
  } catch (err) {
    closeSet(set);
    throw err;
  }
  return set;
}

/** Closes a set that will not be used. */
export function closeSet(set: FifoSet): void {
  for (const fd of Object.values(set.fds)) fs.closeSync(fd);
}

/**
 * Returns an opened set for `streams`: the one fetched ahead when it is fresh, else a new one.
 * `fresh`: never the one fetched ahead (a retry after `no-such-fifo`).
 */
export async function takeSet(a: Agent, streams: StreamName[], fresh = false): Promise<FifoSet> {
  const key = streams.join(',');
  const sets = ahead.get(a);
  const pending = fresh ? undefined : sets?.get(key);
  if (pending) sets?.delete(key);
  const got = pending ? await pending.catch(() => null) : null;
  if (got && Date.now() - got.at < freshFor) return got;
  if (got) closeSet(got);
  return fetchSet(a, streams);
}

/**
 * Fetches the next set for `streams` ahead, unless one is on its way. Called once a start has
 * its reply, so that the fetch does not compete with the start it would serve.
 */
export function fetchAhead(a: Agent, streams: StreamName[]): void {
  const key = streams.join(',');
  let sets = ahead.get(a);
  if (!sets) ahead.set(a, (sets = new Map()));
  if (sets.has(key)) return;
  const next = fetchSet(a, streams);
  next.catch(() => sets.delete(key));
  sets.set(key, next);
}

/** Reports whether a start failed because its token was withdrawn (it may be retried). */
export function withdrawn(err: unknown): boolean {
  return err instanceof AgentError && err.code === 'no-such-fifo';
}

/** Wraps an opened pipe in a socket on libuv's pipe handle. */
export function socketOf(fd: number, forWriting: boolean): net.Socket {
  return new net.Socket({ fd, readable: !forWriting, writable: forWriting });
}
