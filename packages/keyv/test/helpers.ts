import { spawn, spawnSync, type SpawnSyncReturns } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

/** A fresh temporary directory, removed by the returned cleanup. */
export function tempDir(): { dir: string; cleanup: () => void } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pile-keyv-'));
  return { dir, cleanup: () => fs.rmSync(dir, { recursive: true, force: true }) };
}

const NODE_ARGS = ['-r', 'ts-node/register/transpile-only'];

/** Runs a fixture (test/fixtures/<name>.ts) in a child process and waits for it. */
export function runFixture(name: string, args: string[]): SpawnSyncReturns<string> {
  return spawnSync(process.execPath, [...NODE_ARGS, path.join(__dirname, 'fixtures', `${name}.ts`), ...args], {
    encoding: 'utf8',
    cwd: path.join(__dirname, '..', '..', '..'),
    timeout: 60_000,
  });
}

/** Runs a fixture in a child process without waiting; resolves with its exit code, signal and output. */
export function startFixture(name: string, args: string[]): Promise<{ code: number | null; signal: NodeJS.Signals | null; out: string }> {
  const child = spawn(process.execPath, [...NODE_ARGS, path.join(__dirname, 'fixtures', `${name}.ts`), ...args], {
    cwd: path.join(__dirname, '..', '..', '..'),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (out += d.toString()));
  return new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal, out })));
}
