import type { Pile } from '@pile/core';

/** What every handle of one list or graph in this process shares. */
export interface SharedState {
  /** Bumped by each structural change, so live iterators notice that what they prefetched may be gone. */
  epoch: number;
  /** Recovery already ran for this structure on this pile handle. */
  repaired: boolean;
}

const states = new WeakMap<Pile, Map<string, SharedState>>();

/** The state of the structure rooted at `root` in `pile`, created on first use. */
export function sharedState(pile: Pile, root: string): SharedState {
  let m = states.get(pile);
  if (m === undefined) {
    m = new Map();
    states.set(pile, m);
  }
  let s = m.get(root);
  if (s === undefined) {
    s = { epoch: 0, repaired: false };
    m.set(root, s);
  }
  return s;
}
