// The open of a pile after a kill -9 that lands at a random moment of a stream of writes,
// where recovery-open.cjs kills its writer between two writes:
//   node recovery-midwrite.cjs time ROOT DIR ROUNDS   DIR is one made by `recovery-open.cjs make ROOT DIR N random`
// Each round copies DIR/clean, starts a writer on the copy that sets the records of DIR/targets.json
// (same-length values) and deletes and puts again, one after another without end, SIGKILLs it 2-20 ms
// after its first write (so after at most some 10^4 writes), then times the open of the copy in a
// fresh process (recovery-open.cjs open). It prints each round's wall and CPU time, the regions and
// bytes the recovery scanned and its source, then the medians and the load average.
const { execFileSync, spawn } = require('child_process');
const fs = require('fs');
const os = require('os');
const path = require('path');

const [mode, root, ...rest] = process.argv.slice(2);
const core = () => require(path.join(root, 'packages/core/dist/index.js'));
const record = (i) => `record-${i}`.padEnd(32, '.');

if (mode === 'write') {
  const [pileDir, targets] = rest;
  const ptrs = JSON.parse(fs.readFileSync(targets, 'utf8'));
  const pile = core().openPile({ dir: pileDir });
  process.send('open');
  for (let round = 0; ; round++) {
    for (let i = 0; i < ptrs.length; i++) {
      if (i % 2 === 0) pile.set(ptrs[i], record(-i - round));
      else {
        pile.delete(ptrs[i]);
        ptrs[i] = pile.put(record(i + round));
      }
    }
  }
} else if (mode === 'time') {
  const [dir, roundsStr] = rest;
  const work = `${dir}-midwrite`;
  const median = (xs) => [...xs].sort((a, b) => a - b)[(xs.length - 1) >> 1];
  const load = [os.loadavg()[0]];
  const rows = [];
  (async () => {
    for (let r = 0; r < Number(roundsStr); r++) {
      fs.rmSync(work, { recursive: true, force: true });
      execFileSync('cp', ['-r', path.join(dir, 'clean'), work]);
      execFileSync('sync');
      const child = spawn(process.execPath, [__filename, 'write', root, work, path.join(dir, 'targets.json')], {
        stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      });
      await new Promise((resolve) => child.once('message', resolve));
      await new Promise((resolve) => setTimeout(resolve, 2 + Math.floor(Math.random() * 19)));
      child.kill('SIGKILL');
      await new Promise((resolve) => child.once('exit', resolve));
      const out = JSON.parse(
        execFileSync(process.execPath, [path.join(__dirname, 'recovery-open.cjs'), 'open', root, work], { encoding: 'utf8' }),
      );
      rows.push(out);
      console.log(JSON.stringify(out));
    }
    load.push(os.loadavg()[0]);
    fs.rmSync(work, { recursive: true, force: true });
    console.log(
      JSON.stringify({
        rounds: rows.length,
        medianMs: median(rows.map((x) => x.ms)),
        medianCpuMs: median(rows.map((x) => x.cpuMs)),
        maxMs: Math.max(...rows.map((x) => x.ms)),
        scannedRegions: rows.map((x) => x.regions),
        loadAverage: load,
      }),
    );
  })();
} else {
  console.error('usage: node recovery-midwrite.cjs time ROOT DIR ROUNDS');
  process.exit(2);
}
