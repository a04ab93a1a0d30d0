import { PileError, isPileError, type PilePointer } from '@pile/core';
import { capacityFor, capacityOf, findSlot, hasRoom, insertKey, removeSlot, wordsFor } from './AdjacencyTable';
import { A_GRAPH, A_LIVE, A_MAGIC, A_SLOTS, IN_WIDTH, N_OUT, OUT_WIDTH, TAG_IN, TAG_OUT } from './RawLayout';
import type { RawStructure } from './RawStructure';

/** Slot width of a node's table `field` (N_OUT / N_IN). */
export function widthOf(field: number): number {
  return field === N_OUT ? OUT_WIDTH : IN_WIDTH;
}

/**
 * The adjacency tables of a graph's nodes as blocks: making room, rebuilding into a block of
 * another size, inserting and removing one neighbor, freeing or shrinking a mostly empty table.
 * Each method names a node and its table `field` (N_OUT / N_IN) and resolves both itself, since
 * an allocation in between may have moved {@link RawStructure.mem} to another segment.
 */
export class NodeTables {
  constructor(private readonly raw: RawStructure) {}

  /** Neighbors present in table `block` (leaves this.raw.mem on it). */
  liveOf(block: PilePointer): number {
    const m = this.raw.mem;
    const b = m.at(this.raw.pile, block, A_SLOTS);
    return m.f64[b + A_LIVE]!;
  }

  /**
   * Calls `visit(key, f, at)` for each neighbor in table `block` of slot width `width`: `f[at]` is
   * the neighbor, `f[at + 1]` an out-slot's edge data. `f` and `at` stay valid when `visit` resolves
   * other blocks (blocks never move), so it may change other tables, not this one.
   */
  forEachNeighbor(block: PilePointer, width: number, visit: (key: number, f: Float64Array, at: number) => void): void {
    forEachSlot(this.raw, block, width, visit);
  }

  /** Makes sure node `id`'s table `field` exists and takes one more neighbor without growing. */
  ensureRoom(id: PilePointer, field: number): void {
    const raw = this.raw;
    const m = raw.mem;
    const n = raw.node(id);
    const block = m.f64[n + field]!;
    if (block === 0) {
      this.rebuild(id, field, 0 as PilePointer, capacityFor(1));
      return;
    }
    const b = m.at(raw.pile, block as PilePointer, A_SLOTS);
    const cap = capacityOf(m.words, widthOf(field));
    if (hasRoom(m.f64, b, cap)) return;
    this.rebuild(id, field, block as PilePointer, capacityFor(m.f64[b + A_LIVE]! + 1));
  }

  /**
   * Copies node `id`'s table `field` into a new block of `capacity` slots, then swings the node's
   * pointer to it (one word: a kill before it leaves the old table in use, after it the new one)
   * and frees the old block.
   * @throws PILE_TOO_LARGE naming the node when the table would not fit in one segment
   */
  rebuild(id: PilePointer, field: number, old: PilePointer, capacity: number): void {
    const raw = this.raw;
    const pile = raw.pile;
    const m = raw.mem;
    const width = widthOf(field);
    const tag = field === N_OUT ? TAG_OUT : TAG_IN;
    let block: PilePointer;
    try {
      block = pile.allocRaw(wordsFor(capacity, width) * 8, tag);
    } catch (err) {
      if (isPileError(err, 'PILE_TOO_LARGE')) {
        throw new PileError(
          'PILE_TOO_LARGE',
          `graph '${raw.name}': node ${id} can not hold ${Math.floor(capacity / 2)} ${field === N_OUT ? 'out' : 'in'}-edges in one segment (${err.message})`,
        );
      }
      throw err;
    }
    const nb = m.at(pile, block, A_SLOTS);
    const nf = m.f64;
    nf[nb + A_GRAPH] = raw.header;
    nf[nb + A_MAGIC] = tag;
    if (old !== 0) this.forEachNeighbor(old, width, (k, of, at) => insertKey(nf, nb, capacity, width, k, width > 1 ? of[at + 1]! : 0));
    const n = raw.node(id);
    m.f64[n + field] = block;
    if (old !== 0) pile.delete(old);
  }

  /** Inserts `key` into node `id`'s table `field` (room made by {@link ensureRoom}). */
  insert(id: PilePointer, field: number, key: number, data: number): void {
    const m = this.raw.mem;
    const n = this.raw.node(id);
    const block = m.f64[n + field]! as PilePointer;
    const width = widthOf(field);
    const b = m.at(this.raw.pile, block, A_SLOTS);
    insertKey(m.f64, b, capacityOf(m.words, width), width, key, data);
  }

  /** Removes `key` from node `id`'s table `field` if present. */
  remove(id: PilePointer, field: number, key: number): void {
    const m = this.raw.mem;
    const n = this.raw.node(id);
    const block = m.f64[n + field]!;
    if (block === 0) return;
    const width = widthOf(field);
    const b = m.at(this.raw.pile, block as PilePointer, A_SLOTS);
    const slot = findSlot(m.f64, b, capacityOf(m.words, width), width, key);
    if (slot >= 0) removeSlot(m.f64, b, width, slot);
  }

  /** Frees an emptied table, or moves a mostly empty one into a smaller block (best effort: skipped when out of space). */
  compact(id: PilePointer, field: number): void {
    const raw = this.raw;
    const m = raw.mem;
    const n = raw.node(id);
    const block = m.f64[n + field]!;
    if (block === 0) return;
    const b = m.at(raw.pile, block as PilePointer, A_SLOTS);
    const live = m.f64[b + A_LIVE]!;
    const cap = capacityOf(m.words, widthOf(field));
    if (live === 0) {
      const n2 = raw.node(id);
      m.f64[n2 + field] = 0;
      raw.pile.delete(block as PilePointer);
    } else if (cap > 16 && live * 8 < cap) {
      try {
        this.rebuild(id, field, block as PilePointer, capacityFor(live));
      } catch (err) {
        if (!isPileError(err, 'PILE_OUT_OF_SPACE')) throw err;
      }
    }
  }
}

/**
 * Calls `visit(key, f, at)` for each neighbor in table `block` of slot width `width`: `f[at]` is
 * the neighbor, `f[at + 1]` an out-slot's edge data. `f` and `at` stay valid when `visit` resolves
 * other blocks (blocks never move), so it may change other tables, not this one.
 */
export function forEachSlot(
  raw: RawStructure,
  block: PilePointer,
  width: number,
  visit: (key: number, f: Float64Array, at: number) => void,
): void {
  const m = raw.mem;
  const b = m.at(raw.pile, block, A_SLOTS);
  const f = m.f64;
  const cap = capacityOf(m.words, width);
  for (let i = 0, at = b + A_SLOTS; i < cap; i++, at += width) {
    const k = f[at]!;
    if (k > 0) visit(k, f, at);
  }
}
