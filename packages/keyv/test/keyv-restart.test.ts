import { expect } from 'chai';
import { runFixture, tempDir } from './helpers';

/** What writer.ts sets: k0..k499, every fifth with a 300 ms ttl. */
const LONG = Array.from({ length: 500 }, (_, i) => i).filter((i) => i % 5 !== 0);

function readBack(dir: string, tool: string): { found: number[]; wrong: number[] } {
  const r = runFixture('reader', [dir, tool]);
  expect(r.status, r.stderr).to.equal(0);
  return JSON.parse(r.stdout.trim()) as { found: number[]; wrong: number[] };
}

describe('keyv: entries across process restarts', function () {
  this.timeout(120_000);
  for (const tool of ['keyv', 'cache-manager']) {
    for (const end of ['disconnect', 'exit', 'kill']) {
      it(`${tool}: a child sets entries then ${end === 'kill' ? 'is SIGKILLed' : end === 'exit' ? 'exits without disconnect' : 'disconnects and exits'}; a new process finds them, expired ones gone`, async () => {
        const { dir, cleanup } = tempDir();
        try {
          const w = runFixture('writer', [dir, end, tool]);
          expect(w.stdout, w.stderr).to.include('set');
          if (end === 'kill') expect(w.signal).to.equal('SIGKILL');
          else expect(w.status, w.stderr).to.equal(0);
          await new Promise((r) => setTimeout(r, 350)); // the short ttls run out
          const { found, wrong } = readBack(dir, tool);
          expect(wrong).to.deep.equal([]);
          expect(found).to.deep.equal(LONG);
        } finally {
          cleanup();
        }
      });
    }
  }
});
