#!/usr/bin/env python3
# heapmap.py DIR SEQ BINARY [SINCE_MS]: which live blocks sit on the heap's pages, by allocation
# site (the first frames outside the allocator and the standard library), from heapmap.c's dump
# number SEQ in DIR. A page's 4 KiB are shared among the blocks on it. SINCE_MS: blocks allocated
# after it are counted apart (e.g. the time of a dump at the fresh start). With DIR/pagemap.end
# (pid's heap pages that are resident, as /proc/PID/pagemap says: see `pagemap` below) only
# resident pages count. K=3 frames per site, TOP=40 sites, FULL=1 prints whole stacks.
#
# `heapmap.py pagemap PID > DIR/pagemap.end` (as root) writes which pages of PID's heap and
# anonymous mappings are resident, for the above.
import struct, sys, subprocess, collections, glob, os

if sys.argv[1] == "pagemap":
    pid = sys.argv[2]
    regions = []
    for line in open(f"/proc/{pid}/maps"):
        parts = line.split()
        lo, hi = [int(x, 16) for x in parts[0].split("-")]
        name = parts[5] if len(parts) > 5 else ""
        if parts[1].startswith("rw") and name in ("[heap]", ""):
            regions.append((lo, hi, name))
    with open(f"/proc/{pid}/pagemap", "rb") as f:
        for lo, hi, name in regions:
            f.seek((lo >> 12) * 8)
            data = f.read(((hi - lo) >> 12) * 8)
            present = [i for i in range((hi - lo) >> 12) if struct.unpack_from("<Q", data, i * 8)[0] >> 63]
            print(f"{lo:x} {hi:x} {name or '-'} {len(present)} " + ",".join(map(str, present)))
    sys.exit(0)

d, seq, binary = sys.argv[1], sys.argv[2], sys.argv[3]
fresh_ms = int(sys.argv[4]) if len(sys.argv) > 4 else 0
binf = glob.glob(f"{d}/heapmap.*.{seq}.bin")[0]
mapsf = binf[:-4] + ".maps"
data = open(binf, "rb").read()
magic, nlive, nstacks, ms = struct.unpack_from("<4Q", data, 0)
off = 32
blocks = []
for i in range(nlive):
    p, size, t, st, _ = struct.unpack_from("<QIIII", data, off)
    off += 24
    blocks.append((p, size, t, st))
stacks = {}
SZ = 8 + 4 + 4 + 20 * 8
while off + SZ <= len(data):
    h, n, sid = struct.unpack_from("<QII", data, off)
    ips = struct.unpack_from("<20Q", data, off + 16)[:n]
    stacks[sid] = ips
    off += SZ
print(f"dump at {ms} ms: {nlive} live blocks, {sum(b[1] for b in blocks)/1048576:.2f} MiB requested, {len(stacks)} stacks")

heap = None
base = None
for line in open(mapsf):
    parts = line.split()
    lo, hi = [int(x, 16) for x in parts[0].split("-")]
    name = parts[5] if len(parts) > 5 else ""
    if name == "[heap]":
        heap = (lo, hi)
    if name.endswith("totemd") and int(parts[2], 16) == 0 and base is None:
        base = lo
print(f"heap {heap[0]:x}-{heap[1]:x} ({(heap[1]-heap[0])/1048576:.1f} MiB), base {base:x}")

present = None
pm = f"{d}/pagemap.end" if seq != "0" else None
if pm and os.path.exists(pm):
    for line in open(pm):
        parts = line.split()
        if parts[2] == "[heap]":
            lo = int(parts[0], 16)
            present = set(lo + (int(x) << 12) for x in parts[4].split(",")) if len(parts) > 4 else set()

def chunk(p, size):
    cs = max(32, (size + 8 + 15) & ~15)
    return p - 16, p - 16 + cs

pages = collections.defaultdict(list)
inheap = 0
live_bytes = 0
for b in blocks:
    p, size, t, st = b
    if not (heap[0] <= p < heap[1]):
        continue
    inheap += 1
    live_bytes += size
    lo, hi = chunk(p, size)
    for pg in range(lo >> 12, ((hi - 1) >> 12) + 1):
        pages[pg << 12].append(b)
