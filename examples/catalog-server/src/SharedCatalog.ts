import { Redis } from 'ioredis';
import { syncCache, type SyncedCache, type SyncedTable } from '@pile/sync';
import type { Catalog } from './Catalog';
import { ProductSchema, generateProduct, type Product } from './Product';

/**
 * The catalog shared by several servers (`--redis URL`): Redis holds the products that were
 * changed (`catalog:product:<id>`, the example's stand-in for a database), every server keeps its
 * own @pile/cache in its own directory, and @pile/sync makes each server drop its copy of a product
 * another server changed. A miss reads through: the changed product from Redis, else the generated one.
 */
export class SharedCatalog {
  private constructor(
    private readonly catalog: Catalog,
    private readonly redis: Redis,
    readonly synced: SyncedCache,
    private readonly table: SyncedTable<Product>,
  ) {}

  /** Attaches the catalog's cache to the stream at `url`; resolves once this server caught up. */
  static async open(catalog: Catalog, url: string): Promise<SharedCatalog> {
    const redis = new Redis(url, { lazyConnect: true });
    await redis.connect();
    const synced = syncCache(catalog.cache, { redis: url, stream: 'catalog:inv' });
    try {
      const shared = new SharedCatalog(
        catalog,
        redis,
        synced,
        synced.table<Product>('products', { collisionMode: 'durable', schema: ProductSchema }),
      );
      await synced.ready;
      return shared;
    } catch (err) {
      await synced.close();
      redis.disconnect();
      throw err;
    }
  }

  /** The product, from this server's cache or, on a miss, from the source (then cached). */
  get(id: number): Promise<Product | undefined> {
    return this.table.getOrLoad(id, () => this.load(id));
  }

  /** Writes the product to the source, then to this cache: the other servers drop their copy. */
  async save(product: Product): Promise<void> {
    await this.redis.set(`catalog:product:${product.id}`, JSON.stringify(product));
    this.table.table.put(product.id, product);
  }

  async close(): Promise<void> {
    await this.synced.close();
    this.redis.disconnect();
  }

  private async load(id: number): Promise<Product | undefined> {
    const text = await this.redis.get(`catalog:product:${id}`);
    if (text !== null) return ProductSchema.parse(JSON.parse(text));
    return id >= 1 && id <= this.catalog.size ? generateProduct(id) : undefined;
  }
}
