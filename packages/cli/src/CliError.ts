/** Exit code of a command that succeeded. */
export const EXIT_OK = 0;
/** Exit code when the command ran but found a problem: damage (verify), malformed input (import), a missing table. */
export const EXIT_FAILED = 1;
/** Exit code when the pile could not be opened: missing directory, not a pile, locked, damaged or newer format. */
export const EXIT_CANNOT_OPEN = 2;

/**
 * A failure the `pile` command reports as `pile: <message>` on stderr before exiting with `exitCode`.
 */
export class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode: number = EXIT_FAILED,
  ) {
    super(message);
    this.name = 'CliError';
  }
}
