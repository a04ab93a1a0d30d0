import type { PileCache } from '@pile/cache';

/**
 * How a {@link KeyvPile} reaches its cache: held by this process for as long as it is used
 * ({@link HeldCache}), or taken in turns with other processes ({@link SharedTurns}). Every
 * KeyvPile of one directory in a process shares one access ({@link CacheRegistry}).
 */
export interface CacheAccess {
  /**
   * Runs `fn` with the open cache, in this process's turn; its result or error is the promise's.
   * @throws PILE_CLOSED after {@link CacheAccess.close}; PILE_LOCKED when a shared turn is not had in time
   */
  run<T>(fn: (cache: PileCache) => T): Promise<T>;
  /** The cache, when this access holds it for good (HeldCache); undefined for one taken in turns. */
  readonly held: PileCache | undefined;
  /** Closes the cache (the last KeyvPile of the directory disconnected). Idempotent. */
  close(): void;
}
