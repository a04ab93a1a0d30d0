import { expect } from 'chai';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';

const root = path.join(__dirname, '..', '..', '..');
const guide = path.join(root, 'docs', 'guide.md');
// Snippets live inside the demo package so that '@pile/core', '@pile/cache', '@pile/graph' and zod resolve.
const outDir = path.join(__dirname, '..', '.guide-snippets');

function snippets(): { line: number; code: string }[] {
  const text = fs.readFileSync(guide, 'utf8');
  const out: { line: number; code: string }[] = [];
  const re = /^```ts\n([\s\S]*?)^```$/gm;
  for (let m = re.exec(text); m !== null; m = re.exec(text)) {
    out.push({ line: text.slice(0, m.index).split('\n').length, code: m[1]! });
  }
  return out;
}

describe('docs/guide.md snippets', function () {
  this.timeout(60_000);
  const all = snippets();

  before(() => fs.mkdirSync(outDir, { recursive: true }));
  after(() => fs.rmSync(outDir, { recursive: true, force: true }));

  it('the guide has runnable snippets', () => {
    expect(all.length).to.be.greaterThan(4);
  });

  for (const { line, code } of all) {
    it(`the snippet at docs/guide.md:${line} runs without error`, () => {
      const file = path.join(outDir, `snippet-${line}.ts`);
      fs.writeFileSync(file, code);
      const r = spawnSync(process.execPath, ['-r', 'ts-node/register/transpile-only', file], { cwd: root, encoding: 'utf8' });
      expect(r.status, `${r.stdout}\n${r.stderr}`).to.equal(0);
    });
  }
});
