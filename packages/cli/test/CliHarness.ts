import { execFileSync, spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

export const REPO = path.resolve(__dirname, '../../..');
export const MAIN = path.join(REPO, 'packages/cli/dist/main.js');

let built = false;

/** Builds the CLI (and what it references) once per test run: the tests run the real `pile` binary. */
export function buildCli(): void {
  if (built) return;
  execFileSync(process.execPath, [path.join(REPO, 'node_modules/typescript/bin/tsc'), '-b', 'packages/cli'], {
    cwd: REPO,
    stdio: 'inherit',
  });
  built = true;
}

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs `pile ...args` in a child process; `stdinFile` is opened as its stdin (a file, as a shell `<`
 * would give). `cwd` is where it runs; `command` replaces `node main.js` (e.g. with pnpm).
 */
export function runCli(
  args: string[],
  opts: { stdinFile?: string; stdin?: string; nodeArgs?: string[]; cwd?: string; env?: NodeJS.ProcessEnv; command?: string[] } = {},
): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    let stdio: ('pipe' | number)[] = ['pipe', 'pipe', 'pipe'];
    let fd: number | undefined;
    if (opts.stdinFile !== undefined) {
      fd = fs.openSync(opts.stdinFile, 'r');
      stdio = [fd, 'pipe', 'pipe'];
    }
    const [cmd, ...pre] = opts.command ?? [process.execPath, ...(opts.nodeArgs ?? []), MAIN];
    const child = spawn(cmd!, [...pre, ...args], { stdio: stdio as never, cwd: opts.cwd, env: opts.env ?? process.env });
    if (fd !== undefined) fs.closeSync(fd);
    let stdout = '';
    let stderr = '';
    child.stdout!.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr!.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    if (opts.stdinFile === undefined) child.stdin!.end(opts.stdin ?? '');
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/** A fresh temp directory; the returned function removes it. */
export function tempDir(prefix: string): { dir: string; remove: () => void } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `pile-cli-${prefix}-`));
  return { dir, remove: () => fs.rmSync(dir, { recursive: true, force: true }) };
}

/**
 * The hooks of a suite that runs the CLI on files: builds it once, and gives each test a fresh temp
 * directory (as `holder.dir`, prefix `prefix`), removed after the test. Call it in the describe's body.
 */
export function cliSuite(prefix: string): { readonly dir: string } {
  const holder = { dir: '' };
  let current: ReturnType<typeof tempDir> | undefined;
  before(buildCli);
  beforeEach(() => {
    current = tempDir(prefix);
    holder.dir = current.dir;
  });
  afterEach(() => current!.remove());
  return holder;
}
