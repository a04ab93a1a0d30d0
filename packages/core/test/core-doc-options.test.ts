import { expect } from 'chai';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { checkOptions, type PileOptions } from '../src/PileOptions';
import { isPileError } from '../src/PileError';

const root = path.join(__dirname, '..', '..', '..');

/** The option names of docs/core.md's table of openPile options (its rows' first cells). */
function documentedOptions(): string[] {
  const text = fs.readFileSync(path.join(root, 'docs', 'core.md'), 'utf8');
  const section = text.slice(text.indexOf('## Options of `openPile`'));
  const table = section.slice(0, section.indexOf('\n## '));
  return [...table.matchAll(/^\| `(\w+)` \|/gm)].map((m) => m[1]!);
}

/** The keys the PileOptions interface declares, read from its source. */
function declaredOptions(): string[] {
  const src = fs.readFileSync(path.join(__dirname, '..', 'src', 'PileOptions.ts'), 'utf8');
  const body = src.slice(src.indexOf('export interface PileOptions {'), src.indexOf('\n}', src.indexOf('export interface PileOptions {')));
  return [...body.matchAll(/^ {2}(\w+)\?:/gm)].map((m) => m[1]!);
}

/** Whether checkOptions knows `key` (any error but "unknown option" means it does). */
function accepted(key: string): boolean {
  try {
    checkOptions({ [key]: undefined } as PileOptions);
    return true;
  } catch (err) {
    if (!isPileError(err, 'PILE_INVALID_OPTION')) throw err;
    return !/unknown option/.test(err.message);
  }
}

describe('docs/core.md documents every openPile option', () => {
  it('its table has a row for each option PileOptions declares and checkOptions accepts, and no other', () => {
    const documented = documentedOptions();
    const declared = declaredOptions();
    expect(declared.length).to.be.greaterThan(5);
    for (const k of declared) expect(accepted(k), `${k} is declared but refused`).to.equal(true);
    expect(accepted('noSuchOption')).to.equal(false);
    expect([...documented].sort()).to.deep.equal([...declared].sort());
  });

  it('each row gives a type, a default, a meaning and the error of a bad value', () => {
    const text = fs.readFileSync(path.join(root, 'docs', 'core.md'), 'utf8');
    for (const k of documentedOptions()) {
      const row = text.split('\n').find((l) => l.startsWith(`| \`${k}\` |`))!;
      const cells = row.split(' | ');
      expect(cells.length, row).to.equal(5);
      expect(row, k).to.match(/PILE_[A-Z_]+/);
    }
  });
});
