// The allocator state of one segment (pile format 4, docs/format.md "Segment rows"): the heads of its
// free lists by size class, then its counters, as f64 slots of one row. A segment's free lists only
// ever link blocks of that segment, so its row is correct as long as the segment is not written:
// a checkpoint saves the rows of the segments written since the one before, and recovery takes
// every other segment's row from pile.meta and rebuilds the written ones by walking them alone.

/** Bytes of its blocks in use or reserved; the slots before it are the list heads of the size classes (Allocator checks that they fit). */
export const R_ALLOC = 212;
/** Bytes of its blocks walked (used, reserved and free): its free bytes are R_SPAN - R_ALLOC. */
export const R_SPAN = 213;
/** Bytes of the payloads of its used blocks. */
export const R_UTIL = 214;
/** Records, links and internal blocks (catalogs, journals) among its used blocks (bodies are none). */
export const R_OBJ = 215;
export const R_LINK = 216;
export const R_INT = 217;
/** f64 slots per row (1,792 bytes; slots 218-223 unused). */
export const ROW = 224;
