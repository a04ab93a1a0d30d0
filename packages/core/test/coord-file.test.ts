import { expect } from 'chai';
import { spawn, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { STAT_FIELDS } from '../src/alloc/AllocatorCheckpoint';
import { COORD, COORD_FILE_NAME, COORD_MAGIC, COORD_SIZE, COORD_VERSION, CoordFile } from '../src/concurrency/CoordFile';
import { openPile } from '../src';
import { buildCore } from './fixtures/build-core';
import { expectPileError } from './fixtures/expect-error';

const OPENER = path.join(__dirname, 'fixtures', 'coord-opener.js');
/** A word of the spare bytes past the reader table (docs/format.md), used as a test counter. */
const COUNTER_WORD = (COORD.READERS + COORD.READER_SLOTS * COORD.READER_SLOT_SIZE) >>> 2;

function readCoord(dir: string): { u32: Uint32Array; f64: Float64Array; bytes: Buffer } {
  const bytes = fs.readFileSync(path.join(dir, COORD_FILE_NAME));
  const copy = new Uint8Array(bytes).buffer;
  return { u32: new Uint32Array(copy), f64: new Float64Array(copy), bytes };
}

/** One child process holding pile.coord open, talking JSON lines. */
function opener(
  dir: string,
  count: number,
): {
  lines: Promise<Record<string, unknown>>[];
  send(line: string): void;
  end(): Promise<number | null>;
} {
  const child = spawn(process.execPath, [OPENER], {
    env: {
      ...process.env,
      PILE_DIR: dir,
      PILE_SEGMENT_SIZE: String(1 << 20),
      PILE_ID: '77',
      PILE_COUNT: String(count),
      PILE_COUNTER_WORD: String(COUNTER_WORD),
    },
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const resolvers: ((v: Record<string, unknown>) => void)[] = [];
  const lines = [0, 1].map(() => new Promise<Record<string, unknown>>((r) => resolvers.push(r)));
  let buf = '';
  child.stdout.setEncoding('utf8');
  child.stdout.on('data', (c: string) => {
    buf += c;
    let nl: number;
    while ((nl = buf.indexOf('\n')) >= 0) {
      resolvers.shift()?.(JSON.parse(buf.slice(0, nl)) as Record<string, unknown>);
      buf = buf.slice(nl + 1);
    }
  });
  const exited = new Promise<number | null>((r) => child.on('close', (code) => r(code)));
  return {
    lines,
    send: (line) => child.stdin.write(`${line}\n`),
    end: () => {
      child.stdin.end();
      return exited;
    },
  };
}

describe('the coordination file (pile.coord)', function () {
  this.timeout(120_000);
  let dir: string;
  before(() => buildCore());
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pile-coord-'));
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('is laid out by a read-write open and holds the state published at close', () => {
    const pile = openPile({ dir, segmentSize: 1 << 20 });
    for (let i = 0; i < 3000; i++) pile.put({ i, text: 'x'.repeat(i % 700) });
    pile.setRoot('r', pile.put('root'));
    const stats = pile.stats;
    pile.close();
    const { u32, f64, bytes } = readCoord(dir);
    expect(bytes.length).to.equal(COORD_SIZE);
    expect(u32[COORD.MAGIC >>> 2]).to.equal(COORD_MAGIC);
    expect(u32[COORD.VERSION >>> 2]).to.equal(COORD_VERSION);
    expect(u32[COORD.READY >>> 2]).to.equal(1);
    expect(u32[COORD.SEGMENT_SIZE >>> 2]).to.equal(1 << 20);
    expect(u32[COORD.SEGMENT_COUNT >>> 2]).to.equal(stats.segmentCount);
    expect(stats.segmentCount).to.be.greaterThan(1);
    expect(u32[COORD.STATE_VALID >>> 2]).to.equal(1);
    expect(u32[COORD.WRITE_SEQ >>> 2]).to.be.greaterThan(0);
    expect(u32[COORD.CATALOG_SEQ >>> 2], 'a root was set: the catalog moved').to.be.greaterThan(0);
    const counters = COORD.COUNTERS >>> 3;
    expect(f64[counters + STAT_FIELDS.indexOf('objectCount')]).to.equal(stats.objectCount);
    expect(f64[counters + STAT_FIELDS.indexOf('freeBytes')]).to.equal(stats.freeBytes);
    expect(f64[counters + STAT_FIELDS.indexOf('allocatedBytes')]).to.equal(stats.allocatedBytes);
    for (let i = 0; i < stats.segmentCount; i++) expect(u32[(COORD.INCARNATIONS >>> 2) + i], `segment ${i}`).to.equal(1);
    expect(u32[(COORD.INCARNATIONS >>> 2) + stats.segmentCount]).to.equal(0);
    // The same pile reopened: laid out afresh (no process had it open), same published figures.
    const again = openPile({ dir });
    expect(again.stats.objectCount).to.equal(stats.objectCount);
    again.close();
    expect(readCoord(dir).u32[COORD.SEGMENT_COUNT >>> 2]).to.equal(stats.segmentCount);
  });

  it('is never created nor written by a read-only open', () => {
    const pile = openPile({ dir, segmentSize: 1 << 20 });
    const p = pile.put('kept');
    pile.close();
    const before = fs.readFileSync(path.join(dir, COORD_FILE_NAME));
    const ro = openPile({ dir, readonly: true });
    expect(ro.get(p)).to.equal('kept');
    ro.close();
    expect(fs.readFileSync(path.join(dir, COORD_FILE_NAME)).equals(before)).to.equal(true);
    fs.rmSync(path.join(dir, COORD_FILE_NAME));
    const ro2 = openPile({ dir, readonly: true });
    expect(ro2.get(p)).to.equal('kept');
    ro2.close();
    expect(fs.existsSync(path.join(dir, COORD_FILE_NAME))).to.equal(false);
  });

  it('is laid out again when no live process has it, whatever it held', () => {
    fs.mkdirSync(dir, { recursive: true });
    fs.writeFileSync(path.join(dir, COORD_FILE_NAME), Buffer.alloc(5000, 0xab));
    const a = CoordFile.openWriter(dir, 1 << 20, 5);
    expect(a.first).to.equal(true);
    expect(a.u32[COORD.PILE_ID >>> 2]).to.equal(5);
    expect(a.u32[COORD.MAGIC >>> 2]).to.equal(COORD_MAGIC);
    a.close();
    // Another pile id in the file, nobody holding it: laid out for the new one.
    const b = CoordFile.openWriter(dir, 1 << 20, 6);
    expect(b.first).to.equal(true);
    expect(b.u32[COORD.PILE_ID >>> 2]).to.equal(6);
    b.close();
  });

  it('refuses a live layout of another pile or another version', () => {
    const a = CoordFile.openWriter(dir, 1 << 20, 5);
    a.initDone();
    try {
      expectPileError(() => CoordFile.openWriter(dir, 1 << 20, 6), 'PILE_CORRUPT', 'pile id');
      a.u32[COORD.VERSION >>> 2] = COORD_VERSION + 1;
      expectPileError(() => CoordFile.openWriter(dir, 1 << 20, 5), 'PILE_FORMAT_VERSION', 'layout version');
      a.u32[COORD.VERSION >>> 2] = COORD_VERSION;
      const b = CoordFile.openWriter(dir, 1 << 20, 5);
      expect(b.first, 'a second open in this process joins the live layout').to.equal(false);
      b.close();
    } finally {
      a.close();
    }
  });

  it('is left aside by a process that can not map it as shared memory (--jitless): the pile opens and writes without it', () => {
    const dist = JSON.stringify(path.join(__dirname, '..', 'dist', 'index.js'));
    const script = `const { openPile } = require(${dist}); const p = openPile({ dir: process.argv[1], segmentSize: 1 << 20 }); const q = p.put('no wasm'); p.close(); process.stdout.write(String(q));`;
    const r = spawnSync(process.execPath, ['--jitless', '-e', script, dir], { encoding: 'utf8' });
    expect(r.status, r.stderr).to.equal(0);
    const pile = openPile({ dir });
    expect(pile.get(Number(r.stdout) as never)).to.equal('no wasm');
    expect(pile.lastRecovery.ran, 'closed cleanly').to.equal(false);
    pile.close();
  });

  it('is laid out exactly once by four processes opening it at the same time, and their mutex is one', async () => {
    const count = 20_000;
    const children = [0, 1, 2, 3].map(() => opener(dir, count));
    const opened = await Promise.all(children.map((c) => c.lines[0]!));
    expect(opened.filter((o) => o.first === true)).to.have.length(1);
    children.forEach((c) => c.send('count'));
    await Promise.all(children.map((c) => c.lines[1]!));
    expect(readCoord(dir).u32[COUNTER_WORD]).to.equal(4 * count);
    expect(await Promise.all(children.map((c) => c.end()))).to.deep.equal([0, 0, 0, 0]);
    // All closed: the next opener lays it out again.
    const next = CoordFile.openWriter(dir, 1 << 20, 77);
    expect(next.first).to.equal(true);
    next.close();
  });
});
