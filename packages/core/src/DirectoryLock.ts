import * as fs from 'node:fs';
import * as path from 'node:path';
import { createExclusive, ioError, notRegular, unlinkQuietly } from './FileAccess';
import { COORD_FILE_NAME, CoordFile } from './CoordFile';
import { PileError } from './PileError';

export const LOCK_FILE_NAME = 'pile.lock';
/** Prefix of the marks read-only opens leave in the directory: `pile.reader.<pid>.<start>.<random>`. */
const READER_PREFIX = 'pile.reader.';
/** When this process started (ms, rounded): the same in all its threads, different for an earlier life of its pid. */
const PROCESS_START = Math.round(Date.now() / 1000 - process.uptime());

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
 * - a directory that a live read-only open has (see {@link ReaderMark}), checked by
 *   {@link DirectoryLock.refuseReaders} once this open is counted among the writers.
 * A `pile.lock` left by a dead process is removed.
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

  /**
   * Refuses a live read-only open. Called once this open holds its writer byte lock of pile.coord
   * (a reader marks first and looks for writers second): of a writer and a reader opening at once,
   * at least one sees the other.
   * @throws PILE_LOCKED naming the reader's pid
   */
  refuseReaders(): void {
    const reader = liveReader(this.dir);
    if (reader !== undefined) {
      throw new PileError(
        'PILE_LOCKED',
        `pile ${this.dir} is open read-only by process ${reader}; a writer beside live readers is not supported yet (they could read torn or stale records): close them first`,
      );
    }
  }

  release(): void {
    heldHere.delete(this.dir);
  }
}

/**
 * What a read-only open leaves in the directory while it is open, so that a writer does not open
 * beside it (and it does not open beside a writer): until the multi-process support lands, a
 * reader beside a live writer could read a record while it is written, or keep a segment the
 * writer released. Marks of dead processes are ignored and removed.
 */
export class ReaderMark {
  private constructor(private readonly file: string | undefined) {}

  /**
   * Marks `dir` as read by this process, then checks that no live writer holds it. In a directory
   * this process may not write, no mark can be left; then no writer of this user can open either.
   * @throws PILE_LOCKED naming the writer's pid when a live process has the pile open for writing
   */
  static acquire(dir: string): ReaderMark {
    // No thread id: loading worker_threads only for it would cost every read-only process.
    let file: string | undefined = path.join(
      dir,
      `${READER_PREFIX}${process.pid}.${PROCESS_START}.${Math.random().toString(36).slice(2, 10)}`,
    );
    try {
      fs.closeSync(createExclusive(file, true));
    } catch {
      file = undefined;
    }
    const mark = new ReaderMark(file);
    const lock = path.join(dir, LOCK_FILE_NAME);
    let owner = NaN;
    try {
      owner = readPid(lock);
    } catch {
      /* no lock: no writer */
    }
    if (Number.isInteger(owner) && owner > 0 && alive(owner)) {
      mark.release();
      throw new PileError(
        'PILE_LOCKED',
        `pile ${dir} is open for writing by process ${owner} (lock file ${lock}); a read-only open beside a live writer is not supported yet (it could read torn or stale records): close the writer first`,
      );
    }
    if (CoordFile.writersLive(dir)) {
      mark.release();
      throw new PileError(
        'PILE_LOCKED',
        `pile ${dir} is open for writing by a live process (${path.join(dir, COORD_FILE_NAME)}); a read-only open beside a live writer is not supported yet (it could read torn or stale records): close the writers first`,
      );
    }
    return mark;
  }

  release(): void {
    if (this.file !== undefined) unlinkQuietly(this.file);
  }
}

/** The pid of a live read-only open of `dir`, or undefined; removes the marks of dead ones. */
function liveReader(dir: string): number | undefined {
  let names: string[];
  try {
    names = fs.readdirSync(dir);
  } catch {
    return undefined;
  }
  for (const name of names) {
    if (!name.startsWith(READER_PREFIX)) continue;
    const [pid, start] = name.slice(READER_PREFIX.length).split('.').map(Number);
    if (pid === undefined || !Number.isInteger(pid)) continue;
    const live = pid === process.pid ? Math.abs((start ?? 0) - PROCESS_START) <= 2 : alive(pid);
    if (live) return pid;
    unlinkQuietly(path.join(dir, name));
  }
  return undefined;
}

function readPid(file: string): number {
  return Number.parseInt(fs.readFileSync(file, 'utf8'), 10);
}

/** Private files of lock takers that died between creating and removing them. */
function removeLeftovers(dir: string): void {
  let names: string[];
  try {
    names = fs.readdirSync(dir);
  } catch {
    return;
  }
  for (const name of names) {
    const m = /^pile\.lock\.(?:(\d+)\.tmp|stale-(\d+))$/.exec(name);
    if (m === null) continue;
    const pid = Number(m[1] ?? m[2]);
    if (pid !== process.pid && !alive(pid)) {
      unlinkQuietly(path.join(dir, name));
    }
  }
}
