import { PileError } from './PileError';

const MiB = 1 << 20;
const GiB = 1 << 30;
/** segmentSize when the option is omitted. */
export const DEFAULT_SEGMENT_SIZE = 64 * MiB;

/** Options of {@link openPile}. */
export interface PileOptions {
  /** Directory of a mapped, persistent pile; created if missing. Omitted: an in-memory pile (off-heap, not persistent). */
  dir?: string;
  /** Bytes per segment, a power of two from 1 MiB to 1 GiB; default 64 MiB. Fixed when the pile is created. */
  segmentSize?: number;
  /** Cap on all segment bytes; a put that needs more throws PILE_OUT_OF_SPACE. Default: no cap. */
  maxMemory?: number;
  /** Map read-only; writes throw PILE_READONLY. Opens alongside a writer. */
  readonly?: boolean;
  /** Check each record's checksum on get (PILE_CORRUPT on damage). */
  verifyOnRead?: boolean;
  /** false: refuse to create a new pile in `dir` (PILE_INVALID_OPTION). Default true. */
  create?: boolean;
  /** Progress of long opens (phase 'recover', after a crash) and of the warm-up after the open (phase 'warm', see `warm`). */
  onProgress?: (p: { phase: string; done: number; total: number }) => void;
  /**
   * A mapped pile saves a checkpoint (allocator state, dirty marks cleared) once this many block
   * bytes were written since the last one; recovery after a crash scans only what was written
   * since. Default 64 MiB. docs/durability.md.
   */
  checkpointBytes?: number;
  /** Also checkpoint this many milliseconds after a write when no checkpoint followed it (0: never by time). Default 5000. */
  checkpointInterval?: number;
  /**
   * After the open, fault the pages of the pile's records into this process on the libuv thread
   * pool (`MADV_POPULATE_READ`, else a read per page; `MADV_WILLNEED` in worker threads), a segment
   * at a time in chunks, so that random reads soon after a restart do not each take a page fault.
   * The open does not wait for it and gets are served meanwhile; progress goes to `onProgress`
   * (phase 'warm', bytes). Default false: it reads the whole pile into memory, which a process that
   * touches a small part of a large pile, or a machine with less memory than the pile, does not
   * want. Only for a pile with a `dir`. docs/guide.md.
   */
  warm?: boolean;
}

/** The options {@link checkOptions} found valid, with their defaults. */
export interface CheckedOptions {
  readonly dir: string | undefined;
  readonly readonly: boolean;
  readonly verifyOnRead: boolean;
  readonly create: boolean;
  readonly onProgress: PileOptions['onProgress'];
  readonly checkpointBytes: number;
  readonly checkpointInterval: number;
  readonly warm: boolean;
}

const KNOWN_OPTIONS = new Set([
  'dir',
  'segmentSize',
  'maxMemory',
  'readonly',
  'verifyOnRead',
  'create',
  'onProgress',
  'checkpointBytes',
  'checkpointInterval',
  'warm',
]);

/** The error of a bad option or argument, naming it. */
export function invalid(name: string, message: string): PileError {
  return new PileError('PILE_INVALID_OPTION', `option ${name}: ${message}`);
}

/** A power of two from 1 MiB to 1 GiB: what segmentSize may be, given or stored. */
export function isSegmentSize(s: number): boolean {
  return Number.isInteger(s) && s >= MiB && s <= GiB && (s & (s - 1)) === 0;
}

/**
 * Checks what {@link openPile} was given, before anything is opened or created, and fills in
 * the defaults. maxMemory against the segment size is checked by the open, which knows the
 * size of an existing pile.
 * @throws PILE_INVALID_OPTION naming the option
 */
export function checkOptions(options: PileOptions): CheckedOptions {
  if (options === null || typeof options !== 'object') throw invalid('options', 'expected an object');
  for (const k of Object.keys(options)) if (!KNOWN_OPTIONS.has(k)) throw invalid(k, 'unknown option');
  const { dir, readonly = false, verifyOnRead = false, create = true, onProgress, warm = false } = options;
  if (dir !== undefined && (typeof dir !== 'string' || dir === '')) throw invalid('dir', 'expected a non-empty string');
  if (typeof readonly !== 'boolean') throw invalid('readonly', 'expected a boolean');
  if (typeof verifyOnRead !== 'boolean') throw invalid('verifyOnRead', 'expected a boolean');
  if (typeof create !== 'boolean') throw invalid('create', 'expected a boolean');
  if (onProgress !== undefined && typeof onProgress !== 'function') throw invalid('onProgress', 'expected a function');
  if (options.segmentSize !== undefined && !isSegmentSize(options.segmentSize)) {
    throw invalid('segmentSize', `expected a power of two from 1 MiB (1048576) to 1 GiB (1073741824), got ${String(options.segmentSize)}`);
  }
  if (options.maxMemory !== undefined && (!Number.isSafeInteger(options.maxMemory) || options.maxMemory <= 0)) {
    throw invalid('maxMemory', `expected a positive integer of bytes, got ${String(options.maxMemory)}`);
  }
  if (readonly && dir === undefined) throw invalid('readonly', 'an in-memory pile (no dir) can not be read-only');
  if (typeof warm !== 'boolean') throw invalid('warm', 'expected a boolean');
  if (warm && dir === undefined) throw invalid('warm', 'an in-memory pile (no dir) has no file pages to warm');
  const { checkpointBytes = 64 * MiB, checkpointInterval = 5000 } = options;
  if (!Number.isSafeInteger(checkpointBytes) || checkpointBytes < MiB) {
    throw invalid('checkpointBytes', `expected an integer of at least 1 MiB (1048576), got ${String(checkpointBytes)}`);
  }
  if (!Number.isSafeInteger(checkpointInterval) || checkpointInterval < 0 || checkpointInterval > 2 ** 31 - 1) {
    throw invalid('checkpointInterval', `expected milliseconds from 0 (off) to 2147483647, got ${String(checkpointInterval)}`);
  }
  return { dir, readonly, verifyOnRead, create, onProgress, checkpointBytes, checkpointInterval, warm };
}
