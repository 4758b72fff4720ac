#!/usr/bin/env bash
# oscost beside lmbench's own binaries, which you build yourself from lmbench's public
# repository (this script builds and fetches nothing), in LMBENCH=DIR. Rounds alternate the two
# tools, both pinned to the same CPU (oscost's measuring CPU, the last allowed; lmbench's
# servers and children too, so every two-party case is oscost's @same), one after the other,
# never at once. Prints, per operation, the median over rounds of each tool's figure and their
# ratio (oscost / lmbench) against a 10% band. A tool missing from DIR is said and its rows
# left out.
#
# Where lmbench reports another quantity than oscost's result, it is converted, and the row
# says so: lat_sig prot reports the fault less a catch (lmbench's figure plus its catch is
# compared with sig/prot, the whole cycle); lat_sem reports half a round trip (doubled);
# lat_usleep the whole sleep (the time asked is taken off, leaving the overshoot); lat_fs a
# mean over a window of ~800 files (oscost's mean is printed beside its median); bandwidths
# are lmbench's MB/s (10^6 bytes) turned into time per MiB, as oscost stores them.
#
#   LMBENCH=DIR scripts/versus-lmbench.sh [ROUNDS] [FS_DIR]
#
# FS_DIR (default /tmp) is where lat_fs and the file tools make their files; oscost's fs/ and
# bw/ benchmarks make theirs in $TMPDIR, set to FS_DIR for the run, so both tools work on the
# same file system.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
fsdir=${2:-/tmp}
bin=$PWD/target/release/oscost
lm=${LMBENCH:?set LMBENCH=DIR holding lmbench\'s binaries (lat_syscall, lat_sig, lat_fs, ...)}
[ -x "$bin" ] || { echo "build first: cargo build --release" >&2; exit 2; }
have() { [ -x "$lm/$1" ]; }
for t in lat_syscall lat_sig lat_fs lat_proc lat_sem lat_usleep lat_pipe lat_unix lat_tcp \
         lat_udp lat_connect lat_unix_connect lat_select lat_mmap lat_pagefault lat_fcntl \
         bw_pipe bw_unix bw_tcp bw_file_rd bw_mmap_rd bw_mem; do
  have "$t" || echo "note: no $lm/$t; its rows are left out" >&2
done
# oscost's default measuring CPU: the last one this shell may run on.
cpu=$(python3 -c 'import os; print(max(os.sched_getaffinity(0)))')
pin() { taskset -c "$cpu" "$@"; }
# Another CPU for the connection servers' cross rows (oscost's @cross), where there is one.
other=$(python3 -c 'import os; c=sorted(os.sched_getaffinity(0)); print(c[0] if len(c) > 1 else "")')
out=$(mktemp -d /tmp/oscost-versus-lmbench.XXXXXX)
# lat_syscall's file: four components from the root, as /usr/include/linux/types.h is and as
# oscost's fs/ tree's d1/d2/d3/f is from its directory descriptor, on the same file system.
top=$(mktemp -d "$fsdir/oscost-vl.XXXXXX")
servers=()
cleanup() {
  for s in "${servers[@]}"; do "$lm/$s" -S localhost >/dev/null 2>&1 || true; done
  rm -rf "$out" "$top"
}
trap cleanup EXIT
depth=$(python3 -c 'import os,sys; print(len([c for c in os.path.realpath(sys.argv[1]).split("/") if c]))' "$top")
target=$top
for _ in $(seq $(( 3 - depth ))); do target=$target/d; done
mkdir -p "$target" && target=$target/f && echo x > "$target"
[ "$depth" -le 3 ] || echo "note: $top is $depth components deep; lat_syscall's path is longer than fs/stat's" >&2
# The file lat_mmap, lat_pagefault, bw_file_rd and bw_mmap_rd work on: 16 MiB, cached.
file=$top/file
# Written a mebibyte at a time, as oscost writes its own: the page cache keeps a file in folios
# as large as the writes that made it, and a fault maps a whole folio (design-notes).
dd if=/dev/zero of="$file" bs=1M count=16 status=none
cat "$file" > /dev/null
ids=(syscall/getppid syscall/read-devzero syscall/write-devnull fs/stat fs/fstat fs/open-close
     sig/install sig/catch sig/prot fs/create fs/delete spawn/shell ipc/sem-pingpong
     timer/nanosleep-overshoot switch/pipe-proc switch/unix-proc net/ fs/mmap fs/pagefault
     fs/fcntl-lock bw/)
# TCP's count of connections refused because a listen queue was full.
listen_overflows() {
  awk '/^TcpExt:/ { if (!h) { for (i = 1; i <= NF; i++) n[i] = $i; h = 1 }
                    else for (i = 1; i <= NF; i++) if (n[i] == "ListenOverflows") print $i }' \
    /proc/net/netstat
}
# A client/server tool: its server started pinned, the client run, the server stopped.
served() {
  local t=$1; shift
  pin "$lm/$t" -s >/dev/null 2>&1; servers+=("$t"); sleep 0.3
  echo "$t $(pin "$lm/$t" -N 5 "$@" 2>&1 | tr '\n' ' ')"
  "$lm/$t" -S localhost >/dev/null 2>&1 || true
}
for r in $(seq "$rounds"); do
  echo "round $r: lmbench" >&2
  {
    if have lat_syscall; then
      for t in null read write stat fstat open; do
        echo "lat_syscall $t $(pin "$lm/lat_syscall" -N 5 $t "$target" 2>&1)"
      done
    fi
    if have lat_sig; then
      for t in install catch; do echo "lat_sig $t $(pin "$lm/lat_sig" -N 5 $t 2>&1)"; done
      echo "lat_sig prot $(pin "$lm/lat_sig" -N 5 prot "$target" 2>&1)"
    fi
    # lat_fs one size a process, as oscost runs each case in fresh workers: run over every
    # size in one process, a size's figure depends on the sizes before it and on the window
    # its harness chose (4k: 12.0 us after 0k and 1k in a window of 5276 files, 9.8-10.1 us
    # alone; design-notes). `-s 0` means every size, so 0k is the first line of that run.
    if have lat_fs; then
      pin "$lm/lat_fs" -N 3 "$fsdir" 2>&1 | sed -n 1p | sed 's/^/lat_fs /'
      for s in 1k 4k 10k; do pin "$lm/lat_fs" -s $s -N 3 "$fsdir" 2>&1 | sed 's/^/lat_fs /'; done
    fi
    # sh -c /tmp/hello: lmbench's shell runs its hello program; where none is there, sh's
    # "not found" lines come first and the figure last.
    have lat_proc && echo "lat_proc shell $(pin "$lm/lat_proc" -N 5 shell 2>&1 | tail -1)"
    have lat_sem && echo "lat_sem $(pin "$lm/lat_sem" -N 5 2>&1)"
    if have lat_usleep; then
      for us in 10 100 1000; do
        echo "lat_usleep $us $(pin "$lm/lat_usleep" -u nanosleep -N 5 $us 2>&1)"
      done
    fi
    have lat_pipe && echo "lat_pipe $(pin "$lm/lat_pipe" -N 5 2>&1)"
    have lat_unix && echo "lat_unix $(pin "$lm/lat_unix" -N 5 2>&1)"
    have lat_tcp && served lat_tcp localhost
    have lat_udp && served lat_udp localhost
    if have lat_connect; then
      # On one CPU lat_connect's client outruns its server, the accept queue (100) overflows,
      # the SYN is dropped and retransmitted a second later: the kernel's count of overflows
      # during the run is printed with the figure (design-notes).
      before=$(listen_overflows)
      served lat_connect localhost
      echo "lat_connect-overflows $(( $(listen_overflows) - before ))"
    fi
    if have lat_unix_connect; then
      pin "$lm/lat_unix_connect" -s >/dev/null 2>&1 &
      sleep 0.3
      echo "lat_unix_connect $(pin "$lm/lat_unix_connect" -N 5 2>&1)"
      "$lm/lat_unix_connect" -S >/dev/null 2>&1 || true
    fi
    # The connection servers on another CPU: oscost's @cross.
    if [ -n "$other" ]; then
      for t in lat_connect lat_unix_connect; do
        have $t || continue
        host=localhost; [ $t = lat_unix_connect ] && host=
        taskset -c "$other" "$lm/$t" -s >/dev/null 2>&1 &
        [ $t = lat_connect ] && servers+=("$t")
        sleep 0.3
        echo "$t@cross $(pin "$lm/$t" -N 5 $host 2>&1)"
        "$lm/$t" -S $host >/dev/null 2>&1 || true
      done
    fi
    if have lat_select; then
      for n in 10 100; do echo "lat_select $n $(pin "$lm/lat_select" -n $n -N 5 tcp 2>&1)"; done
    fi
    if have lat_mmap; then
      for s in 512k 1m 4m 16m; do echo "lat_mmap $s $(pin "$lm/lat_mmap" -N 5 $s "$file" 2>&1)"; done
    fi
    have lat_pagefault && echo "lat_pagefault $(pin "$lm/lat_pagefault" -N 5 "$file" 2>&1)"
    have lat_fcntl && echo "lat_fcntl $(pin "$lm/lat_fcntl" -N 5 2>&1)"
    have bw_pipe && echo "bw_pipe $(pin "$lm/bw_pipe" -N 5 2>&1)"
    have bw_unix && echo "bw_unix $(pin "$lm/bw_unix" -N 5 2>&1)"
    have bw_tcp && served bw_tcp localhost
    have bw_file_rd && echo "bw_file_rd $(pin "$lm/bw_file_rd" -N 5 8m io_only "$file" 2>&1)"
    have bw_mmap_rd && echo "bw_mmap_rd $(pin "$lm/bw_mmap_rd" -N 5 8m mmap_only "$file" 2>&1)"
    if have bw_mem; then
      for w in rd wr bcopy; do echo "bw_mem $w $(pin "$lm/bw_mem" -N 5 64m $w 2>&1)"; done
    fi
  } > "$out/lm-$r.txt"
  echo "round $r: oscost" >&2
  TMPDIR=$fsdir "$bin" run --no-save --cpu "$cpu" --placement same --json "$out/os-$r.json" \
    "${ids[@]}" >/dev/null 2>&1
  if [ -n "$other" ]; then
    "$bin" run --no-save --cpu "$cpu" --placement cross --json "$out/os-cross-$r.json" \
      net/tcp-connect net/unix-connect >/dev/null 2>&1
  fi
