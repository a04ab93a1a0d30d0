import { spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as path from 'node:path';
import type { Params, PeerResult, RunContext } from './Workload';

/** The redis-server binary on the PATH, or undefined. */
export function findRedisServer(): string | undefined {
  for (const dir of (process.env['PATH'] ?? '').split(path.delimiter)) {
    if (dir === '') continue;
    const file = path.join(dir, 'redis-server');
    try {
      fs.accessSync(file, fs.constants.X_OK);
      return file;
    } catch {
      // not in this directory
    }
  }
  return undefined;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      srv.close(() => (addr !== null && typeof addr === 'object' ? resolve(addr.port) : reject(new Error('no port'))));
    });
  });
}

function canConnect(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect(port, '127.0.0.1');
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}

/** A redis-server on a free loopback port, without persistence, owned by this run. */
export class RedisServer {
  private constructor(
    private readonly proc: ChildProcess,
    readonly port: number,
  ) {}

  /** Starts one on `port`, or on a free port. */
  static async start(binary: string, port?: number): Promise<RedisServer> {
    port ??= await freePort();
    const proc = spawn(
      binary,
      ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--daemonize', 'no', '--loglevel', 'warning'],
      {
        stdio: ['ignore', 'ignore', 'inherit'],
      },
    );
    const server = new RedisServer(proc, port);
    for (let i = 0; i < 100; i++) {
      if (proc.exitCode !== null) throw new Error(`redis-server exited with status ${proc.exitCode} before accepting connections`);
      if (await canConnect(port)) return server;
      await new Promise((r) => setTimeout(r, 50));
    }
    await server.stop();
    throw new Error(`redis-server did not accept connections on port ${port} within 5 s`);
  }

  /** Sends `signal` (SIGSTOP / SIGCONT to pause and resume it, SIGKILL to lose its data). */
  signal(signal: NodeJS.Signals): void {
    this.proc.kill(signal);
  }

  async stop(): Promise<void> {
    if (this.proc.exitCode !== null || this.proc.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => this.proc.once('exit', () => resolve()));
    this.proc.kill('SIGCONT');
    this.proc.kill('SIGTERM');
    await exited;
  }
}

/**
 * Runs `peer` in a child with a redis-server of its own on a free loopback port (`params.redisPort`),
 * or reports the peer skipped when there is no redis-server binary or it does not start.
 */
export async function childWithRedis(ctx: RunContext, peer: string, label: string, params: Params): Promise<PeerResult> {
  const binary = findRedisServer();
  if (binary === undefined) {
    ctx.log(`${peer.padEnd(22)} skipped: no redis-server binary on the PATH`);
    return { peer, label, figures: {}, skipped: 'no redis-server binary on the PATH' };
  }
  let server: RedisServer;
  try {
    server = await RedisServer.start(binary);
  } catch (err) {
    return { peer, label, figures: {}, skipped: `redis-server did not start: ${err instanceof Error ? err.message : String(err)}` };
  }
  try {
    return ctx.child(peer, { ...params, redisPort: server.port });
  } finally {
    await server.stop();
  }
}
