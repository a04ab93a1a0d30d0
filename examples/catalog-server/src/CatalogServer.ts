import * as http from 'node:http';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { isPileError } from '@pile/core';
import type { ProductStore } from './ProductStore';
import type { SharedCatalog } from './SharedCatalog';
import { GcMonitor, promFamily } from './Metrics';
import { ProductSchema, type Product } from './Product';

/** Largest PUT body accepted. */
const MAX_BODY = 64 * 1024;
/** Bytes gathered before a write while streaming the catalog. */
const STREAM_CHUNK = 64 * 1024;

class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

function sendJson(res: http.ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

function parseId(raw: string): number {
  const id = Number(raw);
  if (!Number.isInteger(id) || id < -0x80000000 || id > 0x7fffffff || String(id) !== raw)
    throw new HttpError(400, `bad product id '${raw}': expected a 32-bit integer`);
  return id;
}

/** `fields` merged onto the stored product (if any) as product `id`; a 400 naming the field when that is not a product. */
function merge(id: number, old: Product | undefined, fields: Record<string, unknown>): Product {
  const parsed = ProductSchema.safeParse({ ...(old ?? {}), ...fields, id });
  if (!parsed.success) {
    throw new HttpError(
      400,
      `not a product: ${parsed.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ')}`,
    );
  }
  return parsed.data;
}

async function readBody(req: http.IncomingMessage): Promise<string> {
  const parts: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_BODY) throw new HttpError(413, `body larger than ${MAX_BODY} bytes`);
    parts.push(chunk as Buffer);
  }
  return Buffer.concat(parts).toString('utf8');
}

/**
 * The catalog's HTTP API on node:http:
 * `GET /products/:id`, `PUT /products/:id` (a full product, or fields merged onto the stored one),
 * `GET /products` (the whole catalog as a JSON array, streamed entry by entry),
 * `GET /stats` (JSON), `GET /metrics` (Prometheus text).
 */
export class CatalogServer {
  readonly server: http.Server;
  private readonly gc = new GcMonitor();
  private readonly requests = new Map<string, number>();
  private readonly started = Date.now();

  constructor(
    private readonly catalog: ProductStore,
    private readonly startup: { readyMs: number; loadedNow: boolean },
    /** With --redis: products are read through and written through the shared catalog. */
    private readonly shared?: SharedCatalog,
    /** With --workers: the worker (`<cluster id>/<pid>`), sent as the `x-catalog-worker` header of every response. */
    private readonly worker?: string,
  ) {
    this.server = http.createServer((req, res) => {
      if (this.worker !== undefined) res.setHeader('x-catalog-worker', this.worker);
      this.handle(req, res).catch((err: unknown) => {
        const status =
          err instanceof HttpError
            ? err.status
            : isPileError(err, 'PILE_SCHEMA_VIOLATION') || isPileError(err, 'PILE_INVALID_VALUE')
              ? 400
              : 500;
        if (status === 500) process.stderr.write(`error on ${req.method} ${req.url}: ${(err as Error).stack ?? String(err)}\n`);
        if (res.headersSent) res.destroy();
        else sendJson(res, status, { error: (err as Error).message });
      });
    });
  }

  /** Listens on 127.0.0.1 only; resolves to the bound port (`port` 0 picks a free one). */
  async listen(port: number): Promise<number> {
    this.server.listen(port, '127.0.0.1');
    await once(this.server, 'listening');
    return (this.server.address() as AddressInfo).port;
  }

  /** Stops accepting, ends idle keep-alive connections, waits for requests in flight. */
  async close(): Promise<void> {
    this.gc.stop();
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    this.server.closeIdleConnections();
    await closed;
  }

