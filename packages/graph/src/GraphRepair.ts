import type { PilePointer } from '@pile/core';
import { TOMBSTONE, capacityOf, findSlot, slotIndex } from './AdjacencyTable';
import { PointerSet } from './PointerSet';
import { A_LIVE, A_SLOTS, A_USED, G_EDGES, G_FIRST, G_NODES, N_DATA, N_IN, N_NEXT, N_OUT, N_PREV, N_WORDS, OUT_WIDTH } from './RawLayout';
import { OP_ADD_NODE, OP_EDGE, OP_REMOVE_NODE, TAG_IN, TAG_NODE, TAG_OUT } from './RawLayout';
import type { Intent, RawStructure } from './RawStructure';
import type { NodeTables } from './NodeTables';
import { safeDelete, safeHas } from './SafeOps';

/** The graph's blocks as the scan found them. */
interface Found {
  /** Node headers. */
  readonly headers: number[];
  /** Adjacency tables, as a set and in scan order. */
  readonly tables: PointerSet;
  readonly tableList: number[];
}

/** The nodes that stay, as a set and in scan order (the order of the rebuilt node list). */
interface Live {
  readonly set: PointerSet;
  readonly list: number[];
}

/**
 * Rebuilds everything derivable from the node headers and out-tables, found by a scan of the
 * pile: finishes an interrupted deleteNode, drops edges to nodes that are gone, rebuilds every
 * in-table, the node list and the counters, and frees blocks no node references. Each phase
 * below is one function; the mark is cleared last, so a kill during a repair repairs again.
 */
export function repairGraph(raw: RawStructure, tables: NodeTables): void {
  const intent = raw.startRepair();
  const found = findBlocks(raw);
  const live = decideLive(raw, tables, found, intent);
  const { kept, edges } = cleanOutTables(raw, found, live);
  freeIntentEdgeData(raw, intent, live);
  // 4. Free what no live node references: orphaned tables, dropped headers.
  for (const t of found.tableList) if (!kept.has(t)) raw.pile.delete(t as PilePointer);
  for (const h of found.headers) if (!live.set.has(h)) raw.pile.delete(h as PilePointer);
  rebuildInTables(raw, tables, live);
  relink(raw, live, edges);
}

/** 1. This graph's node headers and tables (the scan frees blocks allocated but never written). */
function findBlocks(raw: RawStructure): Found {
  const found: Found = { headers: [], tables: new PointerSet(), tableList: [] };
  raw.scanBlocks([TAG_NODE, TAG_OUT, TAG_IN], A_SLOTS, (block, tag) => {
    if (tag === TAG_NODE) found.headers.push(block);
    else {
      found.tables.add(block);
      found.tableList.push(block);
    }
  });
  return found;
}

/**
 * 2. Which nodes live: complete header, live data record, not the node being removed. Finishes an
 * interrupted deleteNode (its data and its edges' data) and frees the data of an addNode killed
 * before its node held it.
 */
function decideLive(raw: RawStructure, tables: NodeTables, found: Found, intent: Intent): Live {
  const pile = raw.pile;
  const m = raw.mem;
  const removing = intent.op === OP_REMOVE_NODE ? intent.a : 0;
  const live: Live = { set: new PointerSet(found.headers.length), list: [] };
  for (const h of found.headers) {
    const n = m.at(pile, h as PilePointer, N_WORDS);
    const f = m.f64;
    const dataPtr = f[n + N_DATA]!;
    if (dataPtr > 0 && h !== removing && safeHas(pile, dataPtr)) {
      live.set.add(h);
      live.list.push(h);
    } else if (h === removing) {
      const out = f[n + N_OUT]!;
      if (dataPtr > 0) safeDelete(pile, dataPtr);
      if (out !== 0 && found.tables.has(out)) {
        tables.forEachNeighbor(out as PilePointer, OUT_WIDTH, (_k, of, at) => {
          if (of[at + 1]! > 0) safeDelete(pile, of[at + 1]!);
        });
      }
    }
  }
  if (intent.op === OP_ADD_NODE && intent.d > 0) {
    let referenced = false;
    for (const h of live.list) {
      const n = m.at(pile, h as PilePointer, N_WORDS);
      if (m.f64[n + N_DATA] === intent.d) referenced = true;
    }
    if (!referenced) safeDelete(pile, intent.d);
  }
  return live;
}

/**
 * 3. Detaches tables that are not this graph's, drops out-edges to dead nodes (freeing their data)
 * and recounts every out-table; returns the tables kept and the edges counted.
 */
