#!/usr/bin/env node
import { isPileError } from '@pile/core';
import { CliError, EXIT_FAILED } from './CliError';
import { buildProgram } from './Program';

// A closed pipe (`pile dump dir | head`) ends the output, not in an error.
process.stdout.on('error', (err: NodeJS.ErrnoException) => {
  if (err.code === 'EPIPE') process.exit(0);
  throw err;
});

// `pnpm pile ...` runs the workspace's script from the workspace root; relative paths are the
// caller's, so resolve them from where pnpm was started (it passes that as INIT_CWD).
if (process.env['npm_lifecycle_event'] === 'pile' && process.env['npm_package_name'] === 'pile-workspace' && process.env['INIT_CWD']) {
  process.chdir(process.env['INIT_CWD']);
}

buildProgram()
  .parseAsync(process.argv)
  .catch((err: unknown) => {
    if (err instanceof CliError) {
      process.stderr.write(`pile: ${err.message}\n`);
      process.exitCode = err.exitCode;
    } else if (isPileError(err)) {
      // The message names what is at fault; the code is said before it.
      process.stderr.write(`pile: ${err.code}: ${err.message}\n`);
      process.exitCode = EXIT_FAILED;
    } else {
      process.stderr.write(`pile: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
      process.exitCode = EXIT_FAILED;
    }
  });
