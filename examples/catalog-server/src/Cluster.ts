import cluster, { type Worker } from 'node:cluster';
import { performance } from 'node:perf_hooks';
import { CatalogServer } from './CatalogServer';
import { WorkerCatalog } from './WorkerCatalog';

/** Options of `--workers N`. */
export interface ClusterOptions {
  dir: string;
  port: number;
  products: number;
  segmentSize?: number;
  workers: number;
}

/** What a worker tells the primary once it listens. */
interface Listening {
  listening: number;
  pid: number;
}

/** Set in the workers' environment by the primary: whether its start loaded the catalog. */
const LOADED_NOW_ENV = 'PILE_CATALOG_LOADED_NOW';

function out(line: string): void {
  process.stdout.write(`${line}\n`);
}

/**
 * The primary process of `--workers N`: loads the catalog when no start did (then closes the
 * pile), starts N workers with node:cluster, and starts another whenever one dies (a worker that
 * dies before it ever listened ends the server instead: it would only die again). SIGINT / SIGTERM
 * stop every worker cleanly (each closes its open of the pile; the last one marks it clean).
 */
export async function runPrimary(options: ClusterOptions): Promise<void> {
  const loadedNow = WorkerCatalog.prepare(
    options.segmentSize === undefined
      ? { dir: options.dir, products: options.products }
      : { dir: options.dir, products: options.products, segmentSize: options.segmentSize },
  );
  const listened = new Set<number>();
  let port = 0;
  let closing: string | undefined;
  let allListening: () => void = () => {};
  const ready = new Promise<void>((resolve) => (allListening = resolve));

  const fork = (): Worker => {
    const worker = cluster.fork({ [LOADED_NOW_ENV]: loadedNow ? '1' : '0' });
    worker.on('message', (m: Listening) => {
      if (typeof m?.listening !== 'number') return;
      port = m.listening;
      listened.add(worker.id);
      out(`worker ${worker.id} (pid ${m.pid}) listening`);
      if (listened.size === options.workers) allListening();
    });
    return worker;
  };

  const stop = (signal: string): void => {
    if (closing !== undefined) return;
    closing = signal;
    for (const w of Object.values(cluster.workers ?? {})) w?.process.kill('SIGTERM');
  };

  cluster.on('exit', (worker, code, signal) => {
    const how = signal ?? `code ${String(code)}`;
    if (closing === undefined && !listened.has(worker.id)) {
      process.stderr.write(`catalog-server: worker ${worker.id} exited (${how}) before it listened; stopping\n`);
      process.exitCode = 1;
      stop('a failed worker');
    } else if (closing === undefined) {
      out(`worker ${worker.id} (pid ${String(worker.process.pid)}) exited (${how}); starting another`);
      fork();
    }
    if (closing !== undefined && Object.keys(cluster.workers ?? {}).length === 0) out(`closed on ${closing}`);
  });
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('SIGTERM', () => stop('SIGTERM'));

  for (let i = 0; i < options.workers; i++) fork();
  await ready;
  out(`${loadedNow ? 'catalog loaded' : 'catalog found loaded (warm start)'}: ${options.products} products, ${options.workers} workers`);
  out(`ready in ${Math.round(performance.now())} ms`);
  out(`listening on http://127.0.0.1:${port}`);
}

/**
 * A worker of `--workers N`: opens the shared catalog (the pile, for writing, beside the other
 * workers) and serves it on the port the primary holds (node:cluster hands each connection to one
 * worker). SIGTERM / SIGINT close the server, then the pile, then the worker exits.
 */
export async function runWorker(options: ClusterOptions): Promise<void> {
  const catalog = WorkerCatalog.open(options.segmentSize === undefined ? { dir: options.dir } : options);
  const readyMs = Math.round(performance.now());
  const server = new CatalogServer(
    catalog,
    { readyMs, loadedNow: process.env[LOADED_NOW_ENV] === '1' },
    undefined,
    `${cluster.worker!.id}/${process.pid}`,
  );
  const bound = await server.listen(options.port);
  process.send!({ listening: bound, pid: process.pid } satisfies Listening);
  let closing = false;
  const shutdown = (): void => {
    if (closing) return;
    closing = true;
    server
      .close()
      .then(() => {
        catalog.close();
        process.exit(0);
      })
      .catch((err: unknown) => {
        process.stderr.write(`worker ${cluster.worker!.id}: error while closing: ${String(err)}\n`);
        process.exit(1);
      });
  };
  process.on('SIGINT', shutdown);
  process.on('SIGTERM', shutdown);
}
