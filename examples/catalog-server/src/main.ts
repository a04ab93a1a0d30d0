#!/usr/bin/env node
import cluster from 'node:cluster';
import { parseArgs } from 'node:util';
import { performance } from 'node:perf_hooks';
import { Catalog } from './Catalog';
import { CatalogServer } from './CatalogServer';
import { runPrimary, runWorker } from './Cluster';
import { SharedCatalog } from './SharedCatalog';

const USAGE = `Usage: node examples/catalog-server/dist/main.js --dir DIR [--port PORT] [--products N] [--segment-size BYTES] [--redis URL | --workers N]

Serves a product catalog of N products (default 1,000,000) from @pile/cache in DIR, on 127.0.0.1.
  GET /products/:id   one product          PUT /products/:id  update (fields merged) or create
  GET /products       the whole catalog, streamed as a JSON array
  GET /stats          cache, pile and GC figures (JSON)     GET /metrics  Prometheus text
The first start generates and loads the catalog; later starts are warm at once.
--port 0 picks a free port. SIGINT / SIGTERM close the cache cleanly.
--redis URL: several servers (each with its own --dir and --port) share one catalog: changed
products are kept in that Redis, and @pile/sync makes a PUT on one server drop the others' copies.
--workers N: N worker processes (node:cluster) serve the port, each with the same pile open for
reading and writing; a worker that dies is replaced. The catalog is kept as pile records, not a
cache table: a DIR made with --workers is served only with --workers, and one made without, only without.`;

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      dir: { type: 'string' },
      port: { type: 'string', default: '8080' },
      products: { type: 'string', default: '1000000' },
      'segment-size': { type: 'string' },
      redis: { type: 'string' },
      workers: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help === true) {
    process.stdout.write(`${USAGE}\n`);
    return;
  }
  const num = (name: string, raw: string, min: number): number => {
    const n = Number(raw);
    if (!Number.isSafeInteger(n) || n < min) throw new Error(`--${name}: expected an integer >= ${min}, got '${raw}'`);
    return n;
  };
  if (values.dir === undefined) throw new Error(`--dir is required\n${USAGE}`);
  const port = num('port', values.port, 0);
  const products = num('products', values.products, 1);
  if (products > 0x7fffffff) throw new Error('--products: at most 2147483647');
  const segmentSize = values['segment-size'] === undefined ? undefined : num('segment-size', values['segment-size'], 1);
  if (values.workers !== undefined) {
    const workers = num('workers', values.workers, 1);
    if (values.redis !== undefined) throw new Error('--workers and --redis can not be used together');
    const options = { dir: values.dir, port, products, workers, ...(segmentSize === undefined ? {} : { segmentSize }) };
    return cluster.isPrimary ? runPrimary(options) : runWorker(options);
  }

  const catalog = Catalog.open(segmentSize === undefined ? { dir: values.dir, products } : { dir: values.dir, products, segmentSize });
  const readyMs = Math.round(performance.now());
  const shared = values.redis === undefined ? undefined : await SharedCatalog.open(catalog, values.redis);
  const server = new CatalogServer(catalog, { readyMs, loadedNow: catalog.loadedNow }, shared);
  const bound = await server.listen(port);
  process.stdout.write(
    `${catalog.loadedNow ? 'catalog loaded' : 'catalog found loaded (warm start)'}: ${catalog.products.count} products\n`,
  );
  process.stdout.write(`ready in ${readyMs} ms\n`);
  if (shared !== undefined) process.stdout.write(`in sync through ${values.redis} (origin ${shared.synced.origin})\n`);
  process.stdout.write(`listening on http://127.0.0.1:${bound}\n`);

  let closing = false;
  const shutdown = (signal: string): void => {
    if (closing) return;
    closing = true;
    server
      .close()
      .then(() => shared?.close())
      .then(() => {
        catalog.close();
        process.stdout.write(`closed on ${signal}\n`);
      })
      .catch((err: unknown) => {
        process.stderr.write(`error while closing: ${String(err)}\n`);
        process.exitCode = 1;
      });
  };
  process.on('SIGINT', () => shutdown('SIGINT'));
  process.on('SIGTERM', () => shutdown('SIGTERM'));
}

main().catch((err: unknown) => {
  process.stderr.write(`catalog-server: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exitCode = 1;
});
