import * as path from 'node:path';

/**
 * A file (or anonymous memory) mapped into the process. `buffer` is the mapped memory itself.
 * {@link Mapping.unmap} gives the memory back at once (file pages leave the process, anonymous
 * pages are freed) and leaves fresh zero pages at the same addresses, so a view of it that is
 * still held anywhere (the Buffer, typed arrays, DataViews) never faults: it reads zeros, and a
 * write to it reaches no file. The addresses are released when the Buffer is collected. (Detaching
 * the ArrayBuffer instead would make V8 check every typed-array access of optimised code in the
 * process from then on: 6 to 8 % of a typed put.)
 */
export interface Mapping {
  /** The mapped memory (kept alive by this object until unmap(); undefined after it). */
  readonly buffer: Buffer;
  /** False once unmap() ran. */
  readonly mapped: boolean;
  readonly length: number;
  /**
   * msync(MS_SYNC) of the pages holding [offset, offset + length) (default: all).
   * @throws Error with `code` set to the errno name (EIO, ...) and `path` to the label
   */
  sync(offset?: number, length?: number): void;
  /** msync(MS_SYNC) on the libuv thread pool; rejects as {@link Mapping.sync} throws. */
  syncAsync(offset?: number, length?: number): Promise<void>;
  /** madvise of the pages touching the range with one of {@link NativeBinding.ADVICE}. */
  advise(offset: number, length: number, advice: number): void;
  /**
   * Faults the whole pages of the range in for writing on a libuv worker (MADV_POPULATE_WRITE,
   * Linux 5.14+), then calls `done(errno)` on the event loop (0: every page populated). The
   * content never changes. Returns false, and queues nothing, where the kernel can not or when
   * the range holds no whole page. unmap() waits for a running job before it gives the memory back.
   */
  populate(offset: number, length: number, done?: (errno: number) => void): boolean;
  /**
   * Faults the pages touching [offset, offset + length) in for reading on the libuv thread pool
   * (see {@link MappedRange.warm}).
   */
  warm(offset: number, length: number, how?: 'auto' | 'touch'): Promise<'populate-read' | 'touch'>;
  /** Gives the memory back at once; views still held read zeros from then on. Idempotent. */
  unmap(): void;
}

/**
 * What both kinds of mapping have: the range methods and the warm-up. Documented once
 * here; {@link Mapping} repeats the older ones with their original comments.
 */
export interface MappedRange {
  readonly mapped: boolean;
  readonly length: number;
  /** msync(MS_SYNC); see {@link Mapping.sync}. @throws Error with `code` (errno name), `syscall`, `path` */
  sync(offset?: number, length?: number): void;
  /** msync(MS_SYNC) on the libuv pool; rejects as {@link MappedRange.sync} throws. */
  syncAsync(offset?: number, length?: number): Promise<void>;
  /** madvise; see {@link Mapping.advise}. @throws Error with `code` EINVAL for an unknown advice */
  advise(offset: number, length: number, advice: number): void;
  /**
   * Faults the pages touching [offset, offset + length) in for reading, on the libuv thread pool,
   * so that reads right after an open do not each take a page fault (the pile's warm option). The
   * main thread is never blocked: it goes on serving reads meanwhile. `how` 'auto' (the default)
   * uses `MADV_POPULATE_READ` (Linux 5.14+, see {@link NativeBinding.populateReadSupported}) and
   * reads one byte per page where the kernel lacks it; 'touch' always reads. Resolves with the
   * method used. One call is one job on one pool thread: for progress and to leave the pool to
   * others, give ranges of a few MiB to 64 MiB one after another. unmap() while a job runs gives
   * the memory back once the job ends.
   * @throws TypeError / RangeError for a range outside the mapping, Error once unmapped
   * @returns rejects with `code` EFAULT (pages past the end of the file, MADV_POPULATE_READ),
   *   ENOMEM, or ENXIO when the mapping was unmapped before the job ran; `syscall` and `path` set.
   *   With 'touch', a page past the end of the file raises SIGBUS, as any read of it would.
   */
  warm(offset: number, length: number, how?: 'auto' | 'touch'): Promise<'populate-read' | 'touch'>;
  /** Gives the memory back at once; views still held read zeros from then on. Idempotent. */
  unmap(): void;
}

