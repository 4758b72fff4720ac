#!/usr/bin/env python3
"""A hostile pass over oscost's store, outputs and terminal text, as a user could make one.

    scripts/check-hostile.py [OSCOST_BINARY]     (default: target/release/oscost)

Builds every combination of a command, an output flag and a hostile target (the store itself
spelled five ways, its journals, a FIFO with no reader, a device, a socket, a directory, a
name too long, a run file the command reads), plus hostile labels, --where conditions and
store URLs with passwords, and checks after each case:
  - no panic (exit 101, "panicked");
  - the store is still an SQLite file holding the runs it held;
  - special files are what they were (the FIFO a FIFO, /dev/null a device);
  - no password and no raw control character or bidirectional override was printed;
  - a case still waiting 1.5 s in is sent SIGINT and must end within 1 s.
Prints one line per failing case and a closing "N passed, N failed" line. Uses
OSCOST_TEST_PG (a PostgreSQL URL) for the URL cases when set.
"""

import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time

BIN = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "target/release/oscost")
BAD_CHARS = ["\x1b", "\x07", "\u202e"]
SECRET = "s3cr3t-pw"


def run(args, env=None, wait_before_int=1.5):
    """Run oscost; SIGINT it if still running after `wait_before_int` s. Returns
    (code, output, took_after_int or None)."""
    e = dict(os.environ, NO_COLOR="1")
    e.update(env or {})
    p = subprocess.Popen([BIN] + args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=e,
                         stdin=subprocess.DEVNULL)
    try:
        out, _ = p.communicate(timeout=wait_before_int)
        return p.returncode, out.decode("utf-8", "replace"), None
    except subprocess.TimeoutExpired:
        t = time.monotonic()
        p.send_signal(signal.SIGINT)
        try:
            out, _ = p.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            p.kill()
            out, _ = p.communicate()
        return p.returncode, out.decode("utf-8", "replace"), time.monotonic() - t


