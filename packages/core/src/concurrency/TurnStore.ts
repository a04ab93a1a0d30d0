import type { CoordFile } from './CoordFile';
import { encodeGuard } from '../records/EncodeGuard';
import { PileError } from '../PileError';
import { RecordStore } from '../records/RecordStore';
import type { WriterTurn } from './WriterTurn';

/**
 * The writes of a pile hold the writer turn of a read-write mapped pile for as long as they run
 * (docs/concurrency.md): writable() enters the turn, and each write method, wrapped by
 * {@link holdTurnIn}, leaves it when it returns or throws. batch() holds it across many writes.
 */
export abstract class TurnStore extends RecordStore {
  /** pile.coord (docs/concurrency.md): the state shared with the other processes of this pile. */
  protected coord: CoordFile | undefined;
  /** batch() calls running: the turn's depth beyond them is a write running (see closable). */
  private batches = 0;

  /**
   * For @pile/cache and @pile/graph, which change their raw blocks in place outside the writer
   * turn: one writing open of the pile at a time may have them (held until it closes). A read-only
   * open whose reads of them are checked (`readersChecked`: cache tables) reads beside it; other
   * read-only opens (graphs) only while no writing open has one. Not for other callers.
   * @throws PILE_LOCKED when another writing open (another process, or another pile object) has the
   *   pile open with a cache or graph, or (for a writing open) a read-only open reads a graph
   */
  claimStructures(what: string, readersChecked = false): void {
    if (this.coord === undefined || (this.readonly && readersChecked)) return;
    if (this.coord.holdStructures(this.readonly ? 'read' : 'write')) return;
    throw new PileError(
      'PILE_LOCKED',
      this.readonly
        ? `pile ${this.dir ?? ''} is open for writing with a cache or graph by another open; reading graphs from a read-only open beside it is not supported yet (their blocks are changed in place without change marks) (${what}; docs/concurrency.md)`
        : `pile ${this.dir ?? ''}: another open has it with a cache or graph, which one open writes at a time, or reads a graph read-only (${what}; docs/concurrency.md)`,
    );
  }

  /**
   * Runs `fn` holding the writer turn for all the writes it makes: other processes wait until it
   * returns, and it pays for taking the turn once. `fn` runs synchronously; its result is returned.
   * In-memory and read-only piles just run it (their writes need no turn, or are refused).
   * @throws PILE_CLOSED; whatever `fn` throws (the writes it made before stay)
   */
  batch<T>(fn: () => T): T {
    this.open();
    const turn = this.turn;
    if (turn === undefined) return fn();
    turn.enter();
    // Inside the outermost batch, each write that returns is complete (see WriterTurn.base).
    const outer = turn.depth === 1;
    if (outer) turn.base = 1;
    this.batches++;
    try {
      return fn();
    } finally {
      this.batches--;
      if (outer) turn.base = 0;
      // Nothing to leave when fn closed the pile (close() let the turn go: WriterTurn.leaveBatches).
      if (turn.depth !== 0) turn.leave();
    }
  }

  /**
   * close() may run between writes, inside batch(fn) included, not from code a write of this pile
   * runs (a getter or toJSON of a value being stored, an onProgress callback): that write would go
   * on writing into the closed pile after close() returned.
   * @throws PILE_REENTRANT
   */
  protected closable(): void {
    if (encodeGuard.depth === 0 && (this.turn === undefined || this.turn.depth <= this.batches)) return;
    throw new PileError(
      'PILE_REENTRANT',
      `close() of pile ${this.dir ?? '(in memory)'} from code that runs inside one of its writes (a getter, toJSON, zod transform or onProgress callback); close after the write returns (inside batch(fn) itself close() is allowed)`,
    );
  }
}

/** The pile's methods that write (Pile's and RecordStore's): each holds the turn while it runs. */
export const PILE_WRITES = [
  'put',
  'set',
  'putTyped',
  'delete',
  'allocRaw',
  'putRaw',
  'setTyped',
  'setRoot',
  'compact',
  'schema',
  'verify',
] as const;

type Write = (this: { turn: WriterTurn | undefined }, a: unknown, b: unknown, c: unknown, d: unknown) => unknown;

/**
 * Wraps the write methods `names` of a pile class so that each leaves the turn that writable()
 * (or schema()) entered, when it returns or throws. A write refused before it entered (closed,
 * read-only) leaves nothing: the depth is compared, not the turn left unconditionally. In-memory
 * and read-only piles have no turn and call straight through. Four fixed arguments, not a rest
 * array: no allocation per put (no write takes more).
 */
export function holdTurnIn(proto: object, names: readonly string[]): void {
  const methods = proto as Record<string, Write>;
  for (const name of names) {
    const write = methods[name]!;
    methods[name] = function (this: { turn: WriterTurn | undefined }, a, b, c, d): unknown {
      const turn = this.turn;
      if (turn === undefined) return write.call(this, a, b, c, d);
      const depth = turn.depth;
      try {
        return write.call(this, a, b, c, d);
      } finally {
        if (turn.depth > depth) turn.leave();
      }
    };
  }
}
