import * as fs from 'node:fs';
import { PileError } from '../PileError';

const { O_RDONLY, O_RDWR, O_CREAT, O_EXCL, O_NOFOLLOW } = fs.constants;

/**
 * Opens and creates the files of a pile directory without following symbolic links: a link
 * planted at a segment, meta, lock or temp name must not make the writer truncate or overwrite
 * the file it points at. New files are created exclusively (O_CREAT | O_EXCL | O_NOFOLLOW);
 * existing ones are opened with O_NOFOLLOW and must be regular files.
 */

/**
 * Creates `file` exclusively for reading and writing. A left-over regular file of that name is
 * replaced; with `temp` (a private temporary name), a symbolic link there is removed too (the
 * link, never its target); anything else is refused.
 * @throws PILE_CORRUPT when the name holds a link (not `temp`), a directory or another non-file
 * @throws PILE_IO when the system refuses (EACCES, EROFS, ENOSPC, ...), naming the errno
 */
export function createExclusive(file: string, temp = false): number {
  try {
    return fs.openSync(file, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW, 0o644);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw ioError(err, `can not create ${file}`);
  }
  // A regular file of that name is a left-over of a crash (a name, not data of another file:
  // unlinking a hard link removes only the name). A link or anything else is not ours to remove.
  const st = lstatOrUndefined(file);
  if (st !== undefined && !st.isFile() && !(temp && st.isSymbolicLink())) throw notRegular(file, st);
  try {
    if (st !== undefined) fs.unlinkSync(file);
    return fs.openSync(file, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW, 0o644);
  } catch (err) {
    throw ioError(err, `can not create ${file}`);
  }
}

/**
 * Opens an existing file of the pile; undefined when it does not exist (ENOENT).
 * @throws PILE_CORRUPT when the entry is a symbolic link or not a regular file
 * @throws PILE_IO when the system refuses (EACCES, EIO, ...), naming the errno
 */
export function openExisting(file: string, readonly: boolean): number | undefined {
  let fd: number;
  try {
    fd = fs.openSync(file, (readonly ? O_RDONLY : O_RDWR) | O_NOFOLLOW);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return undefined;
    if (code === 'ELOOP' || code === 'EISDIR') throw notRegular(file, fs.lstatSync(file));
    throw ioError(err, `can not open ${file}`);
  }
  let st: fs.Stats;
  try {
    st = fs.fstatSync(fd);
  } catch (err) {
    fs.closeSync(fd);
    throw ioError(err, `can not inspect ${file}`);
  }
  if (!st.isFile()) {
    fs.closeSync(fd);
    throw notRegular(file, st);
  }
  return fd;
}

/**
 * Removes `file`, ignoring any failure: for cleanup on a path that is already failing or racing
 * (the file never made, gone, or removed by another process), where the error that matters is
 * the one being reported, or none.
 */
export function unlinkQuietly(file: string): void {
  try {
    fs.unlinkSync(file);
  } catch {
    /* never made, or gone */
  }
}

/**
 * The cleanup of a file whose writing failed or is done with: closes `fd` (when given) and
 * removes `file`, ignoring what fails (the descriptor closed already, the file never made or gone).
 */
export function closeAndUnlinkQuietly(fd: number | undefined, file: string): void {
  if (fd !== undefined)
    try {
      fs.closeSync(fd);
    } catch {
      /* closed already */
    }
  unlinkQuietly(file);
}

function lstatOrUndefined(file: string): fs.Stats | undefined {
  try {
    return fs.lstatSync(file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw ioError(err, `can not inspect ${file}`);
  }
}

/** PILE_CORRUPT for a pile file's name that holds a symbolic link, a directory or anything but a regular file. */
export function notRegular(file: string, st: fs.Stats): PileError {
  const what = st.isSymbolicLink() ? 'a symbolic link' : st.isDirectory() ? 'a directory' : 'not a regular file';
  return new PileError('PILE_CORRUPT', `${file} is ${what}; a pile's files must be regular files (a planted link is never followed)`);
}

/** A PILE_IO error for a failed system call, naming its errno (EACCES, EROFS, ENOSPC, EIO...). */
export function ioError(err: unknown, what: string): PileError {
  if (err instanceof PileError) return err;
  const e = err as NodeJS.ErrnoException;
  return new PileError('PILE_IO', `${what}: ${e.code ?? 'error'} (${e.message})`);
}
