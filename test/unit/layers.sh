#!/bin/sh
# test/unit/layers.sh: the library's files depend on each other one way, as
# doc/design.md section 1 says (TAP).
#
# Reads the built objects with nm: file A depends on file B when A uses a
# symbol that B defines.  Checked:
#   1. the objects are there and nm reads them;
#   2. folders: sys uses nothing above it; alloc uses neither ctl nor prof;
#      ctl uses no prof function; prof is free to use sys, alloc and ctl;
#   3. no cycle among the files (one folder or several).
# Data every layer reads is not a dependency: the options (opt_*, the
# *_names tables beside them, defined beside conf.c's options table or by
# their module) and the thread state mp_tsd.  The joints doc/design.md
# names are exempt: tsd.c's boot and fork lists (any file), the sampling
# hook in malloc.c (prof), and conf.c's options table (its validators).
set -u

builddir=${top_builddir:-.}

if ! command -v nm >/dev/null 2>&1 || ! command -v python3 >/dev/null 2>&1; then
	echo "1..0 # SKIP nm (binutils) or python3 is not installed"
	exit 0
fi

echo "1..3"
exec python3 - "$builddir" <<'EOF'
import collections, glob, os, subprocess, sys

builddir = sys.argv[1]
objs = sorted(glob.glob(os.path.join(builddir, 'src/*/.libs/*.o')))
if not objs:
    objs = sorted(glob.glob(os.path.join(builddir, 'src/*/*.o')))

def source_name(obj):
    folder = os.path.basename(os.path.dirname(obj.replace('/.libs', '')))
    return folder + '/' + os.path.basename(obj)[:-2] + '.c'

defined, used = {}, {}
for obj in objs:
    out = subprocess.run(['nm', obj], capture_output=True, text=True)
    if out.returncode != 0:
        continue
    d, u = set(), set()
    for line in out.stdout.splitlines():
        f = line.split()
        if len(f) == 3 and f[1] in 'TDBRCVWG':
            d.add(f[2])
        elif len(f) == 2 and f[0] == 'U':
            u.add(f[1])
    defined[source_name(obj)], used[source_name(obj)] = d, u

files_ok = len(defined) >= 20 and 'alloc/malloc.c' in defined
print('%s 1 - nm read %d objects of src/' % ('ok' if files_ok else 'not ok',
      len(defined)))
if not files_ok:
    print('not ok 2 - folders # no objects')
    print('not ok 3 - cycles # no objects')
    sys.exit(0)

owner = {s: f for f, d in defined.items() for s in d}
folder = lambda f: f.split('/')[0]

def is_data(sym):
    return sym.startswith('opt_') or sym.endswith('_names') or \
        sym == 'mp_tsd'

def exempt(src, dst, sym):
    if src == 'alloc/tsd.c':                    # boot and fork lists
        return True
    if src == 'alloc/malloc.c' and folder(dst) == 'prof':   # sampling hook
        return True
    if src == 'ctl/conf.c' and sym.endswith('_conf_check'):  # options table
        return True
    return False

edges = collections.defaultdict(lambda: collections.defaultdict(list))
for src, syms in used.items():
    for sym in syms:
        dst = owner.get(sym)
        if dst is None or dst == src or is_data(sym) or exempt(src, dst, sym):
            continue
        edges[src][dst].append(sym)

allowed = {'sys': {'sys'}, 'alloc': {'sys', 'alloc'},
           'ctl': {'sys', 'alloc', 'ctl'},
           'prof': {'sys', 'alloc', 'ctl', 'prof'}}
bad = ['%s -> %s (%s)' % (s, d, ' '.join(sorted(edges[s][d])[:3]))
       for s in sorted(edges) for d in sorted(edges[s])
       if folder(d) not in allowed.get(folder(s), set())]
print('%s 2 - folders depend one way: sys <- alloc <- ctl, prof beside%s' %
      ('ok' if not bad else 'not ok', '' if not bad else
       ' # ' + '; '.join(bad)))

# Strongly connected components (Tarjan, iterative).
index, low, on, stack, comps, counter = {}, {}, set(), [], [], [0]
def strongconnect(root):
    work = [(root, iter(edges[root]))]
    index[root] = low[root] = counter[0]; counter[0] += 1
    stack.append(root); on.add(root)
    while work:
        v, it = work[-1]
        for w in it:
            if w not in index:
                index[w] = low[w] = counter[0]; counter[0] += 1
                stack.append(w); on.add(w)
                work.append((w, iter(edges[w])))
                break
            if w in on:
                low[v] = min(low[v], index[w])
        else:
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop(); on.discard(w); comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    comps.append(sorted(comp))
for f in sorted(defined):
    if f not in index:
        strongconnect(f)
detail = []
for comp in comps:
    links = ['%s -> %s (%s)' % (s, d, ' '.join(sorted(edges[s][d])[:3]))
             for s in comp for d in comp if d in edges[s]]
    detail.append('; '.join(links))
print('%s 3 - no cycle among the files%s' % ('ok' if not comps else 'not ok',
      '' if not comps else ' # ' + ' | '.join(detail)))
EOF
