import { SingleBar, Presets } from 'cli-progress';

/** Builds below this many records finish too fast to deserve a progress line. */
const MIN_TOTAL = 200_000;
/** Callers update every STEP records (a power of two, so `(i & STEP_MASK) === 0` is the test). */
export const STEP_MASK = 0xffff;

/**
 * A progress line on stderr for long builds; silent when stderr is not a terminal (CI logs)
 * or the build is short. Timing loops call `update` only every STEP_MASK + 1 records.
 */
export class Progress {
  private readonly bar: SingleBar | undefined;

  constructor(label: string, total: number) {
    if (total >= MIN_TOTAL && process.stderr.isTTY === true) {
      this.bar = new SingleBar(
        {
          format: `  ${label.padEnd(28)} [{bar}] {percentage}% {value}/{total} eta {eta}s`,
          stream: process.stderr,
          hideCursor: true,
          clearOnComplete: true,
        },
        Presets.shades_classic,
      );
      this.bar.start(total, 0);
    }
  }

  update(done: number): void {
    this.bar?.update(done);
  }

  stop(): void {
    this.bar?.stop();
  }
}
