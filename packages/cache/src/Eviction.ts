import { E_CREATED } from './EntryFormat';
import type { PileMemory } from './PileMemory';
import type { SlotIndex } from './SlotIndex';

/** Eviction candidates a table keeps between evictions. */
const EVICTION_POOL = 16;
/** Entries an eviction samples afresh (besides its pool). */
export const EVICTION_SAMPLES = 3;

/**
 * The choice of what a table evicts under memory pressure: the lowest-priority, then oldest,
 * entry among `samples` freshly sampled live entries and the best candidates kept from earlier
 * evictions (a pool of {@link EVICTION_POOL}, as Redis keeps one). The age lives in the entry
 * record, so each sample costs a random read of the pile, and the pool gets the choice of many
 * samples for the reads of a few. Typed arrays, no per-entry objects.
 */
export class EvictionPool {
  private idx: SlotIndex | undefined = undefined;
  private n = 0;
  private readonly slot = new Float64Array(EVICTION_POOL);
  private readonly ptr = new Float64Array(EVICTION_POOL);
  private readonly prio = new Int32Array(EVICTION_POOL);
  private readonly created = new Float64Array(EVICTION_POOL);

  /**
   * The slot of `idx` to evict; `idx` must hold a live entry. A pooled candidate is used only
   * while its slot still holds the same record; a new index (a resize) empties the pool.
   */
  pick(idx: SlotIndex, mem: PileMemory, samples: number): number {
    if (this.idx !== idx) {
      this.idx = idx;
      this.n = 0;
    }
    for (;;) {
      this.sample(idx, mem, samples);
      for (;;) {
        let best = -1;
        for (let k = 0; k < this.n; k++) {
          if (best < 0 || this.before(k, this.prio[best]!, this.created[best]!)) best = k;
        }
        if (best < 0) break;
        const slot = this.slot[best]!;
        const held = idx.ptr(slot) === this.ptr[best];
        this.take(best);
        if (held) return slot;
      }
      samples = Math.max(1, samples);
    }
  }

  /** True when candidate k is more evictable than an entry of priority `prio` created at `created`. */
  private before(k: number, prio: number, created: number): boolean {
    return this.prio[k]! < prio || (this.prio[k] === prio && this.created[k]! < created);
  }

  /**
   * Adds `samples` live entries to the pool: those that follow one random slot (the entries are as
   * random, since slots are in hash order, and the index is read at one place instead of `samples`).
   */
  private sample(idx: SlotIndex, mem: PileMemory, samples: number): void {
    const cap = idx.capacity;
    let i = Math.floor(Math.random() * cap);
    for (let n = 0, step = 0; n < samples && step < cap; step++, i = i + 1 === cap ? 0 : i + 1) {
      const p = idx.ptr(i);
      if (p <= 0) continue;
      n++;
      let known = false;
      for (let k = 0; k < this.n; k++) {
        if (this.ptr[k] === p) {
          this.slot[k] = i; // a backward shift may have moved it
          known = true;
        }
      }
      if (known) continue;
      const prio = idx.priority(i);
      mem.locate(p);
      const created = mem.view.getFloat64(mem.off + E_CREATED, true);
      let at = this.n;
      if (at === EVICTION_POOL) {
        // Full: the new candidate replaces the pool's least evictable one, if it is more evictable.
        at = 0;
        for (let k = 1; k < EVICTION_POOL; k++) {
          if (this.prio[k]! > this.prio[at]! || (this.prio[k] === this.prio[at] && this.created[k]! > this.created[at]!)) at = k;
        }
        if (!(prio < this.prio[at]! || (prio === this.prio[at] && created < this.created[at]!))) continue;
      } else this.n++;
      this.slot[at] = i;
      this.ptr[at] = p;
      this.prio[at] = prio;
      this.created[at] = created;
    }
  }

  /** Takes candidate k out of the pool (the last one moves into its place). */
  private take(k: number): void {
    const last = --this.n;
    this.slot[k] = this.slot[last]!;
    this.ptr[k] = this.ptr[last]!;
    this.prio[k] = this.prio[last]!;
    this.created[k] = this.created[last]!;
  }
}
