import * as fs from 'node:fs';
import { openPile, isPileError, type Pile } from '@pile/core';
import { CliError, EXIT_CANNOT_OPEN } from './CliError';
import { Progress } from './Progress';

/** How a command opens the pile it works on. */
export interface OpenOptions {
  /**
   * Map read-only: never changes a pile file; opens beside live writers of this build (refused,
   * PILE_LOCKED, only beside a writer of an older single-writer build, its `pile.lock`).
   */
  readonly: boolean;
}

/**
 * Opens an existing pile for a command, never creating one, and turns every reason it can not
 * be opened into a {@link CliError} with exit code 2 whose message says what is wrong with `dir`.
 * @throws CliError (exit code 2) for a missing directory, a directory that is not a pile,
 *   a pile locked by another writer, a damaged pile or one written by a newer format
 */
export function openExistingPile(dir: string, options: OpenOptions): Pile {
  let st: fs.Stats;
  try {
    st = fs.statSync(dir);
  } catch {
    throw new CliError(`${dir}: no such directory`, EXIT_CANNOT_OPEN);
  }
  if (!st.isDirectory()) throw new CliError(`${dir} is not a directory`, EXIT_CANNOT_OPEN);
  // A long open (recovery after a crash) shows a progress bar on a terminal.
  const bar = new Progress('recovering', 'items');
  try {
    return openPile({ dir, readonly: options.readonly, create: false, onProgress: (p) => bar.update(p.done, p.total) });
  } catch (err) {
    if (!isPileError(err)) throw err;
    switch (err.code) {
      case 'PILE_LOCKED':
        throw new CliError(
          `${dir} is locked: ${err.message}` +
            (options.readonly ? '' : '; stop the writer first, or use --readonly where the command offers it'),
          EXIT_CANNOT_OPEN,
        );
      case 'PILE_INVALID_OPTION':
        if (/is not a pile/.test(err.message)) throw new CliError(`${dir} is not a pile (it holds no pile.meta)`, EXIT_CANNOT_OPEN);
        throw new CliError(`can not open ${dir}: ${err.message}`, EXIT_CANNOT_OPEN);
      case 'PILE_CORRUPT':
        throw new CliError(`${dir} is damaged and can not be opened: ${err.message}`, EXIT_CANNOT_OPEN);
      case 'PILE_FORMAT_VERSION':
        throw new CliError(`${dir} was written by a newer version of Pile: ${err.message}`, EXIT_CANNOT_OPEN);
      default:
        throw new CliError(`can not open ${dir}: ${err.message}`, EXIT_CANNOT_OPEN);
    }
  } finally {
    bar.stop();
  }
}
