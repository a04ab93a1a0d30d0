import * as fs from 'node:fs';
import * as path from 'node:path';
import { closeAndUnlinkQuietly, createExclusive, ioError, notRegular, unlinkQuietly } from './FileAccess';
import { PileError } from './PileError';

export const LOCK_FILE_NAME = 'pile.lock';
/** Prefix of the marks read-only opens leave in the directory: `pile.reader.<pid>.<start>.<random>`. */
const READER_PREFIX = 'pile.reader.';
/** When this process started (ms, rounded): the same in all its threads, different for an earlier life of its pid. */
const PROCESS_START = Math.round(Date.now() / 1000 - process.uptime());

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
  private constructor(
    private readonly dir: string,
    private readonly file: string,
  ) {}

  /**
   * @throws PILE_LOCKED when another live process or another open pile in this process holds it
   * @throws PILE_IO when the lock file can not be created (read-only file system, permissions, disk full)
   * @throws PILE_CORRUPT when the lock name holds a symbolic link, a directory or anything but a regular file
   */
  static acquire(dir: string): DirectoryLock {
    // The real path: a second open through a symlink or another spelling is the same pile, and
    // must not take over this process's own lock as if it were left by an earlier life of the pid.
    let key: string;
    try {
      key = fs.realpathSync(dir);
    } catch (err) {
      throw ioError(err, `can not resolve ${dir}`);
    }
    const file = path.join(key, LOCK_FILE_NAME);
    if (heldHere.has(key)) throw new PileError('PILE_LOCKED', `pile ${dir} is already open for writing in this process`);
    // A link or directory planted at the lock name is never followed nor taken for another
    // writer's lock (its target's content would be read as a pid).
    let planted: fs.Stats | undefined;
    try {
      planted = fs.lstatSync(file);
    } catch {
      /* no lock yet */
    }
    if (planted !== undefined && !planted.isFile()) throw notRegular(file, planted);
    for (let attempt = 0; attempt < 3; attempt++) {
      if (createWithPid(file)) {
        // Lock first, readers second (a reader marks first and looks for the lock second): of a
        // writer and a reader opening at once, at least one sees the other.
        const reader = liveReader(key);
        if (reader !== undefined) {
          unlinkQuietly(file);
          throw new PileError(
            'PILE_LOCKED',
            `pile ${dir} is open read-only by process ${reader}; a writer beside live readers is not supported yet (they could read torn or stale records): close them first`,
          );
        }
        heldHere.add(key);
        removeLeftovers(key);
        return new DirectoryLock(key, file);
      }
      let owner = NaN;
      let ageMs = Infinity;
      try {
        ageMs = Date.now() - fs.statSync(file).mtimeMs;
        owner = readPid(file);
      } catch {
        continue; /* removed meanwhile: retry */
      }
      if (Number.isNaN(owner) && ageMs < 5000) {
        // Only a writer on a file system without hard links creates the file before its pid is in it.
        throw new PileError('PILE_LOCKED', `pile ${dir} is being opened for writing by another process (lock file ${file})`);
      }
      if (Number.isInteger(owner) && owner > 0 && owner !== process.pid && alive(owner)) {
        throw new PileError('PILE_LOCKED', `pile ${dir} is open for writing by process ${owner} (lock file ${file})`);
      }
      // Left by a dead process (or by an earlier life of this pid): move it aside under a name of
      // our own, then check that what moved is the lock judged dead. A taker racing us may have
      // replaced it meanwhile; unlinking by name would have removed that live lock.
      const aside = `${file}.stale-${process.pid}`;
      try {
        fs.renameSync(file, aside);
      } catch {
        continue; /* another taker moved it first */
      }
      let moved = NaN;
      try {
        moved = readPid(aside);
      } catch {
        /* unreadable: treat as the dead lock */
      }
      if (moved !== owner && !(Number.isNaN(moved) && Number.isNaN(owner))) {
        try {
          fs.linkSync(aside, file);
        } catch {
          /* a third taker holds it now */
        }
        unlinkQuietly(aside);
        throw new PileError('PILE_LOCKED', `pile ${dir} was just taken by process ${moved} (lock file ${file})`);
      }
      unlinkQuietly(aside);
    }
    throw new PileError('PILE_LOCKED', `could not take the lock file ${file}`);
  }

  release(): void {
    heldHere.delete(this.dir);
    try {
      // Never remove a lock that is no longer ours (taken over after this process was thought dead).
      if (readPid(this.file) === process.pid) fs.unlinkSync(this.file);
    } catch {
      /* already gone: nothing to release */
    }
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

/**
 * Creates the lock file with this process's pid already in it: the pid goes to a private
 * file that is then hard-linked to the lock name, which fails if the lock exists. So a
 * writer killed at any point leaves either no lock or a lock naming it, never an empty one.
 * False when the lock exists.
 * @throws PILE_IO when the file can not be created at all (EACCES, EROFS, ENOSPC...), naming the errno
 */
function createWithPid(file: string): boolean {
  const tmp = `${file}.${process.pid}.tmp`;
  const pid = Buffer.from(String(process.pid));
  let fd: number | undefined;
  try {
    fd = createExclusive(tmp, true);
    const written = fs.writeSync(fd, pid);
    fs.closeSync(fd);
    fd = undefined;
    if (written !== pid.length) throw new Error(`short write to ${tmp}`);
    try {
      fs.linkSync(tmp, file);
      return true;
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'EEXIST') return false;
      if (code !== 'EPERM' && code !== 'ENOTSUP' && code !== 'EOPNOTSUPP' && code !== 'ENOSYS') throw err;
    }
  } catch (err) {
    throw ioError(err, `can not create lock file ${file}`);
  } finally {
    closeAndUnlinkQuietly(fd, tmp);
  }
  // No hard links on this file system: exclusive create, then the pid.
  let lock: number;
  try {
    lock = fs.openSync(file, fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_EXCL | fs.constants.O_NOFOLLOW, 0o644);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw ioError(err, `can not create lock file ${file}`);
  }
  try {
    if (fs.writeSync(lock, pid) !== pid.length) throw new Error(`short write to ${file}`);
  } catch (err) {
    unlinkQuietly(file);
    throw ioError(err, `can not write lock file ${file}`);
  } finally {
    fs.closeSync(lock);
  }
  return true;
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
