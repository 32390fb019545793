#!/usr/bin/env python3
"""bench/run.py: run the workloads of bench/workloads.c under libmalloc_prof
and its peers, side by side, and write the results.

Started by bench/run.sh, which builds what this needs.  Every workload runs
under every allocator through LD_PRELOAD, interleaved (each repetition runs
all allocators one after another, in a rotated order), so that the noise of
a shared machine falls on all of them alike; the report takes medians and
only compares numbers from this one run.  Instruction counts from
valgrind's callgrind, which do not depend on the machine's load, back the
single-thread comparisons and the hot-path micro workload.

Writes bench/results.md (the tables, the targets and whether they are met),
bench/results.json (the raw samples) and doc/performance-ratios.svg (the
time ratios as a chart).
"""
import argparse
import datetime
import json
import math
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIBDIR = "/usr/lib/x86_64-linux-gnu"
PEER_LIBS = {
    "jemalloc": LIBDIR + "/libjemalloc.so.2",
    "tcmalloc": LIBDIR + "/libtcmalloc_minimal.so.4",
    "mimalloc": LIBDIR + "/libmimalloc.so.2",
    "glibc": None,
}
PEERS = ["jemalloc", "tcmalloc", "mimalloc", "glibc"]

PROF_INACTIVE = "prof:true,prof_active:false"
PROF_ACTIVE = "prof:true,prof_active:true,lg_prof_sample:19"
# Issue 20's "with all of it on": every profile a user can add to the
# sampled heap (the peak and lifetimes are on with prof:true; records of
# recent allocations, prof.stats, cumulative counts, the OS's thread names).
PROF_ALL = (PROF_ACTIVE + ",prof_stats:true,prof_recent_alloc_max:1000,"
            "prof_accum:true,prof_sys_thread_name:true")

# name, threads, counts towards the time geomean, runs under callgrind
WORKLOADS = [
    ("churn", 1, True, True),
    ("logsizes", 1, True, True),
    ("prodcons", 2, True, False),
    ("scale", 4, True, False),
    ("larson", 4, True, False),
    ("falseshare", 4, True, False),
    ("threadchurn", 4, True, False),
    ("realloc", 1, True, True),
    ("reallocgrow", 1, True, True),
    ("midsize", 1, True, True),
    ("large", 1, True, False),
    ("largezero", 1, True, False),
    # issue 15 part 5's shapes: glibc's bench-malloc-simple, alloc-test,
    # rpmalloc's cross-thread test (larson is above).
    ("simple", 1, True, True),
    ("alloctest", 8, True, False),
    ("xthread", 2, True, False),
    # frag sleeps through a decay period: its time says nothing.
    ("frag", 1, False, False),
]

# Decay is made equal where the option is shared (ours and jemalloc) so
# that frag's "after decay" reading compares like with like.  frag sleeps
# with a trickle of tiny allocations: purging on time while the program
# makes (almost) no calls takes a background thread in both, which
# jemalloc's and our background_thread option provide (both default off).
FRAG_DECAY_MS = 1000
FRAG_SLEEP_MS = 1500


def configs(ours, nofp):
    """The allocator configurations: the five main ones, then the
    profiling rows of ours and jemalloc, then (nofp: the workload program
    built without frame pointers is there) ours on that program with
    profiling off and active.  A row: name, library, MALLOC_CONF, which
    program ("fp": --mpbench, "nofp": --mpbench-nofp)."""
    rows = [("ours", ours, None, "fp")]
    rows += [(p, PEER_LIBS[p], None, "fp") for p in PEERS]
    rows += [
        ("ours prof inactive", ours, PROF_INACTIVE, "fp"),
        ("ours prof active", ours, PROF_ACTIVE, "fp"),
        ("ours prof all", ours, PROF_ALL, "fp"),
        ("jemalloc prof inactive", PEER_LIBS["jemalloc"], PROF_INACTIVE, "fp"),
        ("jemalloc prof active", PEER_LIBS["jemalloc"], PROF_ACTIVE, "fp"),
    ]
    if nofp:
        rows += [
            ("ours nofp", ours, None, "nofp"),
            ("ours nofp prof active", ours, PROF_ACTIVE, "nofp"),
        ]
    return rows


def program(args, prog):
    return args.mpbench_nofp if prog == "nofp" else args.mpbench


