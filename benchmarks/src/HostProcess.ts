import { fork, type ChildProcess } from 'node:child_process';

/** A request to a host process: `{ id, op, ...args }`, answered by `{ id, result }` or `{ id, error }`. */
export interface HostRequest {
  id: number;
  op: string;
}

/**
 * A sync host in a child process (the `sync` benchmark's SyncHost and the @pile/sync tests'
 * fixture), driven over IPC: the child answers each request with {@link serveHost}, and id 0
 * once it runs.
 */
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
    this.exited = new Promise((resolve) =>
      proc.once('exit', () => {
        for (const w of this.waiting.values()) w.reject(new Error('host process exited'));
        this.waiting.clear();
        resolve();
      }),
    );
  }

  /** Forks `script` with `args`; resolves once it runs (not necessarily caught up). */
  static async start(
    script: string,
    args: string[],
    options: { execArgv?: string[]; env?: Record<string, string> } = {},
  ): Promise<HostProcess> {
    const proc = fork(script, args, {
      execArgv: options.execArgv ?? [],
      env: { ...process.env, ...options.env },
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

  /** Clean close (the host's 'close' op), or SIGKILL after 10 s. */
  async close(): Promise<void> {
    if (this.proc.exitCode !== null || this.proc.signalCode !== null) return;
    const t = setTimeout(() => this.proc.kill('SIGKILL'), 10_000);
    await this.request('close').catch(() => undefined);
    await this.exited;
    clearTimeout(t);
  }
}

/** What the child's common ops use of its synced cache. */
export interface ServedCache {
  synced: { readonly ready: Promise<void>; readonly stats: { outbox: number }; close(): Promise<void> };
  cache: { close(): void };
}

/**
 * The child's side: answers each request with `handle`'s result or error, then says it runs.
 * The ops every host has are answered here when `handle` does not know the op (returns undefined):
 * 'ready' (caught up), 'drain' (outbox published), 'close' (clean close, then exit).
 */
export function serveHost<M extends HostRequest>(host: ServedCache, handle: (m: M) => Promise<unknown>): void {
  const common = async (m: M): Promise<unknown> => {
    const r = await handle(m);
    if (r !== undefined) return r;
    switch (m.op) {
      case 'ready':
        await host.synced.ready;
        return true;
      case 'drain':
        while (host.synced.stats.outbox > 0) await new Promise((r) => setTimeout(r, 2));
        return true;
      case 'close':
        await host.synced.close();
        host.cache.close();
        setImmediate(() => process.exit(0));
        return true;
      default:
        throw new Error(`unknown op ${m.op}`);
    }
  };
  process.on('message', (m: M) => {
    common(m).then(
      (result) => process.send!({ id: m.id, result }),
      (err: unknown) => process.send!({ id: m.id, error: String((err as Error).stack ?? err) }),
    );
  });
  process.send!({ id: 0, result: 'started' });
}
