/**
 * Every failure Pile raises carries one of these codes. They are part of the public
 * contract: `docs/errors.md` lists when each is raised.
 */
export type PileErrorCode =
  | 'PILE_INVALID_POINTER'
  | 'PILE_STALE_POINTER'
  | 'PILE_OUT_OF_SPACE'
  | 'PILE_TOO_LARGE'
  | 'PILE_CLOSED'
  | 'PILE_READONLY'
  | 'PILE_LOCKED'
  | 'PILE_CORRUPT'
  | 'PILE_FORMAT_VERSION'
  | 'PILE_SCHEMA_MISMATCH'
  | 'PILE_SCHEMA_VIOLATION'
  | 'PILE_INVALID_OPTION'
  | 'PILE_INVALID_VALUE'
  | 'PILE_REENTRANT'
  | 'PILE_IO'
  | 'PILE_UNAVAILABLE';

/**
 * The one error class of Pile; `code` says what went wrong, the message names the option, path,
 * file or offset at fault. The message does not repeat the code: `String(err)` and the first line
 * of `err.stack` show both, as Node's own errors do (`PileError [PILE_CLOSED]: the pile is closed`).
 */
export class PileError extends Error {
  override readonly name = 'PileError';
  constructor(
    readonly code: PileErrorCode,
    message: string,
  ) {
    super(message);
    // The stack's first line names the class and the message; add the code, as toString() does.
    if (typeof this.stack === 'string') {
      const head = `${this.name}: ${message}`;
      if (this.stack.startsWith(head)) this.stack = `${this.toString()}${this.stack.slice(head.length)}`;
    }
  }

  /** `PileError [CODE]: message`. */
  override toString(): string {
    return `${this.name} [${this.code}]: ${this.message}`;
  }
}

/** True when `err` is a {@link PileError}, optionally with the given code. */
export function isPileError(err: unknown, code?: PileErrorCode): err is PileError {
  return err instanceof PileError && (code === undefined || err.code === code);
}
