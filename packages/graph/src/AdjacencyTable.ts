import { A_LIVE, A_SLOTS, A_USED } from './RawLayout';

/** Slot key of a removed neighbor; 0 is an empty slot. Pointers are positive. */
export const TOMBSTONE = -1;
/** Smallest table (slots). */
export const MIN_CAPACITY = 2;

/**
 * Open-addressing hash set of neighbor pointers (linear probing, tombstones) laid out in a
 * raw pile block: `[header][slot 0][slot 1]...`, each slot `width` float64 words, the first
 * being the neighbor's pointer. Membership and insertion cost O(1) expected at any degree.
 * Deletion writes a single word (a tombstone), so a kill between two operations never leaves
 * a half-moved entry; tables are rebuilt by copying into a new block when they fill up.
 *
 * Functions take the Float64Array over the block's mapping and the block's base index.
 */
export function hashPointer(p: number): number {
  const lo = p >>> 0;
  const hi = (p / 4294967296) >>> 0;
  let h = Math.imul(lo ^ Math.imul(hi, 0x27d4eb2d), 0x9e3779b1);
  h ^= h >>> 15;
  h = Math.imul(h, 0x85ebca6b);
  return (h ^ (h >>> 13)) >>> 0;
}

/** Slots of a block of `words` payload words. */
export function capacityOf(words: number, width: number): number {
  return Math.floor((words - A_SLOTS) / width);
}

/** Payload words of a table of `capacity` slots. */
export function wordsFor(capacity: number, width: number): number {
  return A_SLOTS + capacity * width;
}

/** Smallest power-of-two capacity that holds `live` neighbors at most half full. */
export function capacityFor(live: number): number {
  let c = MIN_CAPACITY;
  while (c < live * 2) c *= 2;
  return c;
}

/** True when one more insertion keeps the table at most 3/4 used (tombstones count). */
export function hasRoom(f: Float64Array, base: number, capacity: number): boolean {
  return (f[base + A_USED]! + 1) * 4 <= capacity * 3;
}

/** Index of `key`'s slot, or -1. `capacity` must be a power of two and the table must have an empty slot. */
export function findSlot(f: Float64Array, base: number, capacity: number, width: number, key: number): number {
  const mask = capacity - 1;
  const s0 = base + A_SLOTS;
  let i = hashPointer(key) & mask;
  for (let n = 0; n < capacity; n++) {
    const k = f[s0 + i * width]!;
    if (k === key) return i;
    if (k === 0) return -1;
    i = (i + 1) & mask;
  }
  return -1;
}

/**
 * Inserts `key` (known absent; the table has room). Writes the extra words first and the key
 * last, so a slot is never seen holding a key without its data; then the counters.
 */
export function insertKey(f: Float64Array, base: number, capacity: number, width: number, key: number, data: number): void {
  const mask = capacity - 1;
  const s0 = base + A_SLOTS;
  let i = hashPointer(key) & mask;
  for (;;) {
    const at = s0 + i * width;
    const k = f[at]!;
    if (k === 0 || k === TOMBSTONE) {
      if (width > 1) f[at + 1] = data;
      f[at] = key;
      f[base + A_LIVE] = f[base + A_LIVE]! + 1;
      if (k === 0) f[base + A_USED] = f[base + A_USED]! + 1;
      return;
    }
    i = (i + 1) & mask;
  }
}

/** Removes the entry in `slot` (from {@link findSlot}). */
export function removeSlot(f: Float64Array, base: number, width: number, slot: number): void {
  f[base + A_SLOTS + slot * width] = TOMBSTONE;
  f[base + A_LIVE] = f[base + A_LIVE]! - 1;
}

/** Float64 index of the first word of `slot`. */
export function slotIndex(base: number, width: number, slot: number): number {
  return base + A_SLOTS + slot * width;
}