done
python3 - "$out" "$rounds" <<'PY'
import json, re, statistics, sys
d, rounds = sys.argv[1], int(sys.argv[2])
lm, os_, os_mean = {}, {}, {}
MIB = 1 << 20
def add(m, k, v): m.setdefault(k, []).append(v)
def us(line):
    m = re.search(r"([0-9.]+) microseconds", line)
    return float(m.group(1)) * 1000 if m else None
def per_mib(mb_s):  # lmbench's MB/s (10^6 bytes) as ns per MiB
    return MIB / (mb_s * 1e6) * 1e9 if mb_s > 0 else None
for r in range(1, rounds + 1):
    for line in open(f"{d}/lm-{r}.txt"):
        f = line.split()
        if not f: continue
        t = f[0]
        if t in ("lat_syscall", "lat_sig"):
            v = us(line)
            if v: add(lm, f"{t} {f[1]}", v)
        elif t == "lat_fs" and len(f) == 5 and f[1].endswith("k"):
            add(lm, f"lat_fs create {f[1]}", 1e9 / float(f[3]))
            add(lm, f"lat_fs delete {f[1]}", 1e9 / float(f[4]))
        elif t == "lat_proc" and us(line): add(lm, "lat_proc shell", us(line))
        elif t == "lat_sem" and us(line): add(lm, "lat_sem (x2)", 2 * us(line))
        elif t == "lat_usleep":
            m = re.search(r":\s*([0-9.]+) microseconds", line)
            if m: add(lm, f"lat_usleep {f[1]} (less asked)", (float(m.group(1)) - float(f[1])) * 1000)
        elif t == "lat_connect-overflows": add(lm, t, float(f[1]))
        elif t in ("lat_pipe", "lat_unix", "lat_tcp", "lat_udp", "lat_connect",
                   "lat_unix_connect", "lat_connect@cross", "lat_unix_connect@cross",
                   "lat_pagefault", "lat_fcntl") and us(line):
            add(lm, t, us(line))
        elif t == "lat_select" and us(line): add(lm, f"lat_select {f[1]} tcp", us(line))
        elif t == "lat_mmap" and len(f) >= 4:
            add(lm, f"lat_mmap {f[1]}", float(f[3]) * 1000)
        elif t in ("bw_pipe", "bw_unix", "bw_tcp"):
            m = re.search(r"([0-9.]+) MB/sec", line)
            if m: add(lm, t, per_mib(float(m.group(1))))
        elif t in ("bw_file_rd", "bw_mmap_rd") and len(f) >= 3:
            add(lm, t, per_mib(float(f[2])))
        elif t == "bw_mem" and len(f) >= 4:
            add(lm, f"bw_mem {f[1]}", per_mib(float(f[3])))
    runs = [json.load(open(f"{d}/os-{r}.json"))]
    try: runs.append(json.load(open(f"{d}/os-cross-{r}.json")))
    except FileNotFoundError: pass
    for res in (x for run in runs for x in run["results"]):
        st = res.get("stats") or {}
        if res.get("status", {}).get("state") == "ok" and "median" in st:
            add(os_, res["id"], st["median"])
            if "mean" in st: add(os_mean, res["id"], st["mean"])
