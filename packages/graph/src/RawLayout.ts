/**
 * Owner tags and field offsets (in float64 words) of the raw blocks this package keeps in a
 * pile. docs/graph.md describes the same layout; change both together. Every block starts
 * with its magic (the same number as its owner tag) and, except list and graph headers, the
 * pointer of the structure it belongs to, so a recovery scan can tell whose block it is.
 * Each block's words are declared in one line, in order, from offset 0; the name after the last
 * word (`*_WORDS`) is the block's size in words.
 */

/** Layout version written in list and graph headers. */
export const LAYOUT_VERSION = 1;

// Owner tags: 'PGGH', 'PGND', 'PGOA', 'PGIA' (graph) and 'PLHD', 'PLND' (list) as little-endian u32.
export const [TAG_GRAPH, TAG_NODE, TAG_OUT, TAG_IN] = [0x48474750, 0x444e4750, 0x414f4750, 0x41494750];
export const [TAG_LIST, TAG_LIST_NODE] = [0x44484c50, 0x444e4c50];

// The words at the same place in list and graph headers, which RawStructure reads for both: the
// magic, the version; H_DIRTY is non-zero while an operation is between its first and last write,
// H_OP says which operation (an OP_ code), and the words from H_INTENT on tell recovery what it
// needs to finish or undo it.
export const [H_MAGIC, H_VERSION] = [0, 1];
export const [H_DIRTY, H_OP, H_INTENT] = [5, 6, 7];

// The words at the same place in every other block: its magic, then its structure's header pointer.
export const [B_MAGIC, B_OWNER] = [0, 1];

// Graph header: magic, version, first node, nodeCount, edgeCount, dirty, op, intent a, b and d.
export const [G_MAGIC, G_VERSION, G_FIRST, G_NODES, G_EDGES, G_DIRTY, G_OP, G_A, G_B, G_D, G_WORDS] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10];

// Graph node: magic, graph, data pointer, out-table, in-table, previous and next node.
export const [N_MAGIC, N_GRAPH, N_DATA, N_OUT, N_IN, N_PREV, N_NEXT, N_WORDS] = [0, 1, 2, 3, 4, 5, 6, 7];

// Adjacency block: magic, graph, A_LIVE (neighbors present), A_USED (slots not empty: neighbors
// present plus tombstones), then from A_SLOTS on slots of OUT_WIDTH words (neighbor, edge data
// pointer) in an out-table, of IN_WIDTH (neighbor) in an in-table.
export const [A_MAGIC, A_GRAPH, A_LIVE, A_USED, A_SLOTS] = [0, 1, 2, 3, 4];
export const [OUT_WIDTH, IN_WIDTH] = [2, 1];

// List header: magic, version, first, last, length, dirty, op, intent node and value.
export const [L_MAGIC, L_VERSION, L_FIRST, L_LAST, L_LENGTH, L_DIRTY, L_OP, L_NODE, L_VALUE, L_WORDS] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9];

// List node: magic, list, previous, next, value pointer.
export const [LN_MAGIC, LN_LIST, LN_PREV, LN_NEXT, LN_VALUE, LN_WORDS] = [0, 1, 2, 3, 4, 5];

// Intents recorded in a header's op word, so that recovery can finish or undo an interrupted
// operation. OP_EDGE: an edge's data record changes hands (add, replace with or without data, remove).
export const [OP_NONE, OP_ADD_NODE, OP_REMOVE_NODE, OP_EDGE, OP_LIST_INSERT, OP_LIST_REMOVE] = [0, 1, 2, 3, 4, 5];