def main():
    work = tempfile.mkdtemp(prefix="oscost-hostile-")
    os.chdir(work)
    db = os.path.join(work, "s.db")
    env = {"OSCOST_DB": db, "XDG_DATA_HOME": os.path.join(work, "data")}
    code, out, _ = run(["run", "--samples", "40", "call/f0", "--label", "base", "--json", "r.json"],
                       env, wait_before_int=60)
    assert code == 0, out
    code, out, _ = run(["run", "--samples", "40", "call/f0", "--label",
                        "L\x1b]0;pwned\x07\u202etxt.exe"], env, wait_before_int=60)
    assert code == 0, out
    os.mkdir("d")
    os.symlink("s.db", "link.db")
    os.mkfifo("fifo")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind("sock")
    os.mkdir("adir")
    targets = {
        "store": db, "store-rel": "s.db", "store-dotdot": "d/../s.db", "store-link": "link.db",
        "store-dotslash": "./s.db", "wal": db + "-wal", "journal": db + "-journal",
        "shm": db + "-shm", "fifo": "fifo", "devnull": "/dev/null", "socket": "sock",
        "dir": "adir", "long": "x" * 300, "nodir": "no/such/x", "runfile": "r.json",
        "stdout": "-", "proc-fd1": "/proc/self/fd/1",
    }
    commands = {
        "run": ["run", "--samples", "40", "call/f0"],
        "run-nosave": ["run", "--samples", "40", "call/f0", "--no-save"],
        "export": ["export", "last"],
        "matrix": ["matrix"],
        "compare": ["compare", "r.json", "last"],
        "ab": ["ab", "--b", "env", "--rounds", "1", "call/f0"],
    }
    cases = []
    for cname, cargs in commands.items():
        for flag in ["--json", "--csv", "--markdown"]:
            for tname, t in targets.items():
                cases.append((f"{cname} {flag} {tname}", cargs + [flag, t], {}))
        for tname in ["fifo", "long", "dir", "store"]:
            if cname in ("run", "matrix", "compare"):
                cases.append((f"{cname} --report {tname}", cargs + ["--report", targets[tname]], {}))
    for w in ["date>=banana", "date=2026-13-45", "date=\u00e92026", "label=\x1b[2J", "id>=x",
              "label=nomatch", "host~\u202e", "date<2026-1", "kernel!=", "id>=-1"]:
        for c in (["history"], ["matrix"], ["show", "last"], ["export", "last", "--json", "-"]):
            cases.append((f"{c[0]} --where {w!r}", c + ["--where", w], {}))
    for back in ["last~18446744073709551615", "last~-1", "last~99", "0", "-1", "9999999999999999999"]:
        for c in (["show"], ["export"], ["report"]):
            extra = ["--json", "-"] if c[0] == "export" else (["-o", "rep"] if c[0] == "report" else [])
            cases.append((f"{c[0]} {back}", c + [back] + extra, {}))
    mute = socket.socket()
    mute.bind(("127.0.0.1", 0))
    mute.listen(8)
    port = mute.getsockname()[1]
    urls = [f"postgresql://alice:{SECRET}@127.0.0.1:{port}/db",
            f"postgresql://alice@127.0.0.1:{port}/db?password={SECRET}",
            f"postgresql://alice@127.0.0.1:1/db?password={SECRET}&connect_timeout=1",
            f"postgres://alice:{SECRET}@127.0.0.1:1/db&password={SECRET}"]
    pg = os.environ.get("OSCOST_TEST_PG")
    if pg:
        urls.append(pg.rsplit("/", 1)[0] + f"/nosuchdb?password={SECRET}")
        urls.append(pg + ("&" if "?" in pg else "?") + f"password={SECRET}&sslmode=sometimes")
    for u in urls:
        for c in (["history"], ["run", "--samples", "40", "call/f0"], ["show", "last"],
                  ["push", "last", "--to", u], ["matrix"]):
            args = c + (["--db", u] if c[0] != "push" else [])
            cases.append((f"{c[0]} url {u[:40]}", args, {}))
    for label in ["a\x1b[31mred", "\u202eevil", "x" * 5000, "\r\n", "|pipe|"]:
        cases.append((f"run --label {label[:10]!r}",
                      ["run", "--samples", "40", "call/f0", "--label", label], {}))
    for imp in ["odd-date", "nul", "badid", "huge"]:
        cases.append((f"import {imp}", ["import", f"{imp}.json"], {}))
    for wrapper in ["/nonexistent/wrapper", "", "'unbalanced", "nosuchprogram-xyz", "/etc/passwd"]:
        cases.append((f"ab --b {wrapper!r}", ["ab", "--b", wrapper, "call/f0"], {}))
        cases.append((f"run --under {wrapper!r}", ["run", "--under", wrapper, "call/f0"], {}))
    for ev in ["cycles", "nosuch", "none", "cycles,instructions", ""]:
        cases.append((f"run --events {ev!r}", ["run", "--samples", "40", "call/f0", "--events", ev], {}))

    import json
    base = json.load(open("r.json"))
    for name, edit in [("odd-date", lambda r: r.__setitem__("started_at", "\u00e92026-11-24T00:00:00Z")),
                       ("nul", lambda r: r.__setitem__("label", "a\x00b")),
                       ("badid", lambda r: r["results"][0].__setitem__("id", "no slash")),
                       ("huge", lambda r: r["results"][0].__setitem__("samples_ns", [1e308] * 3))]:
        r = json.loads(json.dumps(base))
        edit(r)
        json.dump(r, open(f"{name}.json", "w"))

    def store_runs():
        with open(db, "rb") as f:
            if f.read(16) != b"SQLite format 3\x00":
                return None
        code, out, _ = run(["history", "--db", db], env, wait_before_int=10)
        return sum(1 for l in out.splitlines() if l.strip()[:1].isdigit()) if code == 0 else None

    passed, failed = 0, 0
    for name, args, extra in cases:
        before = store_runs()
        code, out, took = run(args, dict(env, **extra))
        wrong = []
        if code == 101 or "panicked" in out:
            wrong.append("panic")
        if took is not None and took > 1.0:
            wrong.append(f"took {took:.1f} s after SIGINT")
        after = store_runs()
        if after is None:
            wrong.append("the store was replaced")
        elif before is not None and after < before:
            wrong.append(f"runs lost ({before} -> {after})")
        if not stat.S_ISFIFO(os.lstat("fifo").st_mode):
            wrong.append("fifo replaced")
        if not stat.S_ISCHR(os.stat("/dev/null").st_mode):
            wrong.append("/dev/null replaced")
        if SECRET in out:
            wrong.append("password printed")
        if any(c in out for c in BAD_CHARS):
            wrong.append("raw control character printed")
        if wrong:
            failed += 1
            print(f"FAIL {name}: {', '.join(wrong)} (exit {code})\n    {out.strip()[:300]!r}")
        else:
            passed += 1
    sock.close()
    shutil.rmtree(work, ignore_errors=True)
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