pairs = [("syscall/getppid", "lat_syscall null"), ("syscall/read-devzero", "lat_syscall read"),
         ("syscall/write-devnull", "lat_syscall write"), ("fs/stat", "lat_syscall stat"),
         ("fs/fstat", "lat_syscall fstat"), ("fs/open-close", "lat_syscall open"),
         ("sig/install", "lat_sig install"), ("sig/catch", "lat_sig catch"),
         ("sig/prot", "lat_sig prot (+catch)")]
for k in ("0k", "1k", "4k", "10k"):
    kib = k[:-1] + "KiB"
    pairs += [(f"fs/create/{kib}", f"lat_fs create {k}"), (f"fs/delete/{kib}", f"lat_fs delete {k}")]
pairs += [("spawn/shell", "lat_proc shell"), ("ipc/sem-pingpong@same", "lat_sem (x2)")]
pairs += [(f"timer/nanosleep-overshoot/{u}us", f"lat_usleep {u} (less asked)") for u in (10, 100, 1000)]
pairs += [("switch/pipe-proc@same", "lat_pipe"), ("switch/unix-proc@same", "lat_unix"),
          ("net/tcp-rr@same", "lat_tcp"), ("net/udp-rr@same", "lat_udp"),
          ("net/tcp-connect@same", "lat_connect"), ("net/unix-connect@same", "lat_unix_connect"),
          ("net/tcp-connect@cross", "lat_connect@cross"),
          ("net/unix-connect@cross", "lat_unix_connect@cross"),
          ("net/select-tcp/10", "lat_select 10 tcp"), ("net/select-tcp/100", "lat_select 100 tcp")]