/**
 * A file mapped shared read-write as a `SharedArrayBuffer`, so that `Atomics` act on it with the
 * guarantees the language's memory model gives shared memory (a Buffer's ArrayBuffer is not
 * shared: Atomics work on it in V8, but the specification promises nothing). Stores are seen by
 * every process mapping the file (about 0.3 µs later on this machine).
 *
 * The SharedArrayBuffer is the memory of a shared `WebAssembly.Memory` of `length` bytes, which V8
 * allocates page-aligned and unmaps when the buffer is collected; the file is mapped over it. So
 * `length` is a multiple of 65536 and at most 4 GiB, and each one reserves address space as a
 * WebAssembly memory does (V8 limits a process to about 1 TiB of such reservations). A process
 * started with `--jitless` has no WebAssembly, hence no SharedMapping.
 *
 * {@link SharedMapping.unmap} does what {@link Mapping.unmap} does: zero pages replace the file's
 * at once, so views still held (typed arrays, and copies of the buffer posted to worker threads,
 * which share its memory) read zeros and never fault; V8 releases the addresses when the last of
 * them is collected.
 */
export interface SharedMapping extends MappedRange {
  /** The mapped memory (kept alive by this object until unmap(); undefined after it). */
  readonly buffer: SharedArrayBuffer;
}

/** What the lock calls of a {@link SharedMutex} return ({@link NativeBinding.MUTEX}). */
export type MutexResult = 0 | 1 | 2 | 3;

/**
 * A process-shared, robust, error-checking pthread mutex living at an offset of a file mapped
 * shared (a writable {@link Mapping} or a {@link SharedMapping}); every process (and worker
 * thread) that maps the file and makes a SharedMutex at the same offset uses the same mutex.
 *
 * - **Robust:** when the thread holding it dies (its process killed, even by SIGKILL, or a worker
 *   thread that ends or is terminated), the kernel marks it, and the next lock call gets the lock
 *   with {@link NativeBinding.MUTEX}.OWNER_DEAD. The new holder repairs what the dead one left
 *   half done, then calls {@link SharedMutex.consistent} before {@link SharedMutex.unlock}.
 *   Unlocked without `consistent()`, the mutex becomes unusable: every later lock throws
 *   ENOTRECOVERABLE until {@link SharedMutex.init} runs again (only when no process uses it).
 * - **Per thread:** the holder is the thread that locked it: the main thread or one worker thread.
 *   Locking it again from the same thread throws EDEADLK instead of blocking for ever, and only the
 *   holder can unlock it (EPERM otherwise).
 * - **Blocking:** {@link SharedMutex.lock} blocks the calling thread (the event loop, on the main
 *   thread) until it has the lock, and `worker.terminate()` can not interrupt it; a thread that
 *   must stay responsive loops on {@link SharedMutex.timedLock}.
 *
 * The object maps the page holding the mutex at an address of its own, so it keeps working when the
 * mapping it was made from is unmapped. If it is collected, or its worker thread ends, while its
 * thread holds the mutex, that page stays mapped until the thread exits, so that the kernel can
 * mark the mutex OWNER_DEAD then (unmapped, the mutex would stay locked for ever).
 */
