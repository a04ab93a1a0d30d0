/**
 * Owner tags and field offsets (in float64 words) of the raw blocks this package keeps in a
 * pile. docs/graph.md describes the same layout; change both together. Every block starts
 * with its magic (the same number as its owner tag) and, except list and graph headers, the
 * pointer of the structure it belongs to, so a recovery scan can tell whose block it is.
 */

/** Layout version written in list and graph headers. */
export const LAYOUT_VERSION = 1;

// Owner tags ('PGGH', 'PGND', 'PGOA', 'PGIA', 'PLHD', 'PLND' as little-endian u32).
export const TAG_GRAPH = 0x48474750;
export const TAG_NODE = 0x444e4750;
export const TAG_OUT = 0x414f4750;
export const TAG_IN = 0x41494750;
export const TAG_LIST = 0x44484c50;
export const TAG_LIST_NODE = 0x444e4c50;

// Graph header.
export const G_MAGIC = 0;
export const G_VERSION = 1;
export const G_FIRST = 2;
export const G_NODES = 3;
export const G_EDGES = 4;
/** Non-zero while an operation is between its first and last write. */
export const G_DIRTY = 5;
export const G_OP = 6;
export const G_A = 7;
export const G_B = 8;
export const G_D = 9;
export const G_WORDS = 10;

// Graph node header.
export const N_MAGIC = 0;
export const N_GRAPH = 1;
export const N_DATA = 2;
export const N_OUT = 3;
export const N_IN = 4;
export const N_PREV = 5;
export const N_NEXT = 6;
export const N_WORDS = 7;

// Adjacency block: header, then slots of `width` words (neighbor, and for out-blocks the edge data).
export const A_MAGIC = 0;
export const A_GRAPH = 1;
/** Neighbors present. */
export const A_LIVE = 2;
/** Slots not empty: neighbors present plus tombstones. */
export const A_USED = 3;
export const A_SLOTS = 4;
export const OUT_WIDTH = 2;
export const IN_WIDTH = 1;

// List header.
export const L_MAGIC = 0;
export const L_VERSION = 1;
export const L_FIRST = 2;
export const L_LAST = 3;
export const L_LENGTH = 4;
export const L_DIRTY = 5;
export const L_OP = 6;
export const L_NODE = 7;
export const L_VALUE = 8;
export const L_WORDS = 9;

// List node.
export const LN_MAGIC = 0;
export const LN_LIST = 1;
export const LN_PREV = 2;
export const LN_NEXT = 3;
export const LN_VALUE = 4;
export const LN_WORDS = 5;

// Intents recorded in a header's op word, so that recovery can finish or undo an interrupted operation.
export const OP_NONE = 0;
export const OP_ADD_NODE = 1;
export const OP_REMOVE_NODE = 2;
/** An edge's data record changes hands (add, replace with or without data, remove). */
export const OP_EDGE = 3;
export const OP_LIST_INSERT = 4;
export const OP_LIST_REMOVE = 5;
