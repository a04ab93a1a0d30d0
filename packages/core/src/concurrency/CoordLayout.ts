// The layout of pile.coord (docs/format.md, "The coordination file"): the one place its offsets are
// written down. It imports nothing, so that CoordFile and the modules CoordFile imports (TurnLock,
// ReaderTable) all read them from here without an import cycle.

/**
 * 9: the undo log of the write in progress (UndoLog.ts); 8: the writer turn's word (OWNER) and a
 * liveness mutex per open (LIVES) in place of the writer mutex; 7: the retired list and the reuse
 * generation (deferred reuse); 6: the boot that left the rows
 * live and the tail at the last fold of the tail's counters (an opener after a kill recovers from
 * the rows); 5: the reader table, epoch and session count; 4: the turn number and each segment's
 * last turn (a dead holder's repair rescans only its segments); 3: before them.
 */
export const COORD_VERSION = 9;
/** The head of the file (all but the rows): laid out afresh, with disk space. */
export const HEAD_SIZE = 262144;

/** Byte offsets (docs/format.md). */
export const COORD = {
  MAGIC: 0,
  VERSION: 4,
  /** 1 once laid out by an opener that held the init lock; 0 while (or if killed while) laying out. */
  READY: 8,
  SEGMENT_SIZE: 12,
  PILE_ID: 16,
  FILE_SIZE: 20,
  /** The boot id (ASCII, zero-padded) of the opener that loaded the rows, once they are complete; zeros until then. */
  BOOT: 24,
  /** CRC32 of bytes 0-7 and 12-59 (the header without READY, the boot id), written with the boot id. */
  HEAD_CRC: 60,
  /** u32: the writer turn's word (TurnLock): 0 free, else the holder's open and generation, bit 31 when a thread sleeps for it. */
  OWNER: 64,
  WRITE_SEQ: 128,
  CATALOG_SEQ: 132,
  SEGMENT_COUNT: 136,
  /** 1 when the allocator state below is the one of now; 0 while a holder that died has not been repaired. */
  STATE_VALID: 140,
  /** Threads waiting for (or about to wait for) the writer turn: a holder that sees it non-zero hands the turn over. */
  WAITERS: 144,
  /** The number of the turn now held or last held: each take of the turn moves it on (0 is skipped). */
  TURN: 148,
  /** The turn of the holder whose death is being repaired: segments last touched by it or later are rescanned. */
  REPAIR_FROM: 152,
  /** 1 while a repair that rewrites every row (PileFiles.repairPile) runs or ran unfinished: the next repair must too. */
  FULL_REPAIR: 156,
  /** f64: the body a growing set() is writing, until its journal links it (0: none); a repair frees it if nothing links it. */
  PENDING_BODY: 160,
  /** 3 f64: the tail (tailAddr, tailEnd, tailGen) as the last completed write of the turn left it (WriterTurn.completed). */
  LAST_TAIL: 168,
  COUNTERS: 192,
  /** f64 slots of COUNTERS: STAT_FIELDS, then genFloor. */
  COUNTER_SLOTS: 32,
  /** f64: the tail when the tail's counters were last folded into its row (SegmentRows.foldTail): what lies from it to the tail is not counted in the row. */
  FOLD_TAIL: 448,
  /** f64: the epoch, moved on by the holder of the writer turn (ReaderTable.advance); kept when the file is laid out again. */
  EPOCH: 512,
  /** u32: read sessions open (ReaderTable), dead ones included until a writer clears them; kept when laid out again. */
  SESSIONS: 520,
  /** f64: the newest retired block (RetiredList), 0: none; zeroed when laid out again (an unclean open's recovery frees them). */
  RETIRED_HEAD: 528,
  /** u32: moved on each time a writer gives up the pin of live read sessions (ReaderTable.breakPins); moved on when laid out again. */
  REUSE_GEN: 536,
  /** u32: moved on at each layout; a liveness mutex stamped otherwise is made afresh by its next claim (TurnLock). */
  LIVES_STAMP: 540,
  /** u32: the undo log's state (UndoLog.ts): 0 not to be trusted (a repair rescans what the dead turn stamped), n + 1 with n entries. */
  UNDO: 544,
  /** The undo log's entries, 16 bytes each up to MARKS: f64 the place (a pile address, or minus a byte offset of this file), u32 x2 its old bytes. */
  UNDO_LOG: 640,
  MARKS: 4096,
  INCARNATIONS: 20480,
  READERS: 86016,
  READER_SLOTS: 1024,
  READER_SLOT_SIZE: 32,
  /** u32 per segment: the turn that last wrote into it (Allocator.touched). */
  TOUCHED: 131072,
  /** Per reader-table slot, 64 bytes: the liveness mutex its read-write open holds while open, its claim generation, its layout stamp (TurnLock). */
  LIVES: 196608,
  /** Segment i's row (SegmentRows.ts) at ROWS + i * ROW * 8. */
  ROWS: HEAD_SIZE,
} as const;

/**
 * A slot of COORD.LIVES, one per reader-table slot (TurnLock): the liveness mutex at 0 (40 bytes on
 * x86-64 glibc), the u32 claim generation at GEN, the u32 layout stamp at STAMP (a slot whose stamp
 * is not COORD.LIVES_STAMP's has a mutex not yet made in this layout).
 */
export const LIFE = { SIZE: 64, GEN: 48, STAMP: 52 } as const;

/**
 * The writer turn's word at COORD.OWNER (TurnLock): 0 when free; else the holder's slot, 1-based,
 * in bits 0 to ID_BITS - 1, the slot's claim generation in bits 11-30 (GEN_MASK after the shift:
 * a dead holder's id is never a new open's), and WAITER, bit 31, while a thread sleeps on it.
 */
export const OWNER_WORD = { WAITER: 0x80000000, ID_BITS: 11, ID_MASK: (1 << 11) - 1, GEN_MASK: 0xfffff } as const;