export interface SharedMutex {
  /** The byte offset in the mapping. */
  readonly offset: number;
  /** Whether this thread holds the mutex through this object (set by its lock calls, cleared by unlock). */
  readonly held: boolean;
  /**
   * Writes a fresh unlocked mutex over its {@link NativeBinding.MUTEX}.SIZE bytes. Only when no
   * other thread or process can be using it: when the file is created, under an exclusive lock of
   * it, or to replace a mutex that became ENOTRECOVERABLE.
   * @throws Error with `code` (errno name), `syscall` (pthread_mutex_init), `path` and `offset`
   */
  init(): void;
  /**
   * Waits for the mutex. MUTEX.LOCKED, or MUTEX.OWNER_DEAD: the holder died; this thread now
   * holds the mutex and must repair, then call consistent().
   * @throws Error with `code` ENOTRECOVERABLE (a holder's death was not made consistent: init()
   *   again), EDEADLK (this thread holds it already), EINVAL (the bytes are no mutex: init() never
   *   ran), with `syscall`, `path` and `offset`; Error when closed
   */
  lock(): MutexResult;
  /**
   * Takes the mutex if it is free: MUTEX.LOCKED, MUTEX.OWNER_DEAD (as for lock()), or MUTEX.BUSY.
   * @throws as {@link SharedMutex.lock}
   */
  tryLock(): MutexResult;
  /**
   * Waits at most `ms` milliseconds: MUTEX.LOCKED, MUTEX.OWNER_DEAD, or MUTEX.TIMED_OUT. The
   * deadline is on the wall clock (pthread_mutex_timedlock), so a clock jump moves it.
   * @throws TypeError for a negative `ms`; as {@link SharedMutex.lock} otherwise
   */
  timedLock(ms: number): MutexResult;
  /**
   * Releases the mutex.
   * @throws Error with `code` EPERM when this thread does not hold it; `syscall`, `path`, `offset`
   */
  unlock(): void;
  /**
   * Marks the state the dead holder left as repaired; call it after MUTEX.OWNER_DEAD, before unlock().
   * @throws Error with `code` EINVAL when the mutex is not in the owner-died state held by this thread
   */
  consistent(): void;
  /**
   * Unmaps the object's page. Idempotent; the mutex itself stays in the file.
   * @throws Error with `code` EBUSY while this thread holds the mutex through this object
   */
  close(): void;
}

/**
 * Futex wait and wake on the 32-bit word at an offset of a file mapped shared (a writable
 * {@link Mapping} or a {@link SharedMapping}). Not `FUTEX_PRIVATE`: the kernel keys waiters by the
 * file's page, so a wake reaches waiters in every process mapping the file (`Atomics.wait` and
 * `Atomics.notify` do not cross processes). Read and change the word itself with Atomics on the
 * mapping's memory. Like {@link SharedMutex}, the object maps the word's page at an address of its own.
 */
export interface Futex {
  /** The byte offset in the mapping. */
  readonly offset: number;
  /**
   * Sleeps while the word holds `expected` (compared as 32 bits, as Atomics.wait does), at most
   * `timeoutMs` (default: no limit). 'ok' when woken, or on a spurious wake-up (check the word
   * again); 'not-equal' when the word held another value; 'timed-out'. A signal does not end the
   * wait early. Blocks the calling thread.
   * @throws TypeError for a bad argument; Error with `code`, `syscall`, `path`, `offset` if the
   *   futex call fails; Error when closed
   */
  wait(expected: number, timeoutMs?: number): 'ok' | 'not-equal' | 'timed-out';
  /**
   * Wakes up to `count` waiters (default: all) in any process. Returns how many were woken.
   * @throws TypeError for a bad count; Error with `code`, `syscall`, `path`, `offset` if the call fails
   */
  wake(count?: number): number;
  /** Unmaps the object's page. Idempotent. */
  close(): void;
}

/** A lock that {@link NativeBinding.ofdHolder} found in the way. */
export interface OfdHolder {
  mode: 'read' | 'write';
  start: number;
  /** 0: to the end of the file. */
  length: number;
  /** -1 for an OFD lock (owned by an open file description, not a process); a pid for a classic POSIX lock. */
  pid: number;
}

