import { fork, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { findRedisServer, RedisServer } from '../../../benchmarks/src/RedisServer';

export { RedisServer };

/**
 * A redis-server from PATH on a free loopback port, persistence off. Without one the suite fails
 * (it never skips): CI installs it (.ci/run).
 */
export async function startRedis(): Promise<RedisServer> {
  const bin = findRedisServer();
  if (bin === undefined) {
    throw new Error('redis-server is not on PATH: the @pile/sync tests need a real Redis (apt-get install -y redis-server); they are not skipped');
  }
  return RedisServer.start(bin);
}

/** A fresh temp dir, removed by the returned cleanup. */
export function tempDir(): { dir: string; cleanup: () => void } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pile-sync-'));
  return { dir, cleanup: () => fs.rmSync(dir, { recursive: true, force: true }) };
}

/** Polls `cond` every 2 ms until true or `ms` passed; false on timeout. */
export async function until(cond: () => boolean, ms = 5000): Promise<boolean> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) return false;
    await new Promise((r) => setTimeout(r, 2));
  }
  return true;
}

/** A sync host in a child process (test/fixtures/host.ts), driven over IPC. */
export class HostProcess {
  private nextId = 1;
  private readonly waiting = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  private readonly exited: Promise<void>;

  private constructor(readonly proc: ChildProcess) {
    proc.on('message', (m: { id: number; result?: unknown; error?: string }) => {
      const w = this.waiting.get(m.id);
      if (w === undefined) return;
      this.waiting.delete(m.id);
      if (m.error !== undefined) w.reject(new Error(m.error));
      else w.resolve(m.result);
    });
    this.exited = new Promise((resolve) => proc.once('exit', () => {
      for (const w of this.waiting.values()) w.reject(new Error('host process exited'));
      this.waiting.clear();
      resolve();
    }));
  }

  /** Starts a host on `dir` following Redis at `url`; resolves once it runs (not necessarily caught up). */
  static async start(dir: string, url: string, maxLag = 1000, env: Record<string, string> = {}): Promise<HostProcess> {
    const proc = fork(path.join(__dirname, 'fixtures', 'host.ts'), [dir, url, String(maxLag)], {
      execArgv: ['-r', 'ts-node/register/transpile-only'],
      env: { ...process.env, ...env },
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    const h = new HostProcess(proc);
    await new Promise<void>((resolve, reject) => {
      h.waiting.set(0, { resolve: () => resolve(), reject });
    });
    return h;
  }

  request<T = unknown>(op: string, args: Record<string, unknown> = {}): Promise<T> {
    const id = this.nextId++;
    return new Promise<T>((resolve, reject) => {
      this.waiting.set(id, { resolve: resolve as (v: unknown) => void, reject });
      this.proc.send({ id, op, ...args });
    });
  }

  /** SIGKILL, and wait for the exit. */
  async kill(): Promise<void> {
    if (this.proc.exitCode === null && this.proc.signalCode === null) this.proc.kill('SIGKILL');
    await this.exited;
  }

  /** Clean close (publishes the outbox, closes the cache), or SIGKILL after 10 s. */
  async close(): Promise<void> {
    if (this.proc.exitCode !== null || this.proc.signalCode !== null) return;
    const t = setTimeout(() => this.proc.kill('SIGKILL'), 10_000);
    await this.request('close').catch(() => undefined);
    await this.exited;
    clearTimeout(t);
  }
}

/** The redis-server binary, or a plain failure saying it is missing. */
export function findRedisServerOrFail(): string {
  const bin = findRedisServer();
  if (bin === undefined) throw new Error('redis-server is not on PATH: the @pile/sync tests need a real Redis (apt-get install -y redis-server); they are not skipped');
  return bin;
}
