import { expect } from 'chai';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { openPile } from '../src';

// A read-only pile maps its segments private copy-on-write: a store into a Buffer it handed out
// (rawBuffer) must neither kill the process, as a store into a PROT_READ mapping would, nor reach
// the files.

describe('read-only pile mappings', () => {
  let dir: string;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pile-ro-map-'));
  });
  afterEach(() => {
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('a store into a read-only rawBuffer stays in the process and never reaches the file', () => {
    const writer = openPile({ dir, segmentSize: 1 << 20 });
    const ptr = writer.allocRaw(64, 7);
    writer.rawBuffer(ptr).fill(0x11);
    writer.close();

    const reader = openPile({ dir, readonly: true });
    const view = reader.rawBuffer(ptr);
    view.fill(0x22);
    expect(view[0]).to.equal(0x22);
    reader.close();

    const again = openPile({ dir });
    expect([...again.rawBuffer(ptr)].every((b) => b === 0x11)).to.equal(true);
    expect(again.verify().ok).to.equal(true);
    again.close();
  });
});
