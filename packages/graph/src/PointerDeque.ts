/**
 * A growable queue / stack of (pointer, depth) pairs in one Float64Array: the frontier of a
 * traversal, kept out of the V8 object graph.
 */
export class PointerDeque {
  private buf = new Float64Array(64);
  private head = 0;
  private tail = 0;

  get length(): number {
    return (this.tail - this.head) >>> 1;
  }

  push(p: number, depth: number): void {
    if (this.tail + 2 > this.buf.length) this.grow();
    this.buf[this.tail++] = p;
    this.buf[this.tail++] = depth;
  }

  /** Pointer at the front (queue order); read its depth with {@link frontDepth} before shifting. */
  front(): number {
    return this.buf[this.head]!;
  }

  frontDepth(): number {
    return this.buf[this.head + 1]!;
  }

  shift(): void {
    this.head += 2;
    if (this.head === this.tail) this.head = this.tail = 0;
  }

  /** Pointer at the back (stack order). */
  back(): number {
    return this.buf[this.tail - 2]!;
  }

  backDepth(): number {
    return this.buf[this.tail - 1]!;
  }

  pop(): void {
    this.tail -= 2;
    if (this.head === this.tail) this.head = this.tail = 0;
  }

  private grow(): void {
    const live = this.tail - this.head;
    // Compact when at least half the buffer is consumed queue space; double otherwise.
    const next = live * 2 <= this.buf.length ? this.buf : new Float64Array(this.buf.length * 2);
    next.copyWithin(0, this.head, this.tail);
    if (next !== this.buf) next.set(this.buf.subarray(this.head, this.tail));
    this.buf = next;
    this.head = 0;
    this.tail = live;
  }
}
