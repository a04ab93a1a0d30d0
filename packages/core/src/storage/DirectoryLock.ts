import * as fs from 'node:fs';
import * as path from 'node:path';
import { ioError, notRegular, unlinkQuietly } from './FileAccess';
import { PileError } from '../PileError';

export const LOCK_FILE_NAME = 'pile.lock';

/** Directories this thread holds open for writing (a second openPile in the same thread is refused). */
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
 * What a read-write open of a pile directory checks and holds in this process. Several processes
 * may have a pile open for writing (they take turns through the writer mutex of pile.coord,
 * docs/concurrency.md), so this is no longer an exclusive lock of the directory; it refuses:
 * - a second read-write open of the same directory by this thread (its pile objects would wait on
 *   each other's turn);
 * - a directory whose `pile.lock` names a live process: a build of Pile that admits one writing
 *   process (before pile.coord) holds it, and knows nothing of the turn;
 * Read-only opens may be open beside it (their reads are checked). A `pile.lock` left by a dead
 * process is removed.
 */
export class DirectoryLock {
  private constructor(private readonly dir: string) {}

  /**
   * @throws PILE_LOCKED when this thread has the directory open for writing already, or a live
   *   process of a single-writer build holds its `pile.lock` (named with its pid)
   * @throws PILE_IO when the directory can not be resolved
   * @throws PILE_CORRUPT when the lock name holds a symbolic link, a directory or anything but a regular file
   */
  static acquire(dir: string): DirectoryLock {
    // The real path: a second open through a symlink or another spelling is the same pile.
    let key: string;
    try {
      key = fs.realpathSync(dir);
    } catch (err) {
      throw ioError(err, `can not resolve ${dir}`);
    }
    const file = path.join(key, LOCK_FILE_NAME);
    if (heldHere.has(key)) throw new PileError('PILE_LOCKED', `pile ${dir} is already open for writing in this thread`);
    // A link or directory planted at the lock name is never followed nor taken for a writer's lock.
    let planted: fs.Stats | undefined;
    try {
      planted = fs.lstatSync(file);
    } catch {
      /* no lock: no writer of an older build */
    }
    if (planted !== undefined && !planted.isFile()) throw notRegular(file, planted);
    if (planted !== undefined) {
      let owner = NaN;
      try {
        owner = readPid(file);
      } catch {
        /* removed meanwhile */
      }
      if (Number.isInteger(owner) && owner > 0 && owner !== process.pid && alive(owner)) {
        throw new PileError(
          'PILE_LOCKED',
          `pile ${dir} is open for writing by process ${owner} (lock file ${file}), a build of Pile that admits one writing process: close it first`,
        );
      }
      unlinkQuietly(file);
    }
    removeLeftovers(key);
    heldHere.add(key);
    return new DirectoryLock(key);
  }

  release(): void {
    heldHere.delete(this.dir);
  }
}

/**
 * What a read-only open checks: a read-only open goes beside live writers of this build (its reads
 * are checked, docs/concurrency.md), but not beside a live writer of an older single-writer build
 * (its `pile.lock` names a live process), which marks none of its changes. It leaves nothing in the
 * directory (builds before readers beside writers left a `pile.reader.*` mark, which a writer's
 * open removes once its process is dead).
 */
export class ReaderMark {
  private constructor() {}

  /**
   * @throws PILE_LOCKED naming the writer's pid when a live writer of an older single-writer build holds the pile
   */
  static acquire(dir: string): ReaderMark {
    const lock = path.join(dir, LOCK_FILE_NAME);
    let owner = NaN;
    try {
      owner = readPid(lock);
    } catch {
      /* no lock: no writer of an older build */
    }
    if (Number.isInteger(owner) && owner > 0 && alive(owner)) {
      throw new PileError(
        'PILE_LOCKED',
        `pile ${dir} is open for writing by process ${owner} (lock file ${lock}), a build of Pile that admits one writing process and does not mark its changes for readers: close it first`,
      );
    }
    return new ReaderMark();
  }

  release(): void {
    /* nothing held */
  }
}

function readPid(file: string): number {
  return Number.parseInt(fs.readFileSync(file, 'utf8'), 10);
}

/**
 * Private files of lock takers that died between creating and removing them, and the
 * `pile.reader.<pid>.*` marks of read-only opens of older builds whose process is dead.
 */
function removeLeftovers(dir: string): void {
  let names: string[];
  try {
    names = fs.readdirSync(dir);
  } catch {
    return;
  }
  for (const name of names) {
    const m = /^pile\.lock\.(?:(\d+)\.tmp|stale-(\d+))$/.exec(name) ?? /^pile\.reader\.(\d+)\./.exec(name);
    if (m === null) continue;
    const pid = Number(m[1] ?? m[2]);
    if (pid !== process.pid && !alive(pid)) {
      unlinkQuietly(path.join(dir, name));
    }
  }
}
