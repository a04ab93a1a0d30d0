// What a capacity costs Buffer#utf8Write: node benchmarks/compare/utf8-write-capacity.cjs
// Writes 31-character ASCII strings (the cache benchmark's product name) 2 M times each way and
// prints the main thread's CPU time per write: without a capacity, with the exact byte count (as a
// cache value's encode passes it), with three bytes per UTF-16 unit, and a JavaScript loop. V8
// takes its fast path only when the capacity covers three bytes per unit (docs/benchmarks.md).
const buf = Buffer.alloc(1 << 20);
const strs = [];
for (let i = 0; i < 1000; i++) {
  const s = 'Widget ' + String(i).padStart(8, '0') + ' premium edition';
  Buffer.byteLength(s);
  strs.push(s);
}
function a(n) {
  let t = 0;
  for (let i = 0; i < n; i++) {
    const s = strs[i % 1000];
    t += buf.utf8Write(s, (i & 1023) * 64);
  }
  return t;
}
function b(n) {
  let t = 0;
  for (let i = 0; i < n; i++) {
    const s = strs[i % 1000];
    t += buf.utf8Write(s, (i & 1023) * 64, s.length);
  }
  return t;
}
function c(n) {
  let t = 0;
  for (let i = 0; i < n; i++) {
    const s = strs[i % 1000];
    t += buf.utf8Write(s, (i & 1023) * 64, s.length * 3);
  }
  return t;
}
function js(n) {
  let t = 0;
  for (let i = 0; i < n; i++) {
    const s = strs[i % 1000];
    let o = (i & 1023) * 64;
    const L = s.length;
    let k = 0;
    for (; k < L; k++) {
      const ch = s.charCodeAt(k);
      if (ch > 127) break;
      buf[o + k] = ch;
    }
    t += k;
  }
  return t;
}
const cpu = () => process.cpuUsage().user;
for (let round = 1; round <= 3; round++)
  for (const [name, f] of [
    ['nomax', a],
    ['exact', b],
    ['3x', c],
    ['js', js],
  ]) {
    f(200000);
    const t0 = cpu();
    f(2000000);
    console.log(name, ((cpu() - t0) / 2000).toFixed(1), 'ns');
  }
