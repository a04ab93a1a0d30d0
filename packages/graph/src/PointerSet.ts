import { hashPointer } from './AdjacencyTable';

/**
 * A growable set of pointers in one Float64Array (open addressing, linear probing, no
 * removal): transient bookkeeping such as a traversal's visited set, kept out of the V8
 * object graph so that visiting millions of nodes allocates no per-node JS objects.
 */
export class PointerSet {
  private keys: Float64Array;
  private mask: number;
  /** Members. */
  size = 0;

  constructor(expected = 16) {
    let c = 16;
    while (c < expected * 2) c *= 2;
    this.keys = new Float64Array(c);
    this.mask = c - 1;
  }

  /** Adds `p` (a positive number); false when it was a member already. */
  add(p: number): boolean {
    if ((this.size + 1) * 4 > this.keys.length * 3) this.grow();
    const i = this.slotOf(p);
    if (this.keys[i] === p) return false;
    this.keys[i] = p;
    this.size++;
    return true;
  }

  has(p: number): boolean {
    return this.keys[this.slotOf(p)] === p;
  }

  /** The slot holding `p`, or the empty slot where it would go. */
  private slotOf(p: number): number {
    const keys = this.keys;
    const mask = this.mask;
    let i = hashPointer(p) & mask;
    for (;;) {
      const k = keys[i]!;
      if (k === p || k === 0) return i;
      i = (i + 1) & mask;
    }
  }

  private grow(): void {
    const old = this.keys;
    this.keys = new Float64Array(old.length * 2);
    this.mask = this.keys.length - 1;
    this.size = 0;
    for (let i = 0; i < old.length; i++) {
      const k = old[i]!;
      if (k !== 0) this.add(k);
    }
  }
}