pairs += [(f"fs/mmap/{o}", f"lat_mmap {l}") for o, l in
          (("512KiB", "512k"), ("1MiB", "1m"), ("4MiB", "4m"), ("16MiB", "16m"))]
pairs += [("fs/pagefault", "lat_pagefault"), ("fs/fcntl-lock@same", "lat_fcntl"),
          ("bw/pipe@same", "bw_pipe"), ("bw/unix@same", "bw_unix"), ("bw/tcp@same", "bw_tcp"),
          ("bw/file-reread", "bw_file_rd"), ("bw/mmap-reread", "bw_mmap_rd"),
          ("bw/mem-read", "bw_mem rd"), ("bw/mem-write", "bw_mem wr"), ("bw/mem-copy", "bw_mem bcopy")]
med = lambda v: statistics.median(v) if v else None
def ns(x): return f"{x:>9.0f}ns" if abs(x) >= 100 else f"{x:>9.1f}ns"
print(f"{'oscost':<32} {'lmbench':<28} {'oscost':>11} {'lmbench':>11} {'ratio':>7}")
for o, l in pairs:
    a, b = med(os_.get(o, [])), med(lm.get(l, []))
    if l.startswith("lat_sig prot"):
        b = med(lm.get("lat_sig prot", []))
        if b is not None and med(lm.get("lat_sig catch", [])):
            b += med(lm["lat_sig catch"])  # lmbench reports prot less its catch
    if a is None or b is None:
        print(f"{o:<32} {l:<28} {'-':>11} {'-':>11}   missing"); continue
    ratio = a / b if b else float("nan")
    flag = "" if 0.9 <= ratio <= 1.1 else "  outside 10%"
    print(f"{o:<32} {l:<28} {ns(a)} {ns(b)} {ratio:>7.2f}{flag}")
    if (l.startswith("lat_fs") or l.startswith("lat_usleep")) and os_mean.get(o):
        # lat_fs and lat_usleep divide one window's time by its operations: a mean.
        m = med(os_mean[o])
        print(f"{'  (oscost mean)':<32} {'':<28} {ns(m)} {ns(b)} {m / b:>7.2f}")
if lm.get("lat_connect-overflows"):
    print(f"lat_connect on one CPU: {statistics.median(lm['lat_connect-overflows']):.0f} listen-queue "
          "overflows a run (median; each a SYN dropped and sent again a second later)")
PY
