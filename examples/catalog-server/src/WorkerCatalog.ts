import { openPile, type Pile, type PilePointer, type TypedView } from '@pile/core';
import { loadWithProgress, recoveryLog } from './Catalog';
import { ProductSchema, generateProduct, type Product } from './Product';
import { DIRECTORY_ROOT, LOADED_ROOT, type ProductStore } from './ProductStore';

/** Schema name of the product records. */
const PRODUCT_SCHEMA = 'catalog-server:product';
/** Prefix of the roots naming products created by a PUT (ids outside 1..N). */
const CREATED_PREFIX = 'catalog-server:product:';
/**
 * Pointers per directory chunk: 16,384 x 8 bytes = 128 KiB a record, which fits the smallest
 * segment (1 MiB).
 */
const CHUNK = 16_384;

/** Options of {@link WorkerCatalog.prepare} and {@link WorkerCatalog.open}. */
export interface WorkerCatalogOptions {
  dir: string;
  /** Bytes per pile segment (default: the pile's own default). */
  segmentSize?: number;
  /** Where progress lines go (stderr by default). */
  log?: (line: string) => void;
}

/** The directory record: how many products were loaded, and the chunks of their pointers. */
interface Directory {
  products: number;
  chunks: number[];
}

function openCatalogPile(options: WorkerCatalogOptions, log: (line: string) => void): Pile {
  const onProgress = recoveryLog(log);
  return openPile(
    options.segmentSize === undefined
      ? { dir: options.dir, onProgress }
      : { dir: options.dir, segmentSize: options.segmentSize, onProgress },
  );
}

/**
 * The catalog that the worker processes of `--workers N` share: each product is a typed pile
 * record, which any worker reads (checked reads: never torn, even while another worker sets it)
 * and updates in place (`set` under the writer turn: the pointer stays valid). Products 1..N are
 * found through a directory of their pointers, made once by the first start and never changed
 * (an update keeps the pointer), so each worker reads it once at its start. A product created by
 * a PUT (an id outside 1..N) is named by a root of its own.
 *
 * A @pile/cache table can not serve here: one writing open at a time may have caches
 * (docs/concurrency.md).
 */
export class WorkerCatalog implements ProductStore {
  private readonly view: TypedView<Product>;
  private readonly pointers: Float64Array;
  private readonly ops = { hits: 0, misses: 0, inserts: 0, replaces: 0 };

  private constructor(
    readonly pile: Pile,
    directory: Directory,
  ) {
    this.view = pile.schema(PRODUCT_SCHEMA, ProductSchema);
    this.pointers = new Float64Array(directory.products);
    directory.chunks.forEach((chunk, i) => {
      // Copied to a buffer of its own: a Float64Array needs an offset that is a multiple of 8.
      const bytes = new Uint8Array(pile.get<Uint8Array>(chunk as PilePointer));
      this.pointers.set(new Float64Array(bytes.buffer), i * CHUNK);
    });
  }

  /**
   * Run by the primary process before it starts the workers: opens the pile in `dir`, loads the
   * catalog when no start loaded it yet (a load cut short is done again from the start: its
   * records stay, unnamed, as garbage), and closes it. Resolves to whether this call loaded it.
   * @throws Error when `dir` holds a catalog of the one-process mode (a cache table)
   */
  static prepare(options: WorkerCatalogOptions & { products: number }): boolean {
    const log = options.log ?? ((line: string) => process.stderr.write(`${line}\n`));
    const pile = openCatalogPile(options, log);
    try {
      if (pile.getRoot(LOADED_ROOT) !== undefined) {
        throw new Error(
          `${options.dir} holds a catalog made without --workers (a cache table, which one process writes): start it without --workers, or use another --dir`,
        );
      }
      if (pile.getRoot(DIRECTORY_ROOT) !== undefined) return false;
      const view = pile.schema(PRODUCT_SCHEMA, ProductSchema);
      const n = options.products;
      const chunks: number[] = [];
      const chunk = new Float64Array(Math.min(CHUNK, n));
      // One batch per chunk: the writer turn is taken once for 16,384 puts.
      let batch: PilePointer[] = [];
      const flushChunk = (): void => {
        pile.batch(() => {
          batch.forEach((p, i) => (chunk[i] = p));
          chunks.push(pile.put(new Uint8Array(chunk.buffer, 0, batch.length * 8)));
        });
        batch = [];
      };
      loadWithProgress(n, log, (id) => {
        batch.push(view.put(generateProduct(id)));
        if (batch.length === CHUNK || id === n) flushChunk();
      });
      pile.flush();
      pile.setRoot(DIRECTORY_ROOT, pile.put({ products: n, chunks } satisfies Directory));
      return true;
    } finally {
      pile.close();
    }
  }

  /**
   * Opens the catalog that {@link prepare} loaded, in a worker: the pile is opened for writing
   * beside the other workers (they take turns, docs/concurrency.md).
   * @throws Error when `dir` holds no catalog loaded for workers
   */
  static open(options: WorkerCatalogOptions): WorkerCatalog {
    const log = options.log ?? ((line: string) => process.stderr.write(`${line}\n`));
    const pile = openCatalogPile(options, log);
    try {
      const root = pile.getRoot(DIRECTORY_ROOT);
      if (root === undefined) throw new Error(`${options.dir} holds no catalog loaded for --workers`);
      return new WorkerCatalog(pile, pile.get<Directory>(root));
    } catch (err) {
      pile.close();
      throw err;
    }
  }

  private pointer(id: number): PilePointer | undefined {
    if (id >= 1 && id <= this.pointers.length) return this.pointers[id - 1] as PilePointer;
    return this.pile.getRoot(`${CREATED_PREFIX}${id}`);
  }

  get count(): number {
    return this.pointers.length + this.pile.roots().filter((r) => r.startsWith(CREATED_PREFIX)).length;
  }

  get(id: number): Product | undefined {
    const ptr = this.pointer(id);
    if (ptr === undefined) {
      this.ops.misses++;
      return undefined;
    }
    this.ops.hits++;
    return this.view.get(ptr);
  }

  update(id: number, make: (old: Product | undefined) => Product): { product: Product; created: boolean } {
    // The writer turn is held from the read to the write: another worker's update of the same
    // product (or creation of the same id) waits, so none is lost between them.
    const result = this.pile.batch(() => {
      const ptr = this.pointer(id);
      const old = ptr === undefined ? undefined : this.view.get(ptr);
      const product = make(old);
      if (ptr !== undefined) this.view.set(ptr, product);
      else this.pile.setRoot(`${CREATED_PREFIX}${id}`, this.view.put(product));
      return { product, created: ptr === undefined };
    });
    this.ops[result.created ? 'inserts' : 'replaces']++;
    return result;
  }

  *list(): IterableIterator<Product> {
    for (let i = 0; i < this.pointers.length; i++) yield this.view.get(this.pointers[i] as PilePointer);
    for (const root of this.pile.roots()) {
      if (!root.startsWith(CREATED_PREFIX)) continue;
      const ptr = this.pile.getRoot(root);
      if (ptr !== undefined) yield this.view.get(ptr);
    }
  }

  stats(): Record<string, unknown> {
    // This worker's own operations; the records are shared, the counters are not.
    return { table: { count: this.count, directory: this.pointers.length, ...this.ops } };
  }

  gauges(): { capacity: number; operations: Record<string, number> } {
    return { capacity: this.pointers.length, operations: { ...this.ops } };
  }

  /** Clean shutdown of this worker's open; the last worker to close marks the pile clean. */
  close(): void {
    if (!this.pile.isClosed) this.pile.close();
  }
}