/** The addon's exports. */
export interface NativeBinding {
  /**
   * `new Mapping(fd, length, offset, writable, label?)` maps `length` bytes of the file open as
   * `fd` from `offset` (a multiple of the page size): shared read-write, or for reading (`writable`
   * false) private copy-on-write, so that a stray store lands in this process's copy of the page
   * instead of faulting and never reaches the file; `fd` -1 maps private anonymous memory. Lengths and offsets are 64-bit (any safe integer).
   * @throws Error with `code` = the errno name (ENOMEM, EACCES, ...), `syscall` and `path` = label
   */
  readonly Mapping: new (fd: number, length: number, offset: number, writable: boolean, label?: string) => Mapping;
  /**
   * `new SharedMapping(fd, length, offset, label?)` maps `length` bytes (a multiple of 65536, at
   * most 4 GiB) of the file open read-write as `fd`, from `offset` (a multiple of the page size),
   * shared, as a SharedArrayBuffer. The file must be at least `offset + length` bytes long.
   * @throws RangeError for a bad length or offset; Error when WebAssembly is unavailable
   *   (`--jitless`); Error with `code` (EACCES, EBADF, ENODEV, ...), `syscall` mmap and `path` = label
   */
  readonly SharedMapping: new (fd: number, length: number, offset: number, label?: string) => SharedMapping;
  /**
   * `new SharedMutex(mapping, offset, label?)`: the mutex at `offset` (a multiple of 8, with
   * MUTEX.SIZE bytes inside the mapping) of a mapping shared read-write. `label` names it in errors
   * (default: the mapping's). Run {@link SharedMutex.init} once when the file is created.
   * @throws TypeError for a mapping that is not one; RangeError for a bad offset; Error when the
   *   mapping is unmapped, private or anonymous, or `code` from mremap
   */
  readonly SharedMutex: new (mapping: Mapping | SharedMapping, offset: number, label?: string) => SharedMutex;
  /**
   * `new Futex(mapping, offset, label?)`: the futex word at `offset` (a multiple of 4) of a mapping
   * shared read-write.
   * @throws as the SharedMutex constructor
   */
  readonly Futex: new (mapping: Mapping | SharedMapping, offset: number, label?: string) => Futex;
  /** SharedMutex results, and SIZE: the bytes a mutex takes (40 on x86-64 glibc; reserve 64). */
  readonly MUTEX: { readonly LOCKED: 0; readonly OWNER_DEAD: 1; readonly BUSY: 2; readonly TIMED_OUT: 3; readonly SIZE: number };
  /**
   * F_OFD_SETLK: takes a 'read' or 'write' lock, or drops it ('unlock'), on the bytes
   * [start, start + length) of the file open as `fd` (length 0: to the end of the file, however it
   * grows), for the open file description, not the process: it is held until dropped or until
   * every descriptor of that open file description is closed (the holder's death closes them), and
   * another open of the file conflicts with it even in the same process. A pid that the system
   * gives to another process later holds nothing. Never waits: true when done, false when another
   * open file description holds a conflicting lock. `label` (the path) names the file in errors.
   * @throws TypeError for bad arguments; Error with `code` (EBADF: not open, or not open for
   *   writing for 'write'; EINVAL; ENOLCK), `syscall` fcntl(F_OFD_SETLK), `path` and `offset` = start
   */
  ofdLock(fd: number, start: number, length: number, mode: 'read' | 'write' | 'unlock', label?: string): boolean;
  /**
   * F_OFD_GETLK: null when a lock of `mode` on [start, start + length) would be granted to the
   * open file description of `fd`, else the first lock in the way. Whether a byte that a live
   * process keeps locked is held tells whether that process is alive.
   * @throws TypeError for bad arguments; Error with `code`, `syscall` fcntl(F_OFD_GETLK), `path`, `offset`
   */
  ofdHolder(fd: number, start: number, length: number, mode: 'read' | 'write', label?: string): OfdHolder | null;
  /** Whether {@link MappedRange.warm} can use MADV_POPULATE_READ here (Linux 5.14+). */
  populateReadSupported(): boolean;
  /** madvise advice values for {@link Mapping.advise}. */
  readonly ADVICE: {
    readonly NORMAL: number;
    readonly RANDOM: number;
    readonly SEQUENTIAL: number;
    readonly WILLNEED: number;
    readonly DONTNEED: number;
    /**
     * MADV_HUGEPAGE: the range may be backed by transparent huge pages (2 MiB on x86-64) where
     * the kernel's THP mode is `madvise` or `always`; advise throws EINVAL on a kernel built
     * without them. MADV_NORMAL (no change) on platforms without the advice.
     */
    readonly HUGEPAGE: number;
  };
  readonly pageSize: number;
  /**
   * posix_fallocate(fd, 0, length): allocates the file's disk blocks. 0, or the errno:
   * EOPNOTSUPP, ENOSYS or EINVAL where the file system can not reserve, ENOSPC when full.
   */
  reserve(fd: number, length: number): number;
  /** Whether {@link Mapping.populate} can work here (Linux 5.14+). */
  populateSupported(): boolean;
  /**
   * From the block at segment offset `off` on, steps over committed data records of Pile's block
   * format whose header and checksum hold (below 1 KiB of payload: longer ones are CRC32, left to
   * the caller), and stops at the first block it does not accept or that ends past `end`. `words`
   * views the segment from offset `base` on. Writes to `out`: the offset it stopped at, the records,
   * the sum of their sizes, the sum of their lengths. Reads only. For @pile/core's recovery (PlainRegions).
   * @throws TypeError for bad arguments, RangeError when off or end lie outside `words`
   */
  plainRecords(words: Uint32Array, base: number, off: number, end: number, segmentSize: number, out: Float64Array): void;
  /**
   * The walk of plainRecords, and of the free and reserved blocks whose own check words hold (merged
   * into runs), over a segment file's bytes from offset `from` to `segmentSize`, read with pread (no
   * mapping: no page fault per page). Returns [status, offset, blocks, records, their sizes, their
   * lengths, runs, inner], then 11 numbers per run (start, end, generation, first and end index of
   * its inner blocks among the offsets that follow, the first block's four header words and two
   * links as read), then the offsets of the blocks merged into a run after its first. Status 0: walked
   * to the end; 1: stopped at `offset` at a block it does not accept; 2: the file ended early.
   * Reads only. For @pile/core's recovery (FileRegions).
   * @throws TypeError for bad arguments, RangeError for a misaligned `from`, an Error with the errno's `code` when pread fails
   */
  plainFile(fd: number, from: number, segmentSize: number, label: string): Float64Array;
}

