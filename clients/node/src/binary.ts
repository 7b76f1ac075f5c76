// Where the custody binary is: CUSTODY_BIN, then a copy shipped in this package, then PATH.

import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const exe = process.platform === 'win32' ? 'custody.exe' : 'custody';

/** The copy an install may ship beside the compiled JavaScript: `<package>/bin/custody`. */
export const shippedBinary = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'bin', exe);

function executable(file: string): boolean {
  try {
    // A directory passes X_OK too: only a regular file (or a link to one) is a program.
    return fs.statSync(file).isFile() && (fs.accessSync(file, fs.constants.X_OK), true);
  } catch {
    return false;
  }
}

/**
 * Returns the path of the custody binary, or throws an error (code `ENOENT`) naming every place
 * it looked. `CUSTODY_BIN` is taken as given, even when it names nothing runnable: a variable set
 * on purpose that is silently passed over would run some other binary than the one meant.
 */
export function findBinary(env: NodeJS.ProcessEnv = process.env): string {
  const tried: string[] = [];
  const fromEnv = env.CUSTODY_BIN;
  if (fromEnv) {
    // Resolved: a bare name would otherwise be looked up in PATH by the spawn, not taken as given.
    if (executable(fromEnv)) return path.resolve(fromEnv);
    throw notFound(`CUSTODY_BIN=${fromEnv} is not an executable file`);
  }
  tried.push('CUSTODY_BIN (unset)');
  if (executable(shippedBinary)) return shippedBinary;
  tried.push(shippedBinary);
  for (const dir of (env.PATH ?? '').split(path.delimiter)) {
    if (dir === '') continue;
    const file = path.join(dir, exe);
    if (executable(file)) return file;
  }
  tried.push(`PATH=${env.PATH ?? ''}`);
  throw notFound(`custody binary not found; tried ${tried.join(', ')}`);
}

function notFound(message: string): NodeJS.ErrnoException {
  const err: NodeJS.ErrnoException = new Error(message);
  err.code = 'ENOENT';
  return err;
}
