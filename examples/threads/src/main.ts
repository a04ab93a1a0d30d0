/**
 * A social feed kept in a pile: users with follower edges, posts with reply edges, and the
 * feed as a list. The first run builds it (with a progress bar); every later run maps the same
 * files back, opens the graphs at once and answers from the pile:
 *
 *   node examples/threads/dist/main.js [--users 200000] [--dir <path>] [--rebuild] [--seed 1]
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { SingleBar, Presets } from 'cli-progress';
import { z } from 'zod';
import { openPile, type Pile, type PilePointer } from '@pile/core';
import { openGraph, openList } from '@pile/graph';
// The repository's one seeded PRNG (mulberry32), shared with the tests and benchmarks: a size always builds the same feed.
import { mulberry32 } from '../../../fixtures/prng';

const User = z.object({ handle: z.string(), joined: z.number() });
const Post = z.object({ author: z.number(), text: z.string(), at: z.number() });
const Meta = z.object({ users: z.number(), posts: z.number(), follows: z.number(), buildMs: z.number() });
type User = z.infer<typeof User>;
type Post = z.infer<typeof Post>;

interface Flags {
  users: number;
  dir: string;
  rebuild: boolean;
  seed: number;
}

function parseFlags(argv: string[]): Flags {
  const flags: Flags = { users: 200_000, dir: '', rebuild: false, seed: 1 };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    const value = (): string => {
      const v = argv[++i];
      if (v === undefined) fail(`${a} needs a value`);
      return v;
    };
    if (a === '--users') flags.users = positiveInt(a, value());
    else if (a === '--dir') flags.dir = value();
    else if (a === '--seed') flags.seed = positiveInt(a, value());
    else if (a === '--rebuild') flags.rebuild = true;
    else if (a === '--help' || a === '-h') {
      console.log('usage: node examples/threads/dist/main.js [--users N] [--dir PATH] [--rebuild] [--seed N]');
      process.exit(0);
    } else fail(`unknown flag ${a}`);
  }
  if (flags.dir === '') flags.dir = path.join(__dirname, '..', '.data', `users-${flags.users}`);
  return flags;
}

function positiveInt(flag: string, v: string): number {
  const n = Number(v);
  if (!Number.isSafeInteger(n) || n <= 0) fail(`${flag} expects a positive integer, got ${v}`);
  return n;
}

function fail(message: string): never {
  console.error(`threads: ${message}`);
  process.exit(2);
}

const WORDS = [
  'pile',
  'graph',
  'mmap',
  'heap',
  'pointer',
  'segment',
  'thread',
  'reply',
  'follow',
  'node',
  'edge',
  'restart',
  'fast',
  'gc',
  'pause',
];

function build(pile: Pile, flags: Flags): void {
  const started = Date.now();
  const random = mulberry32(flags.seed);
  const follows = openGraph<User>(pile, 'follows', { nodeSchema: User });
  const posts = openGraph<Post>(pile, 'posts', { nodeSchema: Post });
  const feed = openList<number>(pile, 'feed');
  const n = flags.users;
  const postCount = n;
  const bar = new SingleBar(
    { format: 'building {phase} [{bar}] {percentage}% | {value}/{total} | {eta}s left', etaBuffer: 1000 },
    Presets.shades_classic,
  );
  // Ids only while building: a Float64Array of pointers, not JS objects.
  const users = new Float64Array(n);
  const inDegree = new Uint32Array(n);
  bar.start(n, 0, { phase: 'users  ' });
  for (let i = 0; i < n; i++) {
    users[i] = follows.addNode({ handle: `@user${i}`, joined: 1_600_000_000_000 + i * 1000 });
    if ((i & 1023) === 0) bar.update(i);
  }
  let followCount = 0;
  bar.setTotal(n);
  bar.update(0, { phase: 'follows' });
  for (let i = 0; i < n; i++) {
    // Heavy-tailed out-degree (mean about 9) and popularity skewed to low ids: a few celebrities.
    const k = Math.min(200, 1 + Math.floor(-Math.log(1 - random()) * 8));
    for (let j = 0; j < k; j++) {
      const t = Math.floor(n * random() ** 3);
      if (t === i) continue;
      if (follows.hasEdge(users[i]! as PilePointer, users[t]! as PilePointer)) continue;
      follows.addEdge(users[i]! as PilePointer, users[t]! as PilePointer);
      followCount++;
      inDegree[t]!++;
    }
    if ((i & 1023) === 0) bar.update(i);
  }
  bar.setTotal(postCount);
  bar.update(0, { phase: 'posts  ' });
  const recent: PilePointer[] = [];
  for (let i = 0; i < postCount; i++) {
    const author = Math.floor(n * random() ** 2);
    const words = Array.from({ length: 3 + Math.floor(random() * 6) }, () => WORDS[Math.floor(random() * WORDS.length)]!);
    const post = posts.addNode({ author: users[author]!, text: words.join(' '), at: 1_700_000_000_000 + i * 60_000 });
    if (recent.length > 0 && random() < 0.7) {
      // Replies favour the newest posts, so some threads grow long.
      const parent = recent[recent.length - 1 - Math.floor(random() ** 3 * recent.length)]!;
      posts.addEdge(post, parent);
    }
    recent.push(post);
    if (recent.length > 64) recent.shift();
    feed.append(post);
    if ((i & 1023) === 0) bar.update(i);
  }
  bar.update(postCount);
  bar.stop();
  let star = 0;
  for (let i = 1; i < n; i++) if (inDegree[i]! > inDegree[star]!) star = i;
  pile.setRoot('threads:star', users[star]! as PilePointer);
  const meta = pile.schema('threads:meta', Meta);
  pile.setRoot('threads:meta', meta.put({ users: n, posts: postCount, follows: followCount, buildMs: Date.now() - started }));
  pile.flush();
}

function ms(t0: bigint): string {
  return `${(Number(process.hrtime.bigint() - t0) / 1e6).toFixed(1)} ms`;
}

function main(): void {
  const flags = parseFlags(process.argv.slice(2));
  if (flags.rebuild) fs.rmSync(flags.dir, { recursive: true, force: true });
  let t0 = process.hrtime.bigint();
  const pile = openPile({ dir: flags.dir });
  try {
    const openTime = ms(t0);
    if (pile.getRoot('threads:meta') === undefined) {
      console.log(`building a feed of ${flags.users} users in ${flags.dir}`);
      t0 = process.hrtime.bigint();
      build(pile, flags);
      console.log(`built in ${ms(t0)}`);
    }
    t0 = process.hrtime.bigint();
    const follows = openGraph<User>(pile, 'follows', { nodeSchema: User });
    const posts = openGraph<Post>(pile, 'posts', { nodeSchema: Post });
    const feed = openList<number>(pile, 'feed');
    const meta = pile.schema('threads:meta', Meta).get(pile.getRoot('threads:meta')!);
    console.log(`opened ${flags.dir}: pile ${openTime}${pile.lastRecovery.ran ? ' (recovered after a crash)' : ''}, graphs ${ms(t0)}`);
    console.log(
      `  ${follows.nodeCount} users, ${follows.edgeCount} follows, ${posts.nodeCount} posts, ${posts.edgeCount} replies, feed of ${feed.length} (built in ${(meta.buildMs / 1000).toFixed(1)} s)`,
    );

    // The longest reply thread: from every root post, walk the replies (in-edges) breadth-first.
    t0 = process.hrtime.bigint();
    let best = { root: 0 as PilePointer, deepest: 0 as PilePointer, depth: -1 };
    for (const p of posts.nodes()) {
      if (posts.degree(p, 'out') !== 0 || posts.degree(p, 'in') === 0) continue;
      for (const step of posts.traverse(p, { direction: 'in' })) {
        if (step.depth > best.depth) best = { root: p, deepest: step.node, depth: step.depth };
      }
    }
    const threadTime = ms(t0);
    const chain: PilePointer[] = [];
    for (let p: PilePointer | undefined = best.deepest; p !== undefined; p = posts.neighbors(p, 'out').next().value ?? undefined)
      chain.push(p);
    chain.reverse();
    console.log(`longest reply thread: ${chain.length} posts (found in ${threadTime})`);
    const show = (p: PilePointer, i: number): void => {
      const post = posts.getNode(p);
      console.log(`  ${String(i + 1).padStart(4)}. ${follows.getNode(post.author as PilePointer).handle}: ${post.text}`);
    };
    chain.forEach((p, i) => {
      if (i < 3 || i >= chain.length - 2) show(p, i);
      else if (i === 3) console.log('        ...');
    });

    // A user's followers within two hops: who follows them, and who follows those.
    const star = pile.getRoot('threads:star')!;
    t0 = process.hrtime.bigint();
    let reach = 0;
    for (const step of follows.traverse(star, { direction: 'in', maxDepth: 2 })) if (step.depth > 0) reach++;
    console.log(`${follows.getNode(star).handle}: ${follows.degree(star, 'in')} followers, ${reach} within 2 hops (${ms(t0)})`);

    t0 = process.hrtime.bigint();
    const latest: string[] = [];
    for (const id of feed.reversed()) {
      latest.push(posts.getNode(id as PilePointer).text);
      if (latest.length === 3) break;
    }
    console.log(`latest posts (${ms(t0)}): ${latest.map((t) => JSON.stringify(t)).join(', ')}`);
    const heap = process.memoryUsage();
    console.log(
      `V8 heap used ${(heap.heapUsed / 2 ** 20).toFixed(0)} MB; pile ${(pile.stats.totalBytes / 2 ** 20).toFixed(0)} MB mapped, ${pile.stats.objectCount} records`,
    );
  } finally {
    pile.close();
  }
}

main();