const root = path.join(__dirname, '..');

/** The platform as prebuilt binaries are named, with the C library on Linux. */
function platformName(): string {
  let libc = '';
  if (process.platform === 'linux') {
    const report = process.report?.getReport() as { header?: { glibcVersionRuntime?: string } } | undefined;
    libc = report?.header?.glibcVersionRuntime !== undefined ? ` (glibc ${report.header.glibcVersionRuntime})` : ' (musl or another libc)';
  }
  return `${process.platform}-${process.arch}${libc}`;
}

/**
 * Loads the addon: a local build from source (addon/build) first, else the prebuilt binary
 * for this platform. A platform with neither gets one error that says what to do.
 */
function load(): NativeBinding {
  const tried: string[] = [];
  const local = path.join(root, 'addon', 'build', 'Release', 'pile_native.node');
  try {
    return require(local) as NativeBinding;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'MODULE_NOT_FOUND') tried.push(`${local}: ${(err as Error).message}`);
  }
  try {
    return (require('node-gyp-build') as (dir: string) => NativeBinding)(root);
  } catch (err) {
    tried.push((err as Error).message.split('\n')[0]!);
  }
  const error = new Error(
    `@pile/native has no binary for ${platformName()}, Node ${process.versions.node}. ` +
      'Prebuilt binaries ship for linux-x64 and linux-arm64 with glibc. To build it from source here, install a C++17 compiler ' +
      '(g++ 8+ or clang 7+), make and python3 (Debian/Ubuntu: apt-get install g++ make python3; macOS: xcode-select --install), ' +
      `then run: npx pile-native-build   (${tried.join('; ')})`,
  ) as Error & { code: string };
  error.code = 'PILE_NATIVE_UNAVAILABLE';
  throw error;
}

/** The loaded addon. @throws Error with code PILE_NATIVE_UNAVAILABLE where no binary can load */
export const native: NativeBinding = load();