function cleanOutTables(raw: RawStructure, found: Found, live: Live): { kept: PointerSet; edges: number } {
  const pile = raw.pile;
  const m = raw.mem;
  const kept = new PointerSet(live.list.length * 2);
  let edges = 0;
  for (const h of live.list) {
    const n = m.at(pile, h as PilePointer, N_WORDS);
    const nf = m.f64;
    for (const field of [N_OUT, N_IN]) {
      const t = nf[n + field]!;
      if (t === 0) continue;
      if (!found.tables.has(t) || pile.rawTag(t as PilePointer) !== (field === N_OUT ? TAG_OUT : TAG_IN)) nf[n + field] = 0;
      else kept.add(t);
    }
    const out = nf[n + N_OUT]!;
    if (out === 0) continue;
    const b = m.at(pile, out as PilePointer, A_SLOTS);
    const f = m.f64;
    const cap = capacityOf(m.words, OUT_WIDTH);
    let liveSlots = 0;
    let used = 0;
    for (let i = 0, at = b + A_SLOTS; i < cap; i++, at += OUT_WIDTH) {
      const k = f[at]!;
      if (k === 0) continue;
      used++;
      if (k === TOMBSTONE) continue;
      const d = f[at + 1]!;
      if (!live.set.has(k)) {
        f[at] = TOMBSTONE;
        if (d > 0) safeDelete(pile, d);
        continue;
      }
      if (d !== 0 && !safeHas(pile, d)) f[at + 1] = 0;
      liveSlots++;
    }
    f[b + A_LIVE] = liveSlots;
    f[b + A_USED] = used;
    edges += liveSlots;
  }
  return { kept, edges };
}

/** 3b. Frees the edge data record an interrupted edge operation named, unless its edge holds it. */
function freeIntentEdgeData(raw: RawStructure, intent: Intent, live: Live): void {
  if (intent.op !== OP_EDGE || intent.d <= 0) return;
  const pile = raw.pile;
  const m = raw.mem;
  let holds = false;
  if (live.set.has(intent.a)) {
    const n = m.at(pile, intent.a as PilePointer, N_WORDS);
    const out = m.f64[n + N_OUT]!;
    if (out !== 0) {
      const b = m.at(pile, out as PilePointer, A_SLOTS);
      const slot = findSlot(m.f64, b, capacityOf(m.words, OUT_WIDTH), OUT_WIDTH, intent.b);
      holds = slot >= 0 && m.f64[slotIndex(b, OUT_WIDTH, slot) + 1] === intent.d;
    }
  }
  if (!holds) safeDelete(pile, intent.d);
}

/** 5. Rebuilds every in-table from the out-tables, then frees or shrinks tables left mostly empty. */
function rebuildInTables(raw: RawStructure, tables: NodeTables, live: Live): void {
  const pile = raw.pile;
  const m = raw.mem;
  for (const h of live.list) {
    const n = m.at(pile, h as PilePointer, N_WORDS);
    const inn = m.f64[n + N_IN]!;
    if (inn === 0) continue;
    const b = m.at(pile, inn as PilePointer, A_SLOTS);
    m.f64.fill(0, b + A_LIVE, b + m.words);
  }
  for (const h of live.list) {
    const n = m.at(pile, h as PilePointer, N_WORDS);
    const out = m.f64[n + N_OUT]! as PilePointer;
    if (out === 0) continue;
    m.at(pile, out, A_SLOTS);
    const cap = capacityOf(m.words, OUT_WIDTH);
    for (let i = 0; i < cap; i++) {
      // Re-resolved each time: growing an in-table in between moves this.mem to other blocks.
      const b = m.at(pile, out, A_SLOTS);
      const k = m.f64[b + A_SLOTS + i * OUT_WIDTH]!;
      if (k <= 0) continue;
      tables.ensureRoom(k as PilePointer, N_IN);
      tables.insert(k as PilePointer, N_IN, h, 0);
    }
  }
  for (const h of live.list) {
    tables.compact(h as PilePointer, N_IN);
    tables.compact(h as PilePointer, N_OUT);
  }
}

/** 6. Relinks the node list, writes the counters and clears the mark. */
function relink(raw: RawStructure, live: Live, edges: number): void {
  const pile = raw.pile;
  const m = raw.mem;
  let prev = 0;
  for (const h of live.list) {
    const n = m.at(pile, h as PilePointer, N_WORDS);
    m.f64[n + N_PREV] = prev;
    m.f64[n + N_NEXT] = 0;
    if (prev !== 0) {
      const p = m.at(pile, prev as PilePointer, N_WORDS);
      m.f64[p + N_NEXT] = h;
    }
    prev = h;
  }
  const g = raw.hdr();
  const f = m.f64;
  f[g + G_FIRST] = live.list.length > 0 ? live.list[0]! : 0;
  f[g + G_NODES] = live.list.length;
  f[g + G_EDGES] = edges;
  raw.endAt(f, g);
  m.release();
}
