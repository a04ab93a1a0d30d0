// What a seqlock mark costs after random stores (ChangeSeq.ts, PLAIN_STORES): node benchmarks/compare/seqlock-stores.cjs
// Each op writes two random words of a 64 MiB array between two marks of a counter: plain stores
// (plain), Atomics.store (atom, xchg on x86-64), or no marks (none). Prints the median CPU ns per op
// over 25 rounds of 1 M ops (5 rounds of warm-up left out).
const N = 64 << 20;
const buf = new Uint32Array(new ArrayBuffer(N));
const seq = new Uint32Array(16);
const words = N >>> 2;
let s = 12345;
function plain(n) {
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1103515245) + 12345) >>> 0;
    seq[5] = seq[5] + 1;
    buf[s % words] = i;
    buf[(s >>> 3) % words] = i;
    seq[5] = seq[5] + 1;
  }
}
function atom(n) {
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1103515245) + 12345) >>> 0;
    Atomics.store(seq, 5, seq[5] + 1);
    buf[s % words] = i;
    buf[(s >>> 3) % words] = i;
    Atomics.store(seq, 5, seq[5] + 1);
  }
}
function none(n) {
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1103515245) + 12345) >>> 0;
    buf[s % words] = i;
    buf[(s >>> 3) % words] = i;
  }
}
const cpu = () => {
  const u = process.cpuUsage();
  return u.user + u.system;
};
buf.fill(1);
const r = { plain: [], atom: [], none: [] };
for (let k = 0; k < 30; k++)
  for (const [name, f] of [
    ['plain', plain],
    ['atom', atom],
    ['none', none],
  ]) {
    const t = cpu();
    f(1e6);
    r[name].push(((cpu() - t) / 1e6) * 1000);
  }
for (const k in r) {
  const a = r[k].slice(5).sort((x, y) => x - y);
  console.log(k, 'ns/op median', a[a.length >> 1].toFixed(1));
}
