import { expect } from 'chai';
import { z } from 'zod';
import { openPile, type PilePointer } from '@pile/core';
import { PileList } from '../src';
import { SEGMENT, eachMemoryPile, eachTempDir, expectPileError } from './helpers';

describe('PileList operations', () => {
  const t = eachMemoryPile();

  it('append, prepend and insertAfter keep order both ways', () => {
    const l = PileList.open<string>(t.pile, 'l');
    expect(l.length).to.equal(0);
    expect(l.first).to.equal(undefined);
    expect(l.last).to.equal(undefined);
    const b = l.append('b');
    const a = l.prepend('a');
    const d = l.append('d');
    const c = l.insertAfter(b, 'c');
    const e = l.insertAfter(d, 'e');
    expect([...l]).to.deep.equal(['a', 'b', 'c', 'd', 'e']);
    expect([...l.reversed()]).to.deep.equal(['e', 'd', 'c', 'b', 'a']);
    expect([...l.nodes()]).to.deep.equal([a, b, c, d, e]);
    expect(l.first).to.equal(a);
    expect(l.last).to.equal(e);
    expect(l.next(b)).to.equal(c);
    expect(l.prev(b)).to.equal(a);
    expect(l.prev(a)).to.equal(undefined);
    expect(l.next(e)).to.equal(undefined);
    expect(l.length).to.equal(5);
  });

  it('get and set by node; set grows the value through a link and keeps the node', () => {
    const l = PileList.open<unknown>(t.pile, 'l');
    const n = l.append({ small: 1 });
    const m = l.append('next');
    l.set(n, { big: 'y'.repeat(10000), list: [1, 2, 3] });
    expect(l.get(n)).to.deep.equal({ big: 'y'.repeat(10000), list: [1, 2, 3] });
    expect(l.next(n)).to.equal(m);
    expect(t.pile.stats.linkCount).to.equal(1);
    l.set(n, 0);
    expect(l.get(n)).to.equal(0);
  });

  it('remove unlinks at the front, middle and back, frees space, and the node goes stale', () => {
    const l = PileList.open<number>(t.pile, 'l');
    const base = t.pile.stats.objectCount;
    const nodes = [1, 2, 3, 4, 5].map((v) => l.append(v));
    l.remove(nodes[2]!);
    expect([...l]).to.deep.equal([1, 2, 4, 5]);
    l.remove(nodes[0]!);
    l.remove(nodes[4]!);
    expect([...l]).to.deep.equal([2, 4]);
    expect([...l.reversed()]).to.deep.equal([4, 2]);
    expect(l.first).to.equal(nodes[1]);
    expect(l.last).to.equal(nodes[3]);
    expectPileError(() => l.get(nodes[2]!), 'PILE_STALE_POINTER');
    expectPileError(() => l.remove(nodes[2]!), 'PILE_STALE_POINTER');
    expectPileError(() => l.insertAfter(nodes[0]!, 9), 'PILE_STALE_POINTER');
    l.remove(nodes[1]!);
    l.remove(nodes[3]!);
    expect(l.length).to.equal(0);
    expect(l.first).to.equal(undefined);
    expect(t.pile.stats.objectCount).to.equal(base);
  });

  it('iteration tolerates removing the element just yielded', () => {
    const l = PileList.open<number>(t.pile, 'l');
    for (let i = 0; i < 10; i++) l.append(i);
    const seen: number[] = [];
    for (const n of l.nodes()) {
      const v = l.get(n);
      seen.push(v);
      if (v % 2 === 0) l.remove(n);
    }
    expect(seen).to.deep.equal([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    expect([...l]).to.deep.equal([1, 3, 5, 7, 9]);
  });

  it('rejects nodes of another list and bad options', () => {
    const l = PileList.open<number>(t.pile, 'l');
    const k = PileList.open<number>(t.pile, 'k');
    const x = k.append(1);
    expectPileError(() => l.get(x), 'PILE_INVALID_POINTER', /not an element of list 'l'/);
    expectPileError(() => l.remove(x), 'PILE_INVALID_POINTER');
    expectPileError(() => l.get(t.pile.put('str')), 'PILE_INVALID_POINTER');
    expectPileError(() => PileList.open(t.pile, ''), 'PILE_INVALID_OPTION', /name/);
    expectPileError(() => PileList.open(t.pile, 'l', { schema: 'no' } as never), 'PILE_INVALID_OPTION', /schema/);
    expectPileError(() => PileList.open(t.pile, 'l', { size: 3 } as never), 'PILE_INVALID_OPTION', /size/);
  });

  it('typed values use the schema; a bad value writes nothing', () => {
    const Post = z.object({ text: z.string(), likes: z.number() });
    const l = PileList.open(t.pile, 'posts', { schema: Post });
    const n = l.append({ text: 'hello', likes: 1 });
    l.set(n, { text: 'hello, world', likes: 2 });
    expect(l.get(n)).to.deep.equal({ text: 'hello, world', likes: 2 });
    const objects = t.pile.stats.objectCount;
    expectPileError(() => l.append({ text: 1 } as never), 'PILE_SCHEMA_VIOLATION');
    expect(t.pile.stats.objectCount).to.equal(objects);
    expect(l.length).to.equal(1);
  });
});

describe('PileList persistence', () => {
  const tmp = eachTempDir();

  it('is found again by name after close and reopen, nodes still valid', () => {
    let pile = openPile({ dir: tmp.dir, segmentSize: SEGMENT });
    let l = PileList.open<string>(pile, 'todo');
    const nodes: PilePointer[] = [];
    for (const s of ['x', 'y', 'z']) nodes.push(l.append(s));
    l.remove(nodes[1]!);
    pile.close();
    pile = openPile({ dir: tmp.dir });
    l = PileList.open<string>(pile, 'todo');
    expect([...l]).to.deep.equal(['x', 'z']);
    expect(l.next(nodes[0]!)).to.equal(nodes[2]);
    expect(l.length).to.equal(2);
    l.insertAfter(nodes[0]!, 'y2');
    expect([...l.reversed()]).to.deep.equal(['z', 'y2', 'x']);
    expect(pile.verify().ok).to.equal(true);
    pile.close();
  });
});
