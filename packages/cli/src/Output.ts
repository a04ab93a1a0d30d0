import { once } from 'node:events';

let pending = '';
const FLUSH_AT = 64 * 1024;

/**
 * Appends text to stdout through a 64 KiB buffer and waits for 'drain' when the pipe is full,
 * so a large export or dump never piles up in memory. Call {@link flushOut} at the end.
 */
export async function writeOut(text: string): Promise<void> {
  pending += text;
  if (pending.length < FLUSH_AT) return;
  await flushOut();
}

/** Writes what {@link writeOut} buffered and waits until stdout takes more. */
export async function flushOut(): Promise<void> {
  if (pending.length === 0) return;
  const chunk = pending;
  pending = '';
  if (!process.stdout.write(chunk)) await once(process.stdout, 'drain');
}
