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
  /** Gives the memory back at once; views still held read zeros from then on. Idempotent. */
  unmap(): void;
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
  /** madvise advice values for {@link Mapping.advise}. */
  readonly ADVICE: { readonly NORMAL: number; readonly RANDOM: number; readonly SEQUENTIAL: number; readonly WILLNEED: number; readonly DONTNEED: number };
  readonly pageSize: number;
  /**
   * posix_fallocate(fd, 0, length): allocates the file's disk blocks. 0, or the errno:
   * EOPNOTSUPP, ENOSYS or EINVAL where the file system can not reserve, ENOSPC when full.
   */
  reserve(fd: number, length: number): number;
  /** Whether {@link Mapping.populate} can work here (Linux 5.14+). */
  populateSupported(): boolean;
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
    'Prebuilt binaries ship for linux-x64 with glibc. To build it from source here, install a C++17 compiler ' +
    '(g++ 8+ or clang 7+), make and python3 (Debian/Ubuntu: apt-get install g++ make python3; macOS: xcode-select --install), ' +
    `then run: npx pile-native-build   (${tried.join('; ')})`,
  ) as Error & { code: string };
  error.code = 'PILE_NATIVE_UNAVAILABLE';
  throw error;
}

/** The loaded addon. @throws Error with code PILE_NATIVE_UNAVAILABLE where no binary can load */
export const native: NativeBinding = load();
