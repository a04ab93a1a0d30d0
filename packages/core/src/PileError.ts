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
  | 'PILE_REENTRANT'
  | 'PILE_IO';

/** The one error class of Pile; `code` says what went wrong, the message names the option, file or offset at fault. */
export class PileError extends Error {
  override readonly name = 'PileError';
  constructor(
    readonly code: PileErrorCode,
    message: string,
  ) {
    super(`${code}: ${message}`);
  }
}

/** True when `err` is a {@link PileError}, optionally with the given code. */
export function isPileError(err: unknown, code?: PileErrorCode): err is PileError {
  return err instanceof PileError && (code === undefined || err.code === code);
}
