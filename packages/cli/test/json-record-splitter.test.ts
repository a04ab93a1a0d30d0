import { expect } from 'chai';
import fc from 'fast-check';
import { JsonInputError, JsonRecordSplitter, type InputFormat } from '../src/JsonRecordSplitter';

/** Feeds `text` in chunks of `size` bytes; returns the values or the error. */
function split(text: string | Buffer, size = 7, format: InputFormat = 'auto'): { values: unknown[]; error?: JsonInputError } {
  const bytes = typeof text === 'string' ? Buffer.from(text) : text;
  const sp = new JsonRecordSplitter(format);
  const values: unknown[] = [];
  try {
    for (let i = 0; i < bytes.length; i += size) sp.write(bytes.subarray(i, i + size), (v) => values.push(v));
    sp.end((v) => values.push(v));
    return { values };
  } catch (err) {
    if (!(err instanceof JsonInputError)) throw err;
    return { values, error: err };
  }
}

describe('JsonRecordSplitter', () => {
  it('reads a JSON array and NDJSON into the same values, whatever the chunk size', () => {
    const records = [{ a: 1, s: 'x,]}"[{' }, [1, [2, {}]], 'str\\"', 3.5, null, true, { nested: { deep: ['é', '\u2028'] } }];
    const array = `\ufeff[ ${records.map((r) => JSON.stringify(r)).join(' ,\n ')} ]\n`;
    const ndjson = `${records.map((r) => JSON.stringify(r)).join('\r\n')}\n\n`;
    for (const size of [1, 2, 3, 64, 1 << 16]) {
      expect(split(array, size)).to.deep.equal({ values: records });
      expect(split(ndjson, size)).to.deep.equal({ values: records });
    }
    expect(split('[]')).to.deep.equal({ values: [] });
    expect(split('  \n ')).to.deep.equal({ values: [] });
    expect(split('{"last":"line without newline"}')).to.deep.equal({ values: [{ last: 'line without newline' }] });
    // NDJSON whose lines are arrays needs the format said; auto takes a leading '[' for one array.
    expect(split('[1]\n[2,3]\n', 3, 'ndjson')).to.deep.equal({ values: [[1], [2, 3]] });
    expect(split('[1]\n[2,3]\n', 3).error?.reason).to.match(/after the end of the array/);
    expect(split('{"a":1}', 3, 'array').error?.reason).to.match(/expected a JSON array/);
  });

  it('places errors at their line, column and byte, after the records before them', () => {
    const cases: [string, unknown[], number, number, number, RegExp][] = [
      ['[\n{"a":1},\n{"a" 2}\n]', [{ a: 1 }], 3, 6, 16, /Expected ':'/],
      // Where JSON.parse gives no position, the error points at the start of the record.
      ['{"a":1}\n{"a":2}\n{"b":,}\n', [{ a: 1 }, { a: 2 }], 3, 1, 16, /Unexpected token ','.* in the record starting here/],
      ['[1,,2]', [1], 1, 4, 3, /expected a value/],
      ['[1,2]x', [1, 2], 1, 6, 5, /after the end of the array/],
      ['[1,\n2', [1], 2, 2, 5, /not closed/],
      ['[{"é":1},{"x":1,}]', [{ é: 1 }], 1, 18, 17, /property name/],
      // A close that does not match its opener is the bad byte, not the end of the input.
      ['[{"id":1},{"id":2,]', [{ id: 1 }], 1, 19, 18, /property name/],
      ['[{"id":1},\n{"id":[2}]', [{ id: 1 }], 2, 9, 19, /after array element/],
      ['[\n  [1, 2},\n  3\n]', [], 2, 8, 9, /after array element/],
    ];
    for (const [text, before, line, column, byte, reason] of cases) {
      for (const size of [1, 5, 100]) {
        const r = split(text, size);
        expect(r.values, text).to.deep.equal(before);
        expect(r.error, text).to.be.instanceOf(JsonInputError);
        expect(r.error!.position, `${text} (chunks of ${size})`).to.deep.equal({ line, column, byte });
        expect(r.error!.reason).to.match(reason);
      }
    }
  });

  it('matches JSON.parse on random arrays split at random points (property)', () => {
    const value = fc.jsonValue({ maxDepth: 3 });
    fc.assert(
      fc.property(
        fc.array(value, { maxLength: 20 }),
        fc.boolean(),
        fc.integer({ min: 1, max: 50 }),
        fc.constantFrom('', ' ', '\n', ' \r\n\t'),
        (records, ndjson, size, ws) => {
          // NDJSON holds one value per line, so its records are written without line breaks.
          const text = ndjson
            ? records.map((r) => JSON.stringify(r)).join(`${ws}\n`)
            : `${ws}[${ws}${records.map((r) => JSON.stringify(r, null, ws === '' ? undefined : 1)).join(`${ws},${ws}`)}${ws}]${ws}`;
          const r = split(text, size, ndjson ? 'ndjson' : 'auto');
          expect(r.error).to.equal(undefined);
          expect(r.values).to.deep.equal(JSON.parse(JSON.stringify(records)));
        },
      ),
      { numRuns: 300 },
    );
  });
});
