#!/usr/bin/env bash
# oscost beside lmbench's own binaries, which you build yourself from lmbench's public
# repository (this script builds and fetches nothing): lat_syscall, lat_sig and lat_fs in
# LMBENCH=DIR. Rounds alternate the two tools, both pinned to the same CPU (oscost's measuring
# CPU, the last allowed), one after the other, never at once. Prints, per operation,
# the median over rounds of each tool's figure and their ratio (oscost / lmbench) against a 10%
# band. lat_sig prot reports the fault less a catch; it is compared as lmbench's figure plus its
# catch against sig/prot, which is the whole cycle. lat_fs is a mean over a window of ~800
# files; oscost's figure is the median of 100-file samples, so its mean is printed beside.
#
#   LMBENCH=DIR scripts/versus-lmbench.sh [ROUNDS] [FS_DIR]
#
# FS_DIR (default /tmp) is where lat_fs makes its files; oscost's fs/create and fs/delete make
# theirs in $TMPDIR, set to FS_DIR for the run, so both tools create on the same file system.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
fsdir=${2:-/tmp}
bin=$PWD/target/release/oscost
lm=${LMBENCH:?set LMBENCH=DIR holding lat_syscall, lat_sig and lat_fs built from lmbench}
for t in lat_syscall lat_sig lat_fs; do
  [ -x "$lm/$t" ] || { echo "no $lm/$t: build lmbench's $t first" >&2; exit 2; }
done
[ -x "$bin" ] || { echo "build first: cargo build --release" >&2; exit 2; }
# oscost's default measuring CPU: the last one this shell may run on.
cpu=$(python3 -c 'import os; print(max(os.sched_getaffinity(0)))')
file=$(mktemp -d /tmp/oscost-versus-lmbench.XXXXXX)
# lat_syscall's file: four components from the root, as /usr/include/linux/types.h is and as
# oscost's fs/ tree's d1/d2/d3/f is from its directory descriptor, on the same file system.
top=$(mktemp -d "$fsdir/oscost-vl.XXXXXX")
trap 'rm -rf "$file" "$top"' EXIT
depth=$(python3 -c 'import os,sys; print(len([c for c in os.path.realpath(sys.argv[1]).split("/") if c]))' "$top")
target=$top
for _ in $(seq $(( 3 - depth ))); do target=$target/d; done
mkdir -p "$target" && target=$target/f && echo x > "$target"
[ "$depth" -le 3 ] || echo "note: $top is $depth components deep; lat_syscall's path is longer than fs/stat's" >&2
ids=(syscall/getppid syscall/read-devzero syscall/write-devnull fs/stat fs/fstat fs/open-close
     sig/install sig/catch sig/prot fs/create fs/delete)
for r in $(seq "$rounds"); do
  echo "round $r: lmbench" >&2
  {
    for t in null read write stat fstat open; do
      echo "lat_syscall $t $(taskset -c $cpu "$lm/lat_syscall" -N 5 $t "$target" 2>&1)"
    done
    for t in install catch; do
      echo "lat_sig $t $(taskset -c $cpu "$lm/lat_sig" -N 5 $t 2>&1)"
    done
    echo "lat_sig prot $(taskset -c $cpu "$lm/lat_sig" -N 5 prot "$target" 2>&1)"
    taskset -c $cpu "$lm/lat_fs" -N 3 "$fsdir" 2>&1 | sed 's/^/lat_fs /'
  } > "$file/lm-$r.txt"
  echo "round $r: oscost" >&2
  TMPDIR=$fsdir "$bin" run --no-save --cpu $cpu --json "$file/os-$r.json" "${ids[@]}" >/dev/null 2>&1
done
python3 - "$file" "$rounds" <<'PY'
import json, re, statistics, sys
d, rounds = sys.argv[1], int(sys.argv[2])
lm, os_, os_mean = {}, {}, {}
def add(m, k, v): m.setdefault(k, []).append(v)
for r in range(1, rounds + 1):
    for line in open(f"{d}/lm-{r}.txt"):
        f = line.split()
        if f[0] in ("lat_syscall", "lat_sig"):
            m = re.search(r"([0-9.]+) microseconds", line)
            if m: add(lm, f"{f[0]} {f[1]}", float(m.group(1)) * 1000)
        elif f[0] == "lat_fs" and len(f) == 5 and f[1].endswith("k"):
            add(lm, f"lat_fs create {f[1]}", 1e9 / float(f[3]))
            add(lm, f"lat_fs delete {f[1]}", 1e9 / float(f[4]))
    run = json.load(open(f"{d}/os-{r}.json"))
    for res in run["results"]:
        st = res.get("stats") or {}
        if res.get("status", {}).get("state") == "ok" and "median" in st:
            add(os_, res["id"], st["median"])
            if "mean" in st: add(os_mean, res["id"], st["mean"])
pairs = [("syscall/getppid", "lat_syscall null"), ("syscall/read-devzero", "lat_syscall read"),
         ("syscall/write-devnull", "lat_syscall write"), ("fs/stat", "lat_syscall stat"),
         ("fs/fstat", "lat_syscall fstat"), ("fs/open-close", "lat_syscall open"),
         ("sig/install", "lat_sig install"), ("sig/catch", "lat_sig catch"),
         ("sig/prot", "lat_sig prot")]
for k in ("0k", "1k", "4k", "10k"):
    kib = k[:-1] + "KiB"
    pairs += [(f"fs/create/{kib}", f"lat_fs create {k}"), (f"fs/delete/{kib}", f"lat_fs delete {k}")]
med = lambda v: statistics.median(v) if v else None
print(f"{'oscost':<24} {'lmbench':<22} {'oscost':>10} {'lmbench':>10} {'ratio':>7}")
for o, l in pairs:
    a, b = med(os_.get(o, [])), med(lm.get(l, []))
    if l == "lat_sig prot" and b is not None and med(lm.get("lat_sig catch", [])):
        b += med(lm["lat_sig catch"])  # lmbench reports prot less its catch
    if a is None or b is None:
        print(f"{o:<24} {l:<22} {'-':>10} {'-':>10}   missing"); continue
    ratio = a / b
    flag = "" if 0.9 <= ratio <= 1.1 else "  outside 10%"
    print(f"{o:<24} {l:<22} {a:>8.0f}ns {b:>8.0f}ns {ratio:>7.2f}{flag}")
    if l.startswith("lat_fs") and os_mean.get(o):
        # lat_fs divides one window's time by its ~800 files: a mean, deferred work included.
        m = med(os_mean[o])
        print(f"{'  (oscost mean)':<24} {'':<22} {m:>8.0f}ns {b:>8.0f}ns {m / b:>7.2f}")
PY
