/**
 * Entry of a warm-restart probe: `node dist/RestartProbe.js <store> <dir> <id>`.
 * Loads only what its store needs, opens the data left by a clean close (or rebuilds it from
 * JSON) and serves one get; reports, as a marked JSON line, the milliseconds since process start.
 * performance.now() counts from the process's time origin, so Node's own boot is included.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { RESULT_MARKER } from './ChildRunner';
import { PILE_STORES, RESTART_FILES } from './RestartFiles';

interface Probed {
  id: number;
  name: string;
}

interface Opened {
  value: Probed;
  /** performance.now() once the store's modules were loaded. */
  loadedMs: number;
  /** performance.now() once the store was open (or the Map rebuilt), before the get. */
  openedMs: number;
  /** performance.now() once a pile's schema was registered and its index root read (openedMs for the others). */
  readyMs: number;
  /** A get of the record beside the first, after it: what any later get costs. */
  next: () => Probed;
  close: () => unknown;
}

/** The record read second: the one before the first (the first probe reads the last record). */
function neighbour(id: number): number {
  return id === 0 ? 1 : id - 1;
}

function firstGet(store: string, dir: string, id: number): Opened {
  switch (PILE_STORES.includes(store) ? 'pile' : store) {
    case 'node':
      // Node's own boot and this script, nothing opened: the floor every other store starts from.
      return {
        value: { id, name: '' },
        loadedMs: performance.now(),
        openedMs: performance.now(),
        readyMs: performance.now(),
        next: () => ({ id: neighbour(id), name: '' }),
        close: () => undefined,
      };
    case 'pile': {
      const { openPile } = require('@pile/core') as typeof import('@pile/core');
      const { ProductSchema } = require('./Records') as typeof import('./Records');
      const loadedMs = performance.now();
      const pile = openPile({ dir: path.join(dir, store) });
      const openedMs = performance.now();
      const get: (p: never) => Probed = store.startsWith('generic')
        ? (p) => pile.get(p) as Probed
        : (
            (view) => (p: never) =>
              view.get(p)
          )(pile.schema('product', ProductSchema));
      const indexPtr = pile.getRoot(RESTART_FILES.indexRoot);
      if (indexPtr === undefined) throw new Error(`restart probe: root ${RESTART_FILES.indexRoot} missing in ${dir}`);
      const raw = pile.rawBuffer(indexPtr);
      const index = new Float64Array(raw.buffer, raw.byteOffset, raw.length / 8);
      const readyMs = performance.now();
      return {
        value: get(index[id] as never),
        loadedMs,
        openedMs,
        readyMs,
        next: () => get(index[neighbour(id)] as never),
        close: () => pile.close(),
      };
    }
    case 'cache': {
      const { openCache } = (require('./PileCacheLoader') as typeof import('./PileCacheLoader')).loadPileCache();
      const { ProductSchema, cacheKey } = require('./Records') as typeof import('./Records');
      const loadedMs = performance.now();
      const cache = openCache({ dir: path.join(dir, RESTART_FILES.cache) });
      const table = cache.table(RESTART_FILES.cacheTable, { schema: ProductSchema, collisionMode: 'durable' });
      const openedMs = performance.now();
      const value = table.get(cacheKey(id));
      if (value === undefined) throw new Error(`restart probe: key ${cacheKey(id)} missing from the reopened cache`);
      return { value, loadedMs, openedMs, readyMs: openedMs, next: () => table.get(cacheKey(neighbour(id)))!, close: () => cache.close() };
    }
    case 'json': {
      const loadedMs = performance.now();
      const rows = JSON.parse(fs.readFileSync(path.join(dir, RESTART_FILES.json), 'utf8')) as Probed[];
      const map = new Map<number, Probed>();
      for (const r of rows) map.set(r.id, r);
      const openedMs = performance.now();
      return { value: map.get(id)!, loadedMs, openedMs, readyMs: openedMs, next: () => map.get(neighbour(id))!, close: () => map.clear() };
    }
    case 'lmdb': {
      const { open } = require('lmdb') as typeof import('lmdb');
      const loadedMs = performance.now();
      const db = open<Probed, number>({ path: path.join(dir, RESTART_FILES.lmdb), compression: false });
      const openedMs = performance.now();
      const value = db.get(id);
      if (value === undefined) throw new Error(`restart probe: key ${id} missing from lmdb`);
      return { value, loadedMs, openedMs, readyMs: openedMs, next: () => db.get(neighbour(id))!, close: () => db.close() };
    }
    default:
      throw new Error(`restart probe: unknown store ${store}`);
  }
}

async function main(): Promise<void> {
  const [store = '', dir = '', idText = '0'] = process.argv.slice(2);
  const startMs = performance.now();
  const id = Number(idText);
  const { value, loadedMs, openedMs, readyMs, next, close } = firstGet(store, dir, id);
  const firstGetMs = performance.now();
  if (value.id !== id) throw new Error(`restart probe: ${store} returned record ${value.id} for id ${id}`);
  const t = performance.now();
  const second = next();
  const secondGetMs = performance.now() - t;
  if (second.id !== neighbour(id)) throw new Error(`restart probe: ${store} returned record ${second.id} for id ${neighbour(id)}`);
  await close();
  process.stdout.write(`${RESULT_MARKER}${JSON.stringify({ startMs, loadedMs, openedMs, readyMs, firstGetMs, secondGetMs })}\n`);
}

main().catch((err: unknown) => {
  process.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exitCode = 1;
});