def clean_env():
    env = dict(os.environ)
    for k in list(env):
        if k.endswith("MALLOC_CONF") or k.startswith("MIMALLOC_") or \
                k.startswith("TCMALLOC_") or k == "LD_PRELOAD":
            del env[k]
    return env


def run_env(lib, conf, workload):
    env = clean_env()
    if lib:
        env["LD_PRELOAD"] = lib
    parts = [conf] if conf else []
    if workload == "frag" and lib and ("jemalloc" in lib or "malloc_prof" in lib):
        parts.append("dirty_decay_ms:%d,muzzy_decay_ms:0,"
                     "background_thread:true" % FRAG_DECAY_MS)
    if parts:
        env["MALLOC_CONF"] = ",".join(parts)
    env["MPBENCH_DECAY_MS"] = str(FRAG_SLEEP_MS)
    return env


def parse_fields(line):
    return dict(re.findall(r"(\w+)=(\S+)", line))


def run_once(mpbench, workload, scale, env):
    """One run: wall seconds, the child's own peak RSS in KiB (the
    VmHWM it prints: wait4's ru_maxrss would include this runner's own
    high-water mark, which a vfork+exec child inherits), the fields of
    its output line."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        pid = os.posix_spawn(mpbench, [mpbench, workload, str(scale)], env,
                             file_actions=[(os.POSIX_SPAWN_DUP2, out.fileno(), 1),
                                           (os.POSIX_SPAWN_DUP2, err.fileno(), 2)])
        _, status, ru = os.wait4(pid, 0)
        wall = time.perf_counter() - t0
        out.seek(0)
        err.seek(0)
        text = out.read().decode()
        if os.waitstatus_to_exitcode(status) != 0:
            raise RuntimeError("%s under %s exited %d: %s" % (
                workload, env.get("LD_PRELOAD", "glibc"),
                os.waitstatus_to_exitcode(status),
                err.read().decode(errors="replace").strip()[:300]))
        fields = parse_fields(text)
        rss = int(fields.get("vmhwm_kb", 0)) or ru.ru_maxrss
        return wall, rss, fields


def callgrind_instr(cmd, env):
    with tempfile.NamedTemporaryFile(suffix=".cg") as f:
        p = subprocess.run(["valgrind", "--tool=callgrind",
                            "--callgrind-out-file=" + f.name] + cmd,
                           env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE)
        if p.returncode != 0:
            raise RuntimeError("callgrind %s: %s" % (
                " ".join(cmd), p.stderr.decode(errors="replace")[-300:]))
        m = re.search(rb"Collected : (\d+)", p.stderr)
        if not m:
            raise RuntimeError("callgrind printed no total for " + " ".join(cmd))
        return int(m.group(1))


def geomean(xs):
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def fmt_ratio(r):
    return "—" if r is None or math.isnan(r) else "%.2f" % r


def machine():
    model = "unknown cpu"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem = ""
    try:
        with open("/proc/meminfo") as f:
            kb = int(f.readline().split()[1])
            mem = ", %.0f GiB RAM" % (kb / 1048576)
    except (OSError, ValueError, IndexError):
        pass
    return "%s, %d CPUs%s, Linux %s" % (model, os.cpu_count(), mem,
                                       platform.release())


def peer_versions():
    out = {}
    for pkg in ["libjemalloc2", "libtcmalloc-minimal4", "libmimalloc2.0", "libc6"]:
        p = subprocess.run(["dpkg-query", "-W", "-f=${Version}", pkg],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        out[pkg] = p.stdout.decode() or "?"
    return out


def timed_runs(args, rows, workloads):
    samples = {}  # (workload, config) -> list of (wall, rss, fields)
    total = args.reps * len(workloads) * len(rows)
    done = 0
    for rep in range(args.reps):
        for w in workloads:
            order = rows[rep % len(rows):] + rows[:rep % len(rows)]
            for name, lib, conf, prog in order:
                r = run_once(program(args, prog), w, args.scale,
                             run_env(lib, conf, w))
                samples.setdefault((w, name), []).append(r)
                done += 1
                print("\r[%d/%d] rep %d %-12s %-24s %6.3f s %7.1f MB   " % (
                    done, total, rep + 1, w, name, r[0], r[1] / 1024),
                    end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    return samples


def callgrind_runs(args, rows):
    """Instruction totals: the single-thread workloads at a small scale,
    and instructions per malloc+free pair from the micro workloads (the
    difference of two iteration counts, minus the empty loop)."""
    cg = {}
    single = [w for w, _, _, c in WORKLOADS if c and w in args.workloads]
    for w in single:
        for name, lib, conf, prog in rows:
            cg[(w, name)] = callgrind_instr(
                [program(args, prog), w, str(args.cg_scale)],
                run_env(lib, conf, w))
            print("\rcallgrind %-10s %-24s %d      " % (w, name, cg[(w, name)]),
                  end="", file=sys.stderr, flush=True)
    n1, n2 = 100000, 1100000
    empty = [callgrind_instr([args.mpbench, "micro_empty", str(n)],
                             run_env(None, None, "micro")) for n in (n1, n2)]
    loop = (empty[1] - empty[0]) / (n2 - n1)
    per_pair = {}
    for micro in ("micro", "micro_batch"):
        for name, lib, conf, prog in rows:
            t = [callgrind_instr([program(args, prog), micro, str(n)],
                                 run_env(lib, conf, micro)) for n in (n1, n2)]
            per_pair[(micro, name)] = (t[1] - t[0]) / (n2 - n1) - loop
            print("\rcallgrind %-10s %-24s %.1f/pair      " % (
                micro, name, per_pair[(micro, name)]),
                end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    return cg, per_pair, loop


# A Python program whose heap has many distinct stacks: what users profile.
TOOL_WORKLOAD = (
    "import json, re, collections\n"
    "rows = [{'id': i, 'name': 'n%d' % i, 'tags': [str(j) for j in range(i % 40)]}"
    " for i in range(60000)]\n"
    "text = json.dumps(rows)\n"
    "back = json.loads(text)\n"
    "words = collections.Counter(re.findall(r'n[0-9]+', text))\n"
    "import ctypes\n"
    "ctypes.CDLL(None).mallctl(b'prof.dump', None, None, None, 0)\n"
    "print(len(back), len(words))\n")


def tool_runs(args):
    """malloc-prof top against jeprof --text on one heap profile of
    python3 running TOOL_WORKLOAD under libmalloc_prof (dumped through
    mallctl while its data is live): medians of interleaved runs."""
    jeprof = shutil_which("jeprof")
    python = shutil_which("python3")
    if jeprof is None or python is None or not os.access(args.tool, os.X_OK):
        print("tool comparison skipped: needs jeprof, python3 and %s"
              % args.tool, file=sys.stderr)
        return None
    python = os.path.realpath(python)
    with tempfile.TemporaryDirectory(prefix="mp-bench-tool.") as d:
        # PYTHONMALLOC=malloc: every object through malloc, not pymalloc.
        env = dict(os.environ, LD_PRELOAD=args.ours, PYTHONMALLOC="malloc",
                   MALLOC_CONF="prof:true,lg_prof_sample:12,"
                   "prof_prefix:%s/py" % d)
        subprocess.run([python, "-c", TOOL_WORKLOAD], env=env, check=True,
                       stdout=subprocess.DEVNULL)
        dumps = [f for f in os.listdir(d) if f.endswith(".m0.heap")]
        if len(dumps) != 1:
            sys.exit("<malloc_prof>: bench: python3 under libmalloc_prof left "
                     "%d prof.dump dumps in %s, expected 1" % (len(dumps), d))
        dump = os.path.join(d, dumps[0])
        with open(dump) as f:
            nstacks = sum(1 for line in f if line.startswith("@"))
        cmds = {"malloc-prof top": [args.tool, "top", python, dump],
                "jeprof --text": [jeprof, "--text", python, dump]}
        times = {k: [] for k in cmds}
        for rep in range(args.reps):
            for k, c in cmds.items():
                t = time.perf_counter()
                subprocess.run(c, check=True, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
                times[k].append(time.perf_counter() - t)
                print("\rtool %-16s rep %d %6.3f s   " % (k, rep + 1,
                      times[k][-1]), end="", file=sys.stderr, flush=True)
        print(file=sys.stderr)
        return {"stacks": nstacks, "bytes": os.path.getsize(dump),
                "times": times}


def shutil_which(name):
    for d in os.environ.get("PATH", "").split(":"):
        p = os.path.join(d, name)
        if os.path.isfile(p) and os.access(p, os.X_OK):
            return p
    return None


class Report:
    def __init__(self):
        self.lines = []
        self.verdicts = []

    def add(self, s=""):
        self.lines.append(s)

    def target(self, ok, text, cause=None):
        """A verdict line; a missed one points at the analysis of its
        cause (a section of doc/performance.md, kept by hand from the
        profiles, since no script can say why)."""
        line = ("MET " if ok else "MISSED ") + text
        if not ok and cause:
            line += " (cause: doc/performance.md, %s)" % cause
        self.verdicts.append(line)


def per_allocator_header(rep, title, main):
    """A section whose table has a column per allocator, then a ratio
    column per peer."""
    rep.add("## " + title)
    rep.add()
    rep.add("| workload | " + " | ".join(main) + " | " +
            " | ".join("÷" + p[:2] for p in PEERS) + " |")
    rep.add("|---" * (1 + len(main) + len(PEERS)) + "|")


def summarise_tool(rep, tool):
    if tool is None:
        return
    t = tool["times"]
    mp = statistics.median(t["malloc-prof top"])
    je = statistics.median(t["jeprof --text"])
    rep.add("## malloc-prof against jeprof")
    rep.add()
    rep.add("One heap profile of python3 running a JSON/regex workload under "
            "libmalloc_prof (lg_prof_sample 12: %d stacks, %d bytes), read "
            "with the same program file; medians of %d interleaved runs." % (
                tool["stacks"], tool["bytes"], len(t["jeprof --text"])))
    rep.add()
    rep.add("| command | median (s) | min–max |")
    rep.add("|---|---|---|")
    for k in ("malloc-prof top", "jeprof --text"):
        rep.add("| `%s` | %.3f | %.3f–%.3f |" % (
            k, statistics.median(t[k]), min(t[k]), max(t[k])))
    rep.add()
    rep.target(je / mp >= 10,
               "malloc-prof top at least 10× faster than jeprof --text: "
               "%.0f×" % (je / mp), "\"malloc-prof\"")


def summarise(args, rows, samples, cg, per_pair, loop, started, elapsed,
              tool=None):
    main = ["ours"] + PEERS
    workloads = [w for w, _, _, _ in WORKLOADS if w in args.workloads]
    timew = [w for w, _, t, _ in WORKLOADS if t and w in args.workloads]
    med = {k: statistics.median(s[0] for s in v) for k, v in samples.items()}
    rss = {k: statistics.median(s[1] for s in v) for k, v in samples.items()}
    # Peak RSS less the file-backed pages (the programs' and libraries'
    # own files, shared with the page cache) resident at exit: the memory
    # the process allocated itself.  0 where the program printed none.
    anon = {k: statistics.median(max(s[1] - int(s[2].get("rss_file_kb", 0)), 1)
                                 for s in v)
            for k, v in samples.items()}
    rep = Report()
    rep.add("# Benchmark results")
    rep.add()
    rep.add("- Date: %s (UTC), %.0f minutes" % (started, elapsed / 60))
    rep.add("- Machine: %s" % machine())
    rep.add("- Command: `sh bench/run.sh %s`" % " ".join(args.passthrough))
    vers = peer_versions()
    rep.add("- Peers (Debian packages, LD_PRELOAD): jemalloc %s, tcmalloc %s, "
            "mimalloc %s, glibc %s" % (vers["libjemalloc2"],
                                       vers["libtcmalloc-minimal4"],
                                       vers["libmimalloc2.0"], vers["libc6"]))
    rep.add("- %d repetitions of every workload under every allocator, "
            "interleaved; medians, with min–max.  Scale %.2f." % (
                args.reps, args.scale))
    rep.add("- Ratios are ours / peer: below 1.00 means ours is faster or "
            "smaller.  Only ratios from this one run are comparable.")
    rep.add()

    per_allocator_header(rep, "Wall time (seconds)", main)
    ratios = {p: [] for p in PEERS}
    best_tm, best_all = [], []
    for w in workloads:
        cells = []
        for c in main:
            v = [s[0] for s in samples[(w, c)]]
            cells.append("%.3f (%.3f–%.3f)" % (med[(w, c)], min(v), max(v)))
        rs = []
        for p in PEERS:
            r = med[(w, "ours")] / med[(w, p)]
            rs.append(fmt_ratio(r))
            if w in timew:
                ratios[p].append(r)
        if w in timew:
            best_tm.append(med[(w, "ours")] /
                           min(med[(w, "tcmalloc")], med[(w, "mimalloc")]))
            best_all.append((w, med[(w, "ours")] /
                             min(med[(w, p)] for p in PEERS)))
        rep.add("| %s%s | %s | %s |" % (w, "" if w in timew else " ¹",
                                        " | ".join(cells), " | ".join(rs)))
    gm = {p: geomean(ratios[p]) for p in PEERS}
    rep.add("| **geomean** |" + " |" * len(main) + " " +
            " | ".join("**%s**" % fmt_ratio(gm[p]) for p in PEERS) + " |")
    rep.add()
    rep.add("¹ frag sleeps through a decay period; its time is not in the "
            "geomean.")
    rep.add()
    gm_best_tm = geomean(best_tm)
    worst = max(best_all, key=lambda x: x[1]) if best_all else ("-", float("nan"))
    rep.target(gm["jemalloc"] <= 0.9,
               "time geomean vs jemalloc ≤ 0.90: %.2f" % gm["jemalloc"])
    rep.target(gm_best_tm <= 1.0,
               "time geomean vs the best of tcmalloc and mimalloc ≤ 1.00: %.2f"
               % gm_best_tm)
    over = sorted((x for x in best_all if x[1] > 1.25), key=lambda x: -x[1])
    rep.target(worst[1] <= 1.25,
               "no workload slower than 1.25× the best peer: worst is %s at %.2f"
               % worst + ("" if not over else "; over 1.25: " + ", ".join(
                   "%s %.2f" % x for x in over)),
               "\"What the profiles show\", under each workload's name")

    # Issue 15 part 5: against the best peer per workload.
    gm_best = geomean([r for _, r in best_all])
    rep.target(gm_best <= 0.95,
               "time geomean vs the best peer per workload ≤ 0.95: %.2f"
               % gm_best)
    over110 = sorted((x for x in best_all if x[1] > 1.10), key=lambda x: -x[1])
    rep.target(not over110,
               "no workload slower than 1.10× the best peer" +
               ("" if not over110 else ": " + ", ".join(
                   "%s %.2f" % x for x in over110)),
               "\"What the profiles show\", under each workload's name")

    per_allocator_header(rep, "Peak RSS (MB)", main)
    rratios = {p: [] for p in PEERS}
    for w in workloads:
        cells = ["%.1f" % (rss[(w, c)] / 1024) for c in main]
        rs = []
        for p in PEERS:
            r = rss[(w, "ours")] / rss[(w, p)]
            rratios[p].append(r)
            rs.append(fmt_ratio(r))
        rep.add("| %s | %s | %s |" % (w, " | ".join(cells), " | ".join(rs)))
    rgm = {p: geomean(rratios[p]) for p in PEERS}
    rep.add("| **geomean** |" + " |" * len(main) + " " +
            " | ".join("**%s**" % fmt_ratio(rgm[p]) for p in PEERS) + " |")
    rep.add()
    rep.target(rgm["jemalloc"] <= 1.0,
               "peak RSS geomean vs jemalloc ≤ 1.00: %.2f" % rgm["jemalloc"])
    over_je = [(w, rss[(w, "ours")] / rss[(w, "jemalloc")]) for w in workloads
               if rss[(w, "ours")] > rss[(w, "jemalloc")]]
    rep.target(not over_je,
               "peak RSS no higher than jemalloc's on each workload" +
               ("" if not over_je else ": " + ", ".join(
                   "%s %.2f" % x for x in over_je)))

    if "frag" in workloads:
        rep.add("## Fragmentation (frag, KiB, medians)")
        rep.add()
        rep.add("Fill with small objects, free 90%% at random, then allocate "
                "and free 64 MB of large blocks and wait %d ms (ours and "
                "jemalloc run with dirty_decay_ms:%d and background_thread:true; "
                "the others with their defaults)." % (FRAG_SLEEP_MS,
                                                       FRAG_DECAY_MS))
        rep.add()
        keys = ["live_kb", "rss_after_fill", "rss_after_free", "rss_after_decay"]
        rep.add("| allocator | " + " | ".join(keys) + " | after decay ÷ after free |")
        rep.add("|---" * (len(keys) + 2) + "|")
        for c in main:
            vals = [statistics.median(int(s[2].get(k, 0)) for s in
                                      samples[("frag", c)]) for k in keys]
            back = vals[3] / vals[2] if vals[2] else float("nan")
            rep.add("| %s | %s | %.2f |" % (c, " | ".join("%d" % v for v in vals),
                                          back))
            if c == "ours":
                rep.target(back <= 1.10,
                           "RSS after the large blocks are freed and decay has "
                           "run within 10%% of RSS before them: %.2f" % back)
        rep.add()

    rep.add("## Profiling overhead")
    rep.add()
    rep.add("Wall-time and peak-RSS ratios against the same allocator with "
            "profiling off (`%s` and `%s`), geometric means over the time "
            "workloads.  Peak RSS is VmHWM, which counts the pages of the "
            "program's and libraries' files it maps (a stack walk by "
            ".eh_frame maps those of the tables it reads, shared with the "
            "page cache); peak anonymous RSS is VmHWM less the file-backed "
            "pages resident at exit: the memory the process allocated.  "
            "\"ours prof all\" is `%s`: every profile on." %
            (PROF_INACTIVE, PROF_ACTIVE, PROF_ALL))
    rep.add()
    rep.add("| row | time geomean | peak RSS geomean | peak anonymous RSS "
            "geomean | callgrind instructions |")
    rep.add("|---|---|---|---|---|")
    over = {}
    for base, rowname in [("ours", "ours prof inactive"),
                          ("ours", "ours prof active"),
                          ("ours", "ours prof all"),
                          ("ours nofp", "ours nofp prof active"),
                          ("jemalloc", "jemalloc prof inactive"),
                          ("jemalloc", "jemalloc prof active")]:
        if (workloads[0], rowname) not in samples:
            continue
        t = geomean([med[(w, rowname)] / med[(w, base)] for w in timew])
        r = geomean([rss[(w, rowname)] / rss[(w, base)] for w in workloads])
        a = geomean([anon[(w, rowname)] / anon[(w, base)] for w in workloads])
        cgs = [cg[(w, rowname)] / cg[(w, base)] for w, _, _, c in WORKLOADS
               if c and (w, rowname) in cg]
        ci = geomean(cgs) if cgs else float("nan")
        over[rowname] = (t, r, ci, a)
        rep.add("| %s | %+.1f%% | %+.1f%% | %+.1f%% | %s |" % (
            rowname, (t - 1) * 100, (r - 1) * 100, (a - 1) * 100,
            "—" if math.isnan(ci) else "%+.2f%%" % ((ci - 1) * 100)))
    rep.add()
    # Per workload: where the geomeans above come from (a workload whose
    # inactive row moves as much as its active one shows this run's
    # noise, not the profiler's cost).
    prof_rows = [(b, r) for b, r in [("ours", "ours prof inactive"),
                                      ("ours", "ours prof active"),
                                      ("ours", "ours prof all"),
                                      ("ours nofp", "ours nofp prof active")]
                 if (workloads[0], r) in samples]
    if prof_rows:
        rep.add("Per workload, each row over its base (time, peak RSS, peak "
                "anonymous RSS; medians):")
        rep.add()
        rep.add("| workload | " + " | ".join(r for _, r in prof_rows) + " |")
        rep.add("|---" * (len(prof_rows) + 1) + "|")
        for w in workloads:
            cells = []
            for base, rowname in prof_rows:
                cells.append("%+.1f%% / %+.1f%% / %+.1f%%" % (
                    (med[(w, rowname)] / med[(w, base)] - 1) * 100,
                    (rss[(w, rowname)] / rss[(w, base)] - 1) * 100,
                    (anon[(w, rowname)] / anon[(w, base)] - 1) * 100))
            rep.add("| %s | %s |" % (w, " | ".join(cells)))
        rep.add()
    # The two programs' rows (with and without frame pointers): the same
    # three targets, each said of its program.
    for rowname, costs, grows in [
            ("ours prof active", "profiling active costs",
             "profiling active grows peak"),
            ("ours prof all", "profiling with every profile on costs",
             "profiling with every profile on grows peak"),
            ("ours nofp prof active",
             "profiling active on the program built without frame "
             "pointers (prof_unwind:auto walks it by .eh_frame) costs",
             "profiling active on that program grows peak")]:
        if rowname not in over:
            continue
        t, r, ci, a = over[rowname]
        rep.target(ci <= 1.01 if not math.isnan(ci) else t <= 1.01,
                   "%s ≤ 1%%: time %+.1f%%, instructions %+.2f%%"
                   % (costs, (t - 1) * 100, (ci - 1) * 100))
        rep.target(r <= 1.01, "%s RSS ≤ 1%%: %+.1f%%"
                   % (grows, (r - 1) * 100))
        rep.target(a <= 1.01, "%s anonymous RSS ≤ 1%%: %+.1f%%"
                   % (grows, (a - 1) * 100))
    if "ours prof inactive" in over:
        t, r, ci, _ = over["ours prof inactive"]
        rep.target(ci <= 1.003 if not math.isnan(ci) else t <= 1.003,
                   "profiling inactive costs ≤ 0.3%%: time %+.1f%%, instructions %+.2f%%"
                   % ((t - 1) * 100, (ci - 1) * 100))
    if "ours prof active" in over and "jemalloc prof active" in over:
        a, j = over["ours prof active"], over["jemalloc prof active"]
        rep.target(a[2] <= j[2] if not math.isnan(a[2]) else a[0] <= j[0],
                   "profiling overhead below jemalloc's: instructions %+.2f%% vs %+.2f%%"
                   % ((a[2] - 1) * 100, (j[2] - 1) * 100))

    if cg:
        rep.add("## Instructions (callgrind, scale %.2f)" % args.cg_scale)
        rep.add()
        names = [r[0] for r in rows]
        rep.add("| workload | " + " | ".join(names) + " |")
        rep.add("|---" * (1 + len(names)) + "|")
        for w, _, _, c in WORKLOADS:
            if c and (w, "ours") in cg:
                rep.add("| %s | %s |" % (w, " | ".join(
                    "%.1fM" % (cg[(w, n)] / 1e6) for n in names)))
        for micro in ("micro", "micro_batch"):
            rep.add("| %s, per pair | %s |" % (micro, " | ".join(
                "%.1f" % per_pair[(micro, n)] for n in names)))
        rep.add()
        rep.add("Per pair: instructions of one malloc(64)+free (micro) or one "
                "pair out of batches of 1000 sizes 16–512 B (micro_batch), "
                "the empty loop's %.1f instructions subtracted." % loop)
        rep.add()
        ours, je = per_pair[("micro", "ours")], per_pair[("micro", "jemalloc")]
        # Issue 15 part 4's target (the earlier ≤ 20 is withdrawn there);
        # its sized pair (≤ 30) is bench/cxx.sh's micro_free_sized.
        rep.target(ours <= 45 and ours < je,
                   "hot path ≤ 45 instructions per malloc(64)+free pair and "
                   "fewer than jemalloc's: %.1f (jemalloc %.1f)" % (ours, je),
                   "\"The hot path's floor\"")

    summarise_tool(rep, tool)

    rep.add("## Targets")
    rep.add()
    for v in rep.verdicts:
        rep.add("- " + v)
    rep.add()
    return rep, gm


def svg_chart(path, samples, workloads):
    """Horizontal bars of ours/peer time ratios on a log axis."""
    med = {k: statistics.median(s[0] for s in v) for k, v in samples.items()}
    colors = {"jemalloc": "#1f77b4", "tcmalloc": "#ff7f0e",
              "mimalloc": "#2ca02c", "glibc": "#7f7f7f"}
    lo, hi = 0.25, 4.0
    left, width, bar, gap = 110, 520, 7, 10
    rows = [w for w in workloads if (w, "ours") in med]
    height = 40 + len(rows) * (4 * bar + gap) + 40

    def x(r):
        r = min(max(r, lo), hi)
        return left + (math.log(r) - math.log(lo)) / (math.log(hi) - math.log(lo)) * width

    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
           'font-family="sans-serif" font-size="11">' % (left + width + 130, height),
           '<rect width="100%" height="100%" fill="white"/>',
           '<text x="%d" y="16" font-size="13">Wall time, ours ÷ peer '
           '(left of 1 = ours faster; log scale)</text>' % left]
    y = 30
    for w in rows:
        out.append('<text x="%d" y="%d" text-anchor="end">%s</text>' % (
            left - 6, y + 2 * bar + 4, w))
        for p in PEERS:
            r = med[(w, "ours")] / med[(w, p)]
            x0, x1 = sorted((x(1.0), x(r)))
            out.append('<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s"/>'
                       % (x0, y, max(x1 - x0, 1), bar - 1, colors[p]))
            out.append('<text x="%.1f" y="%d" font-size="8">%.2f</text>' % (
                x1 + 2 if r >= 1 else x0 - 24, y + bar - 1, r))
            y += bar
        y += gap
    for t in (0.25, 0.5, 1.0, 2.0, 4.0):
        out.append('<line x1="%.1f" y1="26" x2="%.1f" y2="%d" stroke="%s"/>' % (
            x(t), x(t), y, "black" if t == 1.0 else "#ddd"))
        out.append('<text x="%.1f" y="%d" text-anchor="middle">%g</text>' % (
            x(t), y + 14, t))
    ly = 40
    for p in PEERS:
        out.append('<rect x="%d" y="%d" width="10" height="10" fill="%s"/>' % (
            left + width + 20, ly, colors[p]))
        out.append('<text x="%d" y="%d">vs %s</text>' % (left + width + 34, ly + 9, p))
        ly += 16
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ours", required=True, help="path of libmalloc_prof.so")
    ap.add_argument("--mpbench", required=True, help="path of the workload program")
    ap.add_argument("--mpbench-nofp", default=None,
                    help="the workload program built without frame pointers: "
                         "adds the rows of ours on it, profiling off and active")
    ap.add_argument("--reps", type=int, default=5, help="repetitions (default 5)")
    ap.add_argument("--scale", type=float, default=1.0,
                    help="iteration scale of the timed runs (default 1.0)")
    ap.add_argument("--cg-scale", type=float, default=0.05,
                    help="iteration scale under callgrind (default 0.05)")
    ap.add_argument("--only", default="",
                    help="comma-separated workloads (default: all)")
    ap.add_argument("--no-prof", action="store_true",
                    help="skip the profiling rows")
    ap.add_argument("--no-callgrind", action="store_true",
                    help="skip the instruction counts")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results.md"),
                    help="report file (default bench/results.md)")
    ap.add_argument("--tool", default="",
                    help="path of malloc-prof: time its top against jeprof "
                         "--text on a python3 profile")
    args = ap.parse_args()
    # The command line as the user gave it to bench/run.sh: without the
    # paths run.sh adds.
    argv, args.passthrough = sys.argv[1:], []
    while argv:
        if argv[0] in ("--ours", "--mpbench", "--mpbench-nofp", "--tool") \
                and len(argv) > 1:
            argv = argv[2:]
        else:
            args.passthrough.append(argv.pop(0))
    known = [w for w, _, _, _ in WORKLOADS]
    args.workloads = known if not args.only else args.only.split(",")
    for w in args.workloads:
        if w not in known:
            sys.exit("<malloc_prof>: bench: unknown workload \"%s\" (known: %s)"
                     % (w, ", ".join(known)))
    for p in PEERS:
        if PEER_LIBS[p] and not os.path.exists(PEER_LIBS[p]):
            sys.exit("<malloc_prof>: bench: %s not found at %s (run bench/run.sh, "
                     "which installs it)" % (p, PEER_LIBS[p]))
    rows = configs(args.ours, args.mpbench_nofp is not None)
    if args.no_prof:
        rows = rows[:5]
    started = datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M")
    t0 = time.time()
    samples = timed_runs(args, rows, args.workloads)
    cg, per_pair, loop = ({}, {}, 0.0) if args.no_callgrind else callgrind_runs(args, rows)
    tool = tool_runs(args) if args.tool else None
    rep, _ = summarise(args, rows, samples, cg, per_pair, loop, started,
                       time.time() - t0, tool)
    with open(args.out, "w") as f:
        f.write("\n".join(rep.lines))
    raw = {"%s|%s" % k: v for k, v in samples.items()}
    raw.update({"callgrind|%s|%s" % k: v for k, v in cg.items()})
    raw.update({"per_pair|%s|%s" % k: v for k, v in per_pair.items()})
    if tool is not None:
        raw.update({"tool|%s" % k: v for k, v in tool["times"].items()})
    with open(os.path.splitext(args.out)[0] + ".json", "w") as f:
        json.dump(raw, f, indent=0)
    svg_chart(os.path.join(ROOT, "doc", "performance-ratios.svg"), samples,
              [w for w, _, t, _ in WORKLOADS if t and w in args.workloads])
    print("\n".join(rep.lines[-(len(rep.verdicts) + 1):]))
    print("wrote %s" % args.out)


if __name__ == "__main__":
    main()
