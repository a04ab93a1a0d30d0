import { spawn, type ChildProcess, type StdioOptions } from 'node:child_process';
import * as path from 'node:path';

/** The built package, as a child process requires it (the tests run after `tsc -b`). */
export const NATIVE = JSON.stringify(path.join(__dirname, '..', 'dist', 'index.js'));

/** A child process running a script, whose stdout lines the test can wait for. */
export class Child {
  readonly proc: ChildProcess;
  private out = '';
  private err = '';
  private readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;

  constructor(script: string, stdio: StdioOptions = ['ignore', 'pipe', 'pipe']) {
    this.proc = spawn(process.execPath, ['-e', script], { stdio });
    this.proc.stdout!.setEncoding('utf8').on('data', (d: string) => {
      this.out += d;
    });
    this.proc.stderr!.setEncoding('utf8').on('data', (d: string) => {
      this.err += d;
    });
    this.exited = new Promise((resolve) => this.proc.on('exit', (code, signal) => resolve({ code, signal })));
  }

  /** Resolves once stdout has a line `line`; rejects when the child exits first or after `ms`. */
  async line(line: string, ms = 60_000): Promise<void> {
    const deadline = Date.now() + ms;
    while (!this.out.split('\n').includes(line)) {
      if (this.proc.exitCode !== null || this.proc.signalCode !== null) throw new Error(`child exited before '${line}': ${this.err}`);
      if (Date.now() > deadline) throw new Error(`no '${line}' from the child in ${ms} ms: ${this.out} ${this.err}`);
      await new Promise((r) => setTimeout(r, 5));
    }
  }

  /** Everything the child wrote to stdout once it exits; rejects on a failed exit. */
  async done(): Promise<string> {
    const { code, signal } = await this.exited;
    if (code !== 0) throw new Error(`child exited with ${code ?? signal}: ${this.err}`);
    return this.out;
  }

  /** SIGKILL, resolved once the child is gone. */
  async kill(): Promise<void> {
    if (this.proc.exitCode === null && this.proc.signalCode === null) this.proc.kill('SIGKILL');
    await this.exited;
  }
}
