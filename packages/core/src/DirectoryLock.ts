import * as fs from 'node:fs';
import * as path from 'node:path';
import { PileError } from './PileError';

export const LOCK_FILE_NAME = 'pile.lock';

/** Directories this process holds open for writing (a second openPile in-process is refused too). */
const heldHere = new Set<string>();

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * The single-writer lock of a pile directory: a file created exclusively that holds the
 * writer's pid. A lock whose pid is no longer alive was left by a crashed writer and is
 * taken over; the exclusive create makes two takers race safely (one wins, one is LOCKED).
 */
export class DirectoryLock {
  private constructor(private readonly dir: string, private readonly file: string) {}

  /**
   * @throws PILE_LOCKED when another live process or another open pile in this process holds it
   */
  static acquire(dir: string): DirectoryLock {
    const key = path.resolve(dir);
    const file = path.join(key, LOCK_FILE_NAME);
    if (heldHere.has(key)) throw new PileError('PILE_LOCKED', `pile ${dir} is already open for writing in this process`);
    for (let attempt = 0; attempt < 3; attempt++) {
      try {
        const fd = fs.openSync(file, 'wx');
        fs.writeSync(fd, String(process.pid));
        fs.closeSync(fd);
        heldHere.add(key);
        return new DirectoryLock(key, file);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EEXIST') {
          throw new PileError('PILE_LOCKED', `can not create lock file ${file}: ${(err as Error).message}`);
        }
      }
      let owner = NaN;
      let ageMs = Infinity;
      try {
        ageMs = Date.now() - fs.statSync(file).mtimeMs;
        owner = Number.parseInt(fs.readFileSync(file, 'utf8'), 10);
      } catch { /* removed meanwhile: retry */ }
      if (Number.isNaN(owner) && ageMs < 5000) {
        // Just created by a taker that has not written its pid yet.
        throw new PileError('PILE_LOCKED', `pile ${dir} is being opened for writing by another process (lock file ${file})`);
      }
      if (Number.isInteger(owner) && owner > 0 && owner !== process.pid && alive(owner)) {
        throw new PileError('PILE_LOCKED', `pile ${dir} is open for writing by process ${owner} (lock file ${file})`);
      }
      // Left by a dead process (or by an earlier life of this pid): take it over.
      try { fs.unlinkSync(file); } catch { /* another taker removed it first */ }
    }
    throw new PileError('PILE_LOCKED', `could not take the lock file ${file}`);
  }

  release(): void {
    heldHere.delete(this.dir);
    try { fs.unlinkSync(this.file); } catch { /* already gone: nothing to release */ }
  }
}
