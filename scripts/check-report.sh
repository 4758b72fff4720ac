#!/usr/bin/env bash
# Look at the report as a person would: render the run, comparison, matrix and history pages in
# headless Chromium at 1280 and 390 px wide, and check that every figure loads, nothing sticks out of
# the page or a section, figure text is at least 11 px at 1280 px, and the run page weighs
# under 1 MB. Prints one line per page and width; exits 1 on any problem, 0 with a message
# when no Chromium is installed (apt-get install chromium).
#
# usage: scripts/check-report.sh [RUN.json [BASE.json]]
#   env: OSCOST (the binary), CHROMIUM (the browser), SHOTS=DIR (keep screenshots there)
# Without runs, two quick runs of a few families are measured first (about 20 s).
set -euo pipefail
cd "$(dirname "$0")/.."
browser=${CHROMIUM:-}
for b in chromium chromium-browser google-chrome; do
  [ -z "$browser" ] && command -v "$b" >/dev/null && browser=$b
done
if [ -z "$browser" ]; then
  echo "check-report: no Chromium installed: skipped (apt-get install chromium)"
  exit 0
fi
oscost=${OSCOST:-target/release/oscost}
[ -x "$oscost" ] || cargo build --release --quiet
command -v python3 >/dev/null || { echo "python3 is needed" >&2; exit 2; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
run=${1:-}
base=${2:-}
if [ -z "$run" ]; then
  quick=(call/ timer/ syscall/getpid syscall/getppid spawn/fork spawn/thread switch/pipe-proc
         switch/ring ipc/pipe-1b mem/fault-write)
  "$oscost" run --quick --no-save --json "$tmp/a.json" "${quick[@]}" >/dev/null 2>&1 || true
  "$oscost" run --quick --no-save --json "$tmp/b.json" "${quick[@]}" >/dev/null 2>&1 || true
  run=$tmp/b.json base=$tmp/a.json
fi
[ -z "$base" ] && base=$run

t0=$(date +%s.%N)
"$oscost" report "$run" -o "$tmp/run" >/dev/null 2>&1
t1=$(date +%s.%N)
"$oscost" compare "$base" "$run" --report "$tmp/cmp" >/dev/null 2>&1 || true
# The matrix page: both runs imported into a store of their own.
"$oscost" import "$base" "$run" --db "$tmp/m.db" >/dev/null 2>&1 || true
"$oscost" matrix --db "$tmp/m.db" --report "$tmp/mtx" >/dev/null 2>&1 || true
"$oscost" history syscall/getpid --db "$tmp/m.db" --report "$tmp/hist" >/dev/null 2>&1 || true
bytes=$(stat -c %s "$tmp/run/index.html")
status=0
awk -v b="$bytes" -v a="$t0" -v z="$t1" 'BEGIN {
  printf "run page: %.0f KB (limit 1024), written in %.2f s (limit 1)\n", b / 1024, z - a }'
if [ "$bytes" -gt 1048576 ]; then echo "FAIL: the run page is over 1 MB"; status=1; fi

harness='<!DOCTYPE html><html><body style="margin:0">
<iframe id="f" src="index.html" style="width:100vw;height:3000px;border:0;display:block"></iframe>
<pre id="result">pending</pre>
<script>
// The page is laid out in an iframe as wide as the hash says: headless Chromium will not make
// a window narrower than 500 px, and a phone is 390.
const f = document.getElementById("f");
if (location.hash) f.style.width = location.hash.slice(1) + "px";
f.addEventListener("load", async () => {
  const out = document.getElementById("result");
  const d = f.contentDocument, w = f.contentWindow, problems = [];
  if (!d) { out.textContent = JSON.stringify({problems: ["cannot read the page"]}); return; }
  d.querySelectorAll("details").forEach(x => x.open = true);
  d.querySelectorAll("img").forEach(i => i.loading = "eager");
  await Promise.all([...d.images].map(i => i.complete ? 0 :
    new Promise(r => { i.onload = r; i.onerror = r; })));
  for (const i of d.images) if (!i.naturalWidth) problems.push("not loaded: " + i.getAttribute("src"));
  const W = d.documentElement.scrollWidth;
  if (W > w.innerWidth + 1) problems.push("page wider than the window: " + W);
  for (const s of d.querySelectorAll("section, header"))
    if (s.scrollWidth > s.clientWidth + 1) problems.push((s.id || s.tagName) + " overflows by " + (s.scrollWidth - s.clientWidth) + " px");
  for (const fig of d.querySelectorAll("figure")) {
    const c = fig.firstElementChild; if (!c) continue;
    const fr = fig.getBoundingClientRect(), cr = c.getBoundingClientRect();
    const scrolls = getComputedStyle(fig).overflowX !== "visible";
    if (!scrolls && (cr.right > fr.right + 1 || cr.left < fr.left - 1)) problems.push("a figure overflows its box");
    if (cr.bottom > fr.bottom + 1) problems.push("a figure is taller than its box");
  }
  let minPx = 1e9;
  for (const svg of d.querySelectorAll("figure svg")) {
    const vb = svg.viewBox.baseVal;
    const scale = svg.getBoundingClientRect().width / ((vb && vb.width) || svg.width.baseVal.value);
    for (const t of svg.querySelectorAll("text"))
      minPx = Math.min(minPx, parseFloat(t.getAttribute("font-size")) * scale);
  }
  out.textContent = JSON.stringify({width: w.innerWidth, figures: d.querySelectorAll("figure").length,
                                    minTextPx: minPx, problems});
});
</script></body></html>'

for page in run cmp mtx hist; do
  echo "$harness" > "$tmp/$page/check.html"
  for width in 1280 390; do
    window=$(( width > 500 ? width : 500 ))
    dom=$("$browser" --headless=new --no-sandbox --disable-gpu --hide-scrollbars \
      --allow-file-access-from-files --virtual-time-budget=15000 --window-size="$window,1000" \
      --dump-dom "file://$tmp/$page/check.html#$width" 2>/dev/null || true)
    if [ -n "${SHOTS:-}" ]; then
      mkdir -p "$SHOTS"
      "$browser" --headless=new --no-sandbox --disable-gpu --hide-scrollbars \
        --allow-file-access-from-files --virtual-time-budget=5000 \
        --window-size="$window,3000" --screenshot="$SHOTS/$page-$width.png" \
        "file://$tmp/$page/check.html#$width" >/dev/null 2>&1 || true
    fi
    echo "$dom" | python3 -c '
import sys, json, re, html
page, width = sys.argv[1], int(sys.argv[2])
m = re.search(r"<pre id=\"result\">(.*?)</pre>", sys.stdin.read(), re.S)
if not m or m.group(1).strip() == "pending":
    print(f"{page} page at {width} px: FAIL the check did not run"); sys.exit(1)
r = json.loads(html.unescape(m.group(1)))
bad, px, n = list(r["problems"]), r["minTextPx"], r["figures"]
if width >= 1280 and px < 11:
    bad.append(f"figure text {px:.1f} px")
figs = f"{n} figures, smallest figure text {px:.1f} px" if n else "no figures (a table page)"
print(f"{page} page at {width} px: {figs}: " + ("ok" if not bad else "FAIL " + "; ".join(bad[:5])))
sys.exit(1 if bad else 0)
' "$page" "$width" || status=1
  done
done
exit $status
