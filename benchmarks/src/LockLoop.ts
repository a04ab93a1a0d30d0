/**
 * The timed loops of the `multiprocess` workload, shared by the measuring child and the second
 * process it starts (MultiprocessContender). Each one waits for the start word, so that both
 * processes run their loops together.
 */
import { native, type Futex, type SharedMapping, type SharedMutex } from '@pile/native';

/** Word offsets (Int32Array indexes) and byte offsets in the workload's coordination file. */
export const LAYOUT = { start: 0, ready: 1, turn: 2, counter: 3, spin: 4, mutexByte: 64, size: 65536 } as const;

export interface Coordination {
  mapping: SharedMapping;
  words: Int32Array;
  mutex: SharedMutex;
  startFutex: Futex;
  turnFutex: Futex;
}

/** The coordination file mapped as a SharedArrayBuffer, with its mutex and futexes. */
export function openCoordination(fd: number, file: string): Coordination {
  const mapping = new native.SharedMapping(fd, LAYOUT.size, 0, file);
  return {
    mapping,
    words: new Int32Array(mapping.buffer),
    mutex: new native.SharedMutex(mapping, LAYOUT.mutexByte),
    startFutex: new native.Futex(mapping, LAYOUT.start * 4),
    turnFutex: new native.Futex(mapping, LAYOUT.turn * 4),
  };
}

/** Says this process is ready, then sleeps on the futex until the start word is set. */
export function awaitStart(c: Coordination): void {
  Atomics.add(c.words, LAYOUT.ready, 1);
  while (Atomics.load(c.words, LAYOUT.start) === 0) c.startFutex.wait(0, 60_000);
}

/** `ops` lock + increment + unlock; the milliseconds taken. */
export function lockLoop(c: Coordination, ops: number): number {
  const { mutex, words } = c;
  const t = performance.now();
  for (let i = 0; i < ops; i++) {
    if (mutex.lock() !== native.MUTEX.LOCKED) throw new Error('multiprocess: the mutex reported a dead owner');
    // A plain (non-atomic) read-modify-write: the total proves the mutex excluded the other process.
    words[LAYOUT.counter] = words[LAYOUT.counter]! + 1;
    mutex.unlock();
  }
  return performance.now() - t;
}

/**
 * `rounds` futex ping-pongs: this side (`me` 0 or 1) waits until the turn word is `me`, passes it
 * to the other with a store and a wake. The milliseconds taken.
 */
export function pingPong(c: Coordination, me: 0 | 1, rounds: number): number {
  const { words, turnFutex } = c;
  const t = performance.now();
  for (let i = 0; i < rounds; i++) {
    for (;;) {
      const turn = Atomics.load(words, LAYOUT.turn);
      if (turn === me) break;
      turnFutex.wait(turn, 60_000);
    }
    Atomics.store(words, LAYOUT.turn, 1 - me);
    turnFutex.wake(1);
  }
  return performance.now() - t;
}
