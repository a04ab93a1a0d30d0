import { expect } from 'chai';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import * as ts from 'typescript';

const root = path.join(__dirname, '..', '..', '..');
// Snippets live inside the demo package so that '@pile/core', '@pile/cache', '@pile/graph' and zod resolve.
const outDir = path.join(__dirname, '..', '.doc-snippets');

/** Every document a user reads: README.md and docs/*.md. */
function documents(): string[] {
  return [
    'README.md',
    ...fs
      .readdirSync(path.join(root, 'docs'))
      .filter((f) => f.endsWith('.md'))
      .sort()
      .map((f) => path.join('docs', f)),
  ];
}

/** A snippet that awaits at its top level (as Keyv's calls do) is an ES module. */
function awaitsAtTopLevel(code: string): boolean {
  return /^(?:(?:const|let) [^\n=]+= )?await /m.test(code);
}

/**
 * The ```ts and ```js blocks of a document: TypeScript runs through ts-node, JavaScript as CommonJS;
 * a TypeScript snippet with a top-level await is transpiled to an ES module and run as one.
 */
function snippets(doc: string): { line: number; lang: 'ts' | 'js'; code: string }[] {
  const text = fs.readFileSync(path.join(root, doc), 'utf8');
  const out: { line: number; lang: 'ts' | 'js'; code: string }[] = [];
  const re = /^```(ts|js)\n([\s\S]*?)^```$/gm;
  for (let m = re.exec(text); m !== null; m = re.exec(text)) {
    out.push({ line: text.slice(0, m.index).split('\n').length, lang: m[1] as 'ts' | 'js', code: m[2]! });
  }
  return out;
}

describe('documentation snippets', function () {
  this.timeout(60_000);
  let cwd: string;

  before(() => {
    fs.mkdirSync(outDir, { recursive: true });
    cwd = fs.mkdtempSync(path.join(os.tmpdir(), 'pile-doc-snippets-'));
  });
  after(() => {
    fs.rmSync(outDir, { recursive: true, force: true });
    fs.rmSync(cwd, { recursive: true, force: true });
  });

  it('the guide has runnable snippets, and so do the README, cache.md and graph.md', () => {
    expect(snippets('docs/guide.md').length).to.be.greaterThan(4);
    for (const doc of ['README.md', 'docs/cache.md', 'docs/graph.md']) expect(snippets(doc).length, doc).to.be.greaterThan(0);
  });

  for (const doc of documents()) {
    for (const { line, lang, code } of snippets(doc)) {
      it(`the snippet at ${doc}:${line} runs without error`, () => {
        const base = path.join(outDir, `${doc.replace(/[/.]/g, '-')}-${line}`);
        const esm = lang === 'ts' && awaitsAtTopLevel(code);
        const file = esm ? `${base}.mjs` : `${base}.${lang}`;
        const options = { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 };
        fs.writeFileSync(file, esm ? ts.transpileModule(code, { compilerOptions: options }).outputText : code);
        // Each snippet in a directory of its own, so that its relative paths ('./data') start empty.
        const dir = fs.mkdtempSync(path.join(cwd, 'run-'));
        const args = lang === 'ts' && !esm ? ['-r', require.resolve('ts-node/register/transpile-only'), file] : [file];
        const r = spawnSync(process.execPath, args, {
          cwd: dir,
          encoding: 'utf8',
          env: { ...process.env, TS_NODE_PROJECT: path.join(root, 'tsconfig.json') },
        });
        expect(r.status, `${r.stdout}\n${r.stderr}`).to.equal(0);
      });
    }
  }
});

describe('documentation facts', () => {
  it("architecture.md lists each package's @pile dependencies as its package.json does", () => {
    const text = fs.readFileSync(path.join(root, 'docs', 'architecture.md'), 'utf8');
    const rows = [...text.matchAll(/^\| `(@pile\/[a-z]+)` \| ([^|]*) \|/gm)];
    expect(rows.length).to.be.greaterThan(3);
    for (const [, name, deps] of rows) {
      const dir = path.join(root, 'packages', name!.slice('@pile/'.length));
      if (!fs.existsSync(path.join(dir, 'package.json'))) continue;
      const pkg = JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8')) as { dependencies?: Record<string, string> };
      const actual = Object.keys(pkg.dependencies ?? {})
        .filter((d) => d.startsWith('@pile/'))
        .map((d) => d.slice('@pile/'.length))
        .sort();
      const ours = new Set(fs.readdirSync(path.join(root, 'packages')));
      const listed = deps!
        .split(',')
        .map((d) =>
          d
            .trim()
            .replace(/^@pile\//, '')
            .replace(/`/g, ''),
        )
        .filter((d) => ours.has(d))
        .sort();
      expect(listed, name).to.deep.equal(actual);
    }
  });

  it('every example has a README', () => {
    for (const ex of fs.readdirSync(path.join(root, 'examples'))) {
      if (!fs.existsSync(path.join(root, 'examples', ex, 'package.json'))) continue;
      expect(fs.existsSync(path.join(root, 'examples', ex, 'README.md')), `examples/${ex}/README.md`).to.equal(true);
    }
  });
});