print(f"in [heap]: {inheap} blocks, {live_bytes/1048576:.2f} MiB; pages touched by live blocks: {len(pages)} ({len(pages)*4/1024:.1f} MiB)")
if present is not None:
    pinned = [pg for pg in pages if pg in present]
    empty_res = [pg for pg in present if pg not in pages]
    print(f"resident heap pages {len(present)} ({len(present)*4/1024:.1f} MiB): with live blocks {len(pinned)}, without {len(empty_res)}")
# live bytes per page histogram
hist = collections.Counter()
for pg, bs in pages.items():
    lb = 0
    for (p, size, t, st) in bs:
        lo, hi = chunk(p, size)
        lb += min(hi, pg + 4096) - max(lo, pg)
    k = "<256" if lb < 256 else "<1K" if lb < 1024 else "<2K" if lb < 2048 else "<3K" if lb < 3072 else "<=4K"
    hist[k] += 1
print("pages by live bytes on them:", dict(hist))

# symbolize
ips = set()
for ipsl in stacks.values():
    ips.update(ipsl)
ips = sorted(ips)
rel = [ip - base for ip in ips]
inbin = [(ip, r) for ip, r in zip(ips, rel) if 0 <= r < 0x10000000]
sym = {}
if inbin:
    inp = "\n".join(f"{r - 1:x}" for ip, r in inbin) + "\n"
    out = subprocess.run(["addr2line", "-f", "-i", "-C", "-a", "-e", binary], input=inp, capture_output=True, text=True).stdout
    cur = None
    lines = out.split("\n")
    i = 0
    addr2ip = {f"{r - 1:x}": ip for ip, r in inbin}
    while i < len(lines):
        l = lines[i]
        if l.startswith("0x"):
            cur = addr2ip.get(l[2:].lstrip("0") or "0")
            if cur is None:
                # addr2line pads with zeros
                key = format(int(l, 16), "x")
                cur = addr2ip.get(key)
            sym[cur] = []
            i += 1
            continue
        if cur is not None and l:
            fn = l
            loc = lines[i + 1] if i + 1 < len(lines) else ""
            sym[cur].append((fn, loc.split("/")[-1]))
            i += 2
            continue
        i += 1

SKIP = ("alloc::", "core::", "<alloc::", "__rust", "__rdl", "std::alloc", "<core::", "hashbrown::raw", "<hashbrown::raw", "<T as alloc", "malloc", "??", "<[T]", "bytes::bytes", "<bytes::", "<&T as core", "<T as core")

def frames(sid, k=6):
    res = []
    for ip in stacks.get(sid, ()):
        for fn, loc in sym.get(ip, [(f"?{ip:x}", "")]):
            res.append(f"{fn[:110]} [{loc}]")
    return res

def site(sid, k):
    fr = frames(sid)
    keep = [f for f in fr if not f.startswith(SKIP)]
    return tuple(keep[:k])

K = int(os.environ.get("K", "3"))
weight = collections.Counter()
count = collections.Counter()
bytes_ = collections.Counter()
young = collections.Counter()
example = {}
for pg, bs in pages.items():
    if present is not None and pg not in present:
        continue
    for b in bs:
        s = site(b[3], K)
        weight[s] += 1.0 / len(bs)
for b in blocks:
    if not (heap[0] <= b[0] < heap[1]):
        continue
    s = site(b[3], K)
    count[s] += 1
    bytes_[s] += b[1]
    if b[2] > fresh_ms:
        young[s] += 1
    example.setdefault(s, b[3])
tot = sum(weight.values())
print(f"\npages pinned (shared by blocks on them): {tot:.0f} pages = {tot*4/1024:.1f} MiB")
for s, w in weight.most_common(int(os.environ.get("TOP", "40"))):
    print(f"\n{w*4/1024:6.2f} MiB pinned  {count[s]:6d} blocks ({young[s]} after fresh) {bytes_[s]/1024:8.1f} KiB live")
    for f in s:
        print("      ", f)
    if os.environ.get("FULL"):
        for f in frames(example[s])[:30]:
            print("         |", f)

# time buckets of blocks pinning pages
tb = collections.Counter()
for pg, bs in pages.items():
    if present is not None and pg not in present:
        continue
    for b in bs:
        tb[b[2] // 30000 * 30] += 1.0 / len(bs)
print("\npinned pages by allocation time (s):", {k: round(v * 4 / 1024, 2) for k, v in sorted(tb.items())})
