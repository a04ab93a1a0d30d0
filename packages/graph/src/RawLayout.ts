/**
 * Owner tags and field offsets (in float64 words) of the raw blocks this package keeps in a
 * pile. docs/graph.md describes the same layout; change both together. Every block starts
 * with its magic (the same number as its owner tag) and, except list and graph headers, the
 * pointer of the structure it belongs to, so a recovery scan can tell whose block it is.
 * Each line below declares the words of one block, in order.
 */

/** Layout version written in list and graph headers. */
export const LAYOUT_VERSION = 1;

// Owner tags: 'PGGH', 'PGND', 'PGOA', 'PGIA' (graph) and 'PLHD', 'PLND' (list) as little-endian u32.
export const TAG_GRAPH = 0x48474750, TAG_NODE = 0x444e4750, TAG_OUT = 0x414f4750, TAG_IN = 0x41494750;
export const TAG_LIST = 0x44484c50, TAG_LIST_NODE = 0x444e4c50;

// The words at the same place in list and graph headers, which RawStructure reads for both: the
// magic, the version; H_DIRTY is non-zero while an operation is between its first and last write,
// H_OP says which operation (an OP_ code), and the words from H_INTENT on tell recovery what it
// needs to finish or undo it.
export const H_MAGIC = 0, H_VERSION = 1, H_DIRTY = 5, H_OP = 6, H_INTENT = 7;

// The words at the same place in every other block: its magic, then its structure's header pointer.
export const B_MAGIC = 0, B_OWNER = 1;

// Graph header: magic, version, first node, nodeCount, edgeCount, dirty, op, intent a, b and d.
export const G_MAGIC = H_MAGIC, G_VERSION = H_VERSION, G_FIRST = 2, G_NODES = 3, G_EDGES = 4;
export const G_DIRTY = H_DIRTY, G_OP = H_OP, G_A = H_INTENT, G_B = H_INTENT + 1, G_D = H_INTENT + 2;
export const G_WORDS = 10;

// Graph node: magic, graph, data pointer, out-table, in-table, previous and next node.
export const N_MAGIC = B_MAGIC, N_GRAPH = B_OWNER, N_DATA = 2, N_OUT = 3, N_IN = 4, N_PREV = 5, N_NEXT = 6;
export const N_WORDS = 7;

// Adjacency block: magic, graph, A_LIVE (neighbors present), A_USED (slots not empty: neighbors
// present plus tombstones), then from A_SLOTS on slots of OUT_WIDTH words (neighbor, edge data
// pointer) in an out-table, of IN_WIDTH (neighbor) in an in-table.
export const A_MAGIC = B_MAGIC, A_GRAPH = B_OWNER, A_LIVE = 2, A_USED = 3, A_SLOTS = 4;
export const OUT_WIDTH = 2, IN_WIDTH = 1;

// List header: magic, version, first, last, length, dirty, op, intent node and value.
export const L_MAGIC = H_MAGIC, L_VERSION = H_VERSION, L_FIRST = 2, L_LAST = 3, L_LENGTH = 4;
export const L_DIRTY = H_DIRTY, L_OP = H_OP, L_NODE = H_INTENT, L_VALUE = H_INTENT + 1, L_WORDS = 9;

// List node: magic, list, previous, next, value pointer.
export const LN_MAGIC = B_MAGIC, LN_LIST = B_OWNER, LN_PREV = 2, LN_NEXT = 3, LN_VALUE = 4, LN_WORDS = 5;

// Intents recorded in a header's op word, so that recovery can finish or undo an interrupted
// operation. OP_EDGE: an edge's data record changes hands (add, replace with or without data, remove).
export const OP_NONE = 0, OP_ADD_NODE = 1, OP_REMOVE_NODE = 2, OP_EDGE = 3, OP_LIST_INSERT = 4, OP_LIST_REMOVE = 5;
