// The open of a pile after a kill -9, against its clean open, from a kept snapshot:
//   node recovery-open.cjs make ROOT DIR N [MIX] a pile of N string[32] records (256 MiB segments)
//                                                closed cleanly in DIR/clean, and DIR/killed: a copy
//                                                opened by a process that wrote 10,000 times and
//                                                killed itself with SIGKILL. MIX: append (default:
//                                                10,000 puts), recent (5,000 deletes and 5,000
//                                                same-length sets of records among the last 1 M put,
//                                                so in one segment), random (the same of records
//                                                from the whole pile)
//   node recovery-open.cjs time ROOT DIR ROUNDS  ROUNDS rounds, each a fresh process opening a new
//                                                copy of DIR/killed, then one opening DIR/clean;
//                                                prints the fastest and median wall time of each,
//                                                their ratios and the load average
//   node recovery-open.cjs open ROOT PILE [stop|exit]  one open of PILE, printing its figures as
//                                                JSON, then a clean close ("stop": the same process,
//                                                stopped just before the open; "exit": it exits right
//                                                after the open: for recovery-instructions.sh)
// ROOT is a built checkout. Each copy of DIR/killed is recovered by its open, so it is made anew
// (cp, then sync) before every timed open: DIR/killed itself is never opened.
const { execFileSync, spawnSync } = require('child_process');
const fs = require('fs');
const os = require('os');
const path = require('path');

const KILL_AFTER_WRITES = 10000;
const record = (i) => `record-${i}`.padEnd(32, '.');

function copy(from, to) {
  fs.rmSync(to, { recursive: true, force: true });
  execFileSync('cp', ['-r', from, to]);
  execFileSync('sync');
}

/** The main thread's CPU time in ms (the kernel's per-thread run time). */
function threadCpuMs() {
  return Number(fs.readFileSync('/proc/thread-self/schedstat', 'latin1').split(' ')[0]) / 1e6;
}

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

const [mode, root, ...rest] = process.argv.slice(2);
const core = () => require(path.join(root, 'packages/core/dist/index.js'));
if (mode === 'make') {
  const [dir, nStr, mix = 'append'] = rest;
  if (!['append', 'recent', 'random'].includes(mix)) throw new Error(`MIX ${mix}: append, recent or random`);
  const n = Number(nStr);
  const clean = path.join(dir, 'clean');
  const killed = path.join(dir, 'killed');
  fs.rmSync(dir, { recursive: true, force: true });
  const pile = core().openPile({ dir: clean, segmentSize: 256 << 20 });
  // The records the killed writer deletes or sets, chosen by a fixed sequence (no Math.random).
  const pick = new Set();
  let x = 12345;
  const from = mix === 'recent' ? Math.max(0, n - 1000000) : 0;
  while (mix !== 'append' && pick.size < KILL_AFTER_WRITES) {
    x = (Math.imul(x, 1103515245) + 12345) >>> 0;
    pick.add(from + (x % (n - from)));
  }
  const ptrs = [];
  for (let i = 0; i < n; i++) {
    const p = pile.put(record(i));
    if (pick.has(i)) ptrs.push(p);
  }
  pile.close();
  fs.writeFileSync(path.join(dir, 'targets.json'), JSON.stringify(ptrs));
  copy(clean, killed);
  const k = spawnSync(process.execPath, [__filename, 'kill', root, killed, mix, path.join(dir, 'targets.json')], { stdio: 'inherit' });
  if (k.signal !== 'SIGKILL') throw new Error(`the writer to be killed ended with ${k.status} ${k.signal}`);
  console.log(`${dir}: clean/ and killed/ of ${nStr} records`);
} else if (mode === 'kill') {
  const [pileDir, mix, targets] = rest;
  const pile = core().openPile({ dir: pileDir });
  if (mix === 'append') for (let i = 0; i < KILL_AFTER_WRITES; i++) pile.put(record(i));
  else {
    const ptrs = JSON.parse(fs.readFileSync(targets, 'utf8'));
    ptrs.forEach((p, i) => (i % 2 === 0 ? pile.delete(p) : pile.set(p, record(-i))));
  }
  process.kill(process.pid, 'SIGKILL');
} else if (mode === 'open') {
  const [dir, stop] = rest;
  const { openPile } = core();
  if (stop === 'stop') process.exit(0);
  const c0 = threadCpuMs();
  const t0 = performance.now();
  const pile = openPile({ dir });
  const ms = performance.now() - t0;
  const cpuMs = threadCpuMs() - c0;
  const r = pile.lastRecovery;
  console.log(
    JSON.stringify({
      ms,
      cpuMs,
      recovered: r.ran,
      full: r.full,
      blocks: r.blocksScanned,
      regions: r.regionsScanned,
      bytes: r.bytesScanned,
      undone: r.storesUndone,
    }),
  );
  if (stop === 'exit') process.exit(0);
  pile.close();
} else if (mode === 'time') {
  const [dir, roundsStr] = rest;
  const work = `${dir}-work`;
  const open = (pile) => JSON.parse(execFileSync(process.execPath, [__filename, 'open', root, pile], { encoding: 'utf8' }));
  const killed = [];
  const clean = [];
  const load = [os.loadavg()[0]];
  for (let r = 0; r < Number(roundsStr); r++) {
    copy(path.join(dir, 'killed'), work);
    const k = open(work);
    // A build before per-segment free lists scans everything after deletes or sets (full: true).
    if (!k.recovered) throw new Error(`the open of the killed copy did not recover: ${JSON.stringify(k)}`);
    killed.push(k);
    clean.push(open(path.join(dir, 'clean')));
  }
  load.push(os.loadavg()[0]);
  fs.rmSync(work, { recursive: true, force: true });
  const fig = (xs, f) => ({ fastest: Math.min(...xs.map(f)), median: median(xs.map(f)) });
  const out = {
    rounds: Number(roundsStr),
    full: killed[0].full,
    regionsScanned: killed[0].regions,
    bytesScanned: killed[0].bytes,
    blocksScanned: killed[0].blocks,
    killedMs: fig(killed, (x) => x.ms),
    cleanMs: fig(clean, (x) => x.ms),
    killedCpuMs: fig(killed, (x) => x.cpuMs),
    cleanCpuMs: fig(clean, (x) => x.cpuMs),
    loadAverage: load,
  };
  out.ratioFastest = out.killedMs.fastest / out.cleanMs.fastest;
  out.ratioMedian = out.killedMs.median / out.cleanMs.median;
  console.log(JSON.stringify(out, (k, v) => (typeof v === 'number' && !Number.isInteger(v) ? Number(v.toFixed(2)) : v), 2));
} else {
  console.error('usage: node recovery-open.cjs make ROOT DIR N [append|recent|random] | time ROOT DIR ROUNDS | open ROOT PILE [stop|exit]');
  process.exit(2);
}
