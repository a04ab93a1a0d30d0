# Instructions per operation of two builds, function by function, JIT code included:
#   python3 benchmarks/compare/callgrind-functions.py A1.p.out A3.p.out B1.p.out B3.p.out N
# Each X.p.out is a callgrind profile of benchmarks/compare/instruction-loop.cjs run with V8's perf map,
# and X.map that run's /tmp/perf-PID.map (PID: the valgrind run's pid):
#   valgrind --tool=callgrind --callgrind-out-file=X.p.out node --perf-basic-prof --single-threaded \
#     benchmarks/compare/instruction-loop.cjs ROOT OP COUNT; cp /tmp/perf-PID.map X.map
# A1/A3 are build A at COUNT n1 and n3, B1/B3 build B; N = n3 - n1. A function's figure is its
# instructions at n3 less those at n1, over N, so start-up, the fill and compilation cancel out;
# the addresses callgrind can not name are looked up in the perf map (a JIT-compiled function).
import subprocess, re, sys, collections, bisect
def load(f, mapf):
    ents = []
    for line in open(mapf):
        parts = line.rstrip('\n').split(' ', 2)
        if len(parts) < 3: continue
        ents.append((int(parts[0], 16), int(parts[1], 16), parts[2]))
    ents.sort()
    starts = [e[0] for e in ents]
    def name(addr):
        i = bisect.bisect_right(starts, addr) - 1
        if i >= 0 and ents[i][0] <= addr < ents[i][0] + ents[i][1]:
            n = ents[i][2]
            # Any build root (a checkout, a worktree) goes, so one function of two builds is one row.
            n = re.sub(r'/\S*?/(packages|benchmarks)/', r'\1/', n)
            n = re.sub(r':\d+:\d+$', '', n)
            return 'JIT ' + n
        return 'JIT ?'
    out = subprocess.run(['callgrind_annotate', '--threshold=100', f], capture_output=True, text=True).stdout
    d = collections.Counter()
    for line in out.splitlines():
        m = re.match(r'\s*([\d,]+) \([\s\d.]+%\)\s+(.*)', line)
        if not m or 'PROGRAM TOTALS' in line: continue
        n = int(m.group(1).replace(',', ''))
        nm = m.group(2)
        mm = re.match(r'\?\?\?:0x([0-9a-f]+)', nm)
        if mm: nm = name(int(mm.group(1), 16))
        nm = re.sub(r' \[.*\]$', '', nm)
        d[nm] += n
    return d
if __name__ == '__main__':
    a1, a3, b1, b3 = (load(sys.argv[i], sys.argv[i].replace('.p.out', '.map')) for i in range(1, 5))
    N = float(sys.argv[5])
    da = {k: (a3[k]-a1[k])/N for k in set(a1)|set(a3)}
    db = {k: (b3[k]-b1[k])/N for k in set(b1)|set(b3)}
    keys = sorted(set(da)|set(db), key=lambda k: -(abs(db.get(k,0)-da.get(k,0))))
    print(f"total per op: old {sum(da.values()):.0f}  new {sum(db.values()):.0f}")
    for k in keys[:45]:
        print(f"{da.get(k,0):9.1f} {db.get(k,0):9.1f} {db.get(k,0)-da.get(k,0):+9.1f}  {k[:120]}")
    print('--- top of new')
    for k in sorted(db, key=lambda k: -db[k])[:30]:
        print(f"{da.get(k,0):9.1f} {db.get(k,0):9.1f}  {k[:120]}")