  private count(route: string, status: number): void {
    const k = `${route} ${status}`;
    this.requests.set(k, (this.requests.get(k) ?? 0) + 1);
  }

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    const path = url.pathname;
    const m = /^\/products\/([^/]+)$/.exec(path);
    let route = 'other';
    res.on('finish', () => this.count(route, res.statusCode));
    if (m !== null) {
      route = '/products/:id';
      const id = parseId(decodeURIComponent(m[1]!));
      if (req.method === 'GET') return this.getProduct(res, id);
      if (req.method === 'PUT') return this.putProduct(req, res, id);
      throw new HttpError(405, `${req.method} is not allowed on ${path}`);
    }
    if (req.method !== 'GET') throw new HttpError(405, `${req.method} is not allowed on ${path}`);
    switch (path) {
      case '/products':
        route = '/products';
        return this.streamProducts(res);
      case '/stats':
        route = '/stats';
        return sendJson(res, 200, this.stats());
      case '/metrics':
        route = '/metrics';
        res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4; charset=utf-8' });
        res.end(this.metrics());
        return;
      default:
        throw new HttpError(404, `no route ${path}`);
    }
  }

  private async getProduct(res: http.ServerResponse, id: number): Promise<void> {
    const p = this.shared === undefined ? this.catalog.get(id) : await this.shared.get(id);
    if (p === undefined) throw new HttpError(404, `no product ${id}`);
    sendJson(res, 200, p);
  }

  private async putProduct(req: http.IncomingMessage, res: http.ServerResponse, id: number): Promise<void> {
    let body: unknown;
    try {
      body = JSON.parse(await readBody(req));
    } catch (err) {
      if (err instanceof HttpError) throw err;
      throw new HttpError(400, `body is not JSON: ${(err as Error).message}`);
    }
    if (body === null || typeof body !== 'object' || Array.isArray(body)) throw new HttpError(400, 'body must be a JSON object');
    const fields = body as Record<string, unknown>;
    if (this.shared === undefined) {
      const { product, created } = this.catalog.update(id, (old) => merge(id, old, fields));
      return sendJson(res, created ? 201 : 200, product);
    }
    const old = await this.shared.get(id);
    const product = merge(id, old, fields);
    await this.shared.save(product);
    sendJson(res, old === undefined ? 201 : 200, product);
  }

  /** The whole table as a JSON array, written in 64 KiB pieces, waiting for 'drain' when the client is slow. */
  private async streamProducts(res: http.ServerResponse): Promise<void> {
    res.writeHead(200, { 'content-type': 'application/json; charset=utf-8' });
    let buf = '[';
    let first = true;
    let aborted = false;
    res.on('close', () => (aborted = !res.writableFinished));
    for (const product of this.catalog.list()) {
      buf += (first ? '\n' : ',\n') + JSON.stringify(product);
      first = false;
      if (buf.length >= STREAM_CHUNK) {
        const chunk = buf;
        buf = '';
        if (!res.write(chunk)) {
          await Promise.race([once(res, 'drain'), once(res, 'close')]);
        }
        if (aborted || res.destroyed) return;
      }
    }
    res.end(`${buf}${first ? '' : '\n'}]\n`);
  }

  private stats(): Record<string, unknown> {
    const mem = process.memoryUsage();
    return {
      products: this.catalog.count,
      ...(this.worker === undefined ? {} : { worker: this.worker }),
      startup: { readyMs: this.startup.readyMs, loadedNow: this.startup.loadedNow },
      uptimeSec: (Date.now() - this.started) / 1000,
      ...this.catalog.stats(),
      ...(this.shared === undefined ? {} : { sync: this.shared.synced.stats }),
      pile: this.catalog.pile.stats,
      gc: this.gc.byKind,
      memory: { rss: mem.rss, heapUsed: mem.heapUsed, heapTotal: mem.heapTotal, external: mem.external, arrayBuffers: mem.arrayBuffers },
      requests: Object.fromEntries(this.requests),
    };
  }

  private metrics(): string {
    const p = this.catalog.pile.stats;
    const g = this.catalog.gauges();
    const mem = process.memoryUsage();
    const out: string[] = [
      promFamily('catalog_products', 'gauge', 'Products in the catalog table.', [[{}, this.catalog.count]]),
      promFamily('catalog_table_capacity', 'gauge', 'Slots of the products table index.', [[{}, g.capacity]]),
      promFamily(
        'catalog_table_operations_total',
        'counter',
        'Operations on the products table by outcome.',
        Object.entries(g.operations).map(([k, v]) => [{ outcome: k }, v]),
      ),
      promFamily('pile_objects', 'gauge', 'Live records in the pile.', [[{}, p.objectCount]]),
      promFamily('pile_links', 'gauge', 'Records moved to a larger block.', [[{}, p.linkCount]]),
      promFamily('pile_segments', 'gauge', 'Segment files of the pile.', [[{}, p.segmentCount]]),
      promFamily('pile_bytes', 'gauge', 'Pile bytes by state.', [
        [{ state: 'total' }, p.totalBytes],
        [{ state: 'allocated' }, p.allocatedBytes],
        [{ state: 'utilized' }, p.utilizedBytes],
        [{ state: 'overhead' }, p.overheadBytes],
        [{ state: 'free' }, p.freeBytes],
      ]),
      promFamily(
        'nodejs_gc_pauses_total',
        'counter',
        'Garbage collections by kind.',
        Object.entries(this.gc.byKind).map(([k, f]) => [{ kind: k }, f.count]),
      ),
      promFamily(
        'nodejs_gc_pause_seconds_total',
        'counter',
        'Time spent in garbage collection by kind.',
        Object.entries(this.gc.byKind).map(([k, f]) => [{ kind: k }, f.totalMs / 1000]),
      ),
      promFamily(
        'nodejs_gc_pause_seconds_max',
        'gauge',
        'Longest garbage-collection pause by kind.',
        Object.entries(this.gc.byKind).map(([k, f]) => [{ kind: k }, f.maxMs / 1000]),
      ),
      promFamily('process_memory_bytes', 'gauge', 'Process memory by kind.', [
        [{ kind: 'rss' }, mem.rss],
        [{ kind: 'heap_used' }, mem.heapUsed],
        [{ kind: 'heap_total' }, mem.heapTotal],
        [{ kind: 'external' }, mem.external],
      ]),
      promFamily('catalog_startup_seconds', 'gauge', 'Time from process start to ready.', [
        [{ loaded: String(this.startup.loadedNow) }, this.startup.readyMs / 1000],
      ]),
      promFamily(
        'http_requests_total',
        'counter',
        'HTTP requests by route and status.',
        [...this.requests].map(([k, v]) => {
          const [route, status] = k.split(' ') as [string, string];
          return [{ route, status }, v];
        }),
      ),
    ];
    return out.join('');
  }
}
