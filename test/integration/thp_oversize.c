/*
 * test/integration/thp_oversize.c - jemalloc 5.3's thp, metadata_thp and
 * oversize_threshold options (issue 18): read back through opt.*, and
 * their effect seen from outside the allocator.
 *
 * Each case runs this program again (/proc/self/exe --child MODE) with
 * its options in this build's conf variable, since they take effect at
 * start-up only; the child checks with MP_CHECK and exits 1 on a failed
 * check, and its standard error is shown in the log.  The advice is read
 * from /proc/self/smaps (VmFlags: hg = MADV_HUGEPAGE, nh =
 * MADV_NOHUGEPAGE) and depends on the kernel's THP mode, read from
 * /sys/kernel/mm/transparent_hugepage/enabled as the library reads it:
 * as in jemalloc, thp:always advises only where the kernel's mode is
 * madvise, thp:never wherever the kernel has THP, and metadata_thp only
 * under madvise.
 *
 * Checked: the defaults (default, disabled, 0: no huge arena, where
 * jemalloc's is 8 MiB) and arenas.narenas counting the huge arena when
 * there is one; a large block's mapping under thp:always,
 * never and default; metadata_thp:always (stats.metadata_thp and hg
 * mappings, none without it) and auto (nothing until 20 MiB of metadata,
 * then both); with oversize_threshold:1048576 a 2 MiB block comes from
 * the huge arena (arenas.lookup), not the thread's, and its pages are
 * purged at free while a smaller block's stay dirty; a manual arena keeps
 * its blocks and purges a free run past the threshold at once;
 * oversize_threshold:0 and a value below the large classes turn all this
 * off; bad values are one "<malloc_prof>: " line naming the option each.
 */
#include "../test_util.h"

#include <sys/wait.h>

#define HUGE_SZ ((size_t)2 << 20)
#define SMALLER_SZ ((size_t)512 << 10)
#define THRESHOLD ((size_t)1 << 20)
#define TWO_MiB ((size_t)2 << 20)

/* ------------------------------------------------------------ helpers */

/* The kernel's THP mode: 'm' (madvise), 'a' (always), 'n' (never) or
 * 'u' (no THP, or a format not understood). */
static char sys_thp(void) {
	char buf[128];
	int fd = open("/sys/kernel/mm/transparent_hugepage/enabled",
	    O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		return 'u';
	}
	size_t n = mp_read_all(fd, buf, sizeof(buf));
	close(fd);
	(void)n;
	if (strstr(buf, "[madvise]") != NULL) {
		return 'm';
	}
	if (strstr(buf, "[always]") != NULL) {
		return 'a';
	}
	if (strstr(buf, "[never]") != NULL) {
		return 'n';
	}
	return 'u';
}

/* /proc/self/smaps, read into static memory (the child's allocations
 * would change what it reads). */
static char smaps[8 << 20];

static bool smaps_read(void) {
	int fd = open("/proc/self/smaps", O_RDONLY | O_CLOEXEC);
	MP_CHECK(fd >= 0, "open /proc/self/smaps: %s", strerror(errno));
	if (fd < 0) {
		return false;
	}
	size_t n = mp_read_all(fd, smaps, sizeof(smaps));
	close(fd);
	MP_CHECK(n + 1 < sizeof(smaps), "smaps longer than %zu bytes",
	    sizeof(smaps));
	return n > 0;
}

/* Calls fn for every mapping: its bounds and its VmFlags line. */
static void smaps_each(void (*fn)(uintptr_t lo, uintptr_t hi,
    const char *flags, void *arg), void *arg) {
	uintptr_t lo = 0, hi = 0;
	bool have = false;
	for (char *line = smaps; *line != '\0';) {
		char *nl = strchr(line, '\n');
		if (nl != NULL) {
			*nl = '\0';
		}
		unsigned long a, b;
		char dash;
		if (sscanf(line, "%lx%c%lx", &a, &dash, &b) == 3 &&
		    dash == '-') {
			lo = (uintptr_t)a;
			hi = (uintptr_t)b;
			have = true;
		} else if (have && strncmp(line, "VmFlags:", 8) == 0) {
			fn(lo, hi, line + 8, arg);
			have = false;
		}
		if (nl == NULL) {
			break;
		}
		*nl = '\n';
		line = nl + 1;
	}
}

/* Whether flags (a VmFlags line) holds the two-letter flag f. */
static bool has_flag(const char *flags, const char *f) {
	for (const char *s = flags; (s = strstr(s, f)) != NULL; s += 2) {
		if (s[-1] == ' ' && (s[2] == ' ' || s[2] == '\0' ||
		    s[2] == '\n')) {
			return true;
		}
	}
	return false;
}

typedef struct {
	uintptr_t addr;
	char flags[256];
	bool found;
} find_t;

static void find_fn(uintptr_t lo, uintptr_t hi, const char *flags,
    void *arg) {
	find_t *f = arg;
	if (f->addr >= lo && f->addr < hi) {
		snprintf(f->flags, sizeof(f->flags), "%s", flags);
		f->found = true;
	}
}

/* The VmFlags of the mapping that holds p. */
static bool flags_of(const void *p, char *out, size_t size) {
	find_t f = { .addr = (uintptr_t)p, .found = false };
	if (!smaps_read()) {
		return false;
	}
	smaps_each(find_fn, &f);
	MP_CHECK(f.found, "no mapping holds %p", p);
	snprintf(out, size, "%s", f.flags);
	return f.found;
}

typedef struct {
	const char *flag;
	size_t bytes;
} sum_t;

static void sum_fn(uintptr_t lo, uintptr_t hi, const char *flags,
    void *arg) {
	sum_t *s = arg;
	if (has_flag(flags, s->flag)) {
		s->bytes += (size_t)(hi - lo);
	}
}

/* Bytes of every mapping with flag f. */
static size_t flagged_bytes(const char *f) {
	sum_t s = { .flag = f, .bytes = 0 };
	if (smaps_read()) {
		smaps_each(sum_fn, &s);
	}
	return s.bytes;
}

/* Non-asserting mallctl reads for the child. */
static const char *read_str(const char *name) {
	const char *v = NULL;
	size_t sz = sizeof(v);
	int r = mallctl(name, (void *)&v, &sz, NULL, 0);
	MP_CHECK(r == 0 && sz == sizeof(v), "%s: %d", name, r);
	return v != NULL ? v : "(null)";
}

static size_t read_size(const char *name) {
	size_t v = 0;
	MP_CHECK(mp_read_size(name, &v) == 0, "%s", name);
	return v;
}

static unsigned read_unsigned(const char *name) {
	unsigned v = 0;
	size_t sz = sizeof(v);
	int r = mallctl(name, &v, &sz, NULL, 0);
	MP_CHECK(r == 0 && sz == sizeof(v), "%s: %d", name, r);
	return v;
}

static void refresh(void) {
	uint64_t e = 1;
	size_t sz = sizeof(e);
	MP_CHECK(mallctl("epoch", &e, &sz, &e, sz) == 0, "epoch");
}

static size_t arena_stat(unsigned ind, const char *what) {
	char name[128];
	snprintf(name, sizeof(name), "stats.arenas.%u.%s", ind, what);
	return read_size(name);
}

static unsigned lookup(const void *p) {
	unsigned ind = UINT_MAX;
	size_t sz = sizeof(ind);
	int r = mallctl("arenas.lookup", &ind, &sz, (void *)&p, sizeof(p));
	MP_CHECK(r == 0, "arenas.lookup(%p): %d", p, r);
	return ind;
}

static unsigned thread_arena(void) {
	return read_unsigned("thread.arena");
}

#define STR_IS(name, want) do {						\
	const char *mp_v_ = read_str(name);				\
	MP_CHECK(strcmp(mp_v_, (want)) == 0, "%s: \"%s\", want \"%s\"",	\
	    (name), mp_v_, (want));					\
} while (0)

/* ------------------------------------------------------------- children */

/* No options: jemalloc's defaults, but no huge arena (oversize_threshold
 * 0: doc/malloc_prof.3.md says why), so arenas.narenas is the automatic
 * ones. */
static void child_defaults(void) {
	STR_IS("opt.thp", sys_thp() == 'u' ? "not supported" : "default");
	STR_IS("opt.metadata_thp", "disabled");
	size_t t = read_size("opt.oversize_threshold");
	MP_CHECK(t == 0, "opt.oversize_threshold %zu", t);
	unsigned n = read_unsigned("opt.narenas");
	unsigned total = read_unsigned("arenas.narenas");
	MP_CHECK(total == n, "arenas.narenas %u, opt.narenas %u", total, n);
	/* No advice at all: neither the data nor the metadata. */
	void *p = malloc(opaque_size(4 << 20));
	MP_CHECK(p != NULL, "malloc");
	memset(p, 1, 4 << 20);
	char flags[256];
	if (flags_of(p, flags, sizeof(flags))) {
		MP_CHECK(!has_flag(flags, "hg") && !has_flag(flags, "nh"),
		    "VmFlags:%s", flags);
	}
	MP_CHECK(flagged_bytes("hg") == 0, "hg mappings: %zu bytes",
	    flagged_bytes("hg"));
	refresh();
	MP_CHECK(read_size("stats.metadata_thp") == 0, "stats.metadata_thp");
	free(p);
}

/* thp:always or thp:never on a large block's mapping. */
static void child_thp(const char *mode) {
	char sys = sys_thp();
	STR_IS("opt.thp", sys == 'u' ? "not supported" : mode);
	size_t sz = 4 << 20;     /* below the default oversize_threshold */
	char *p = malloc(opaque_size(sz));
	MP_CHECK(p != NULL, "malloc");
	memset(p, 1, sz);
	char flags[256];
	if (!flags_of(p, flags, sizeof(flags))) {
		return;
	}
	print_message("# kernel THP mode '%c', thp:%s, VmFlags:%s\n", sys,
	    mode, flags);
	if (strcmp(mode, "always") == 0) {
		/* Advice only where the kernel waits for it. */
		MP_CHECK(has_flag(flags, "hg") == (sys == 'm'),
		    "hg with kernel mode '%c': VmFlags:%s", sys, flags);
		MP_CHECK(!has_flag(flags, "nh"), "VmFlags:%s", flags);
	} else {
		MP_CHECK(has_flag(flags, "nh") == (sys == 'm' || sys == 'a'),
		    "nh with kernel mode '%c': VmFlags:%s", sys, flags);
		MP_CHECK(!has_flag(flags, "hg"), "VmFlags:%s", flags);
	}
	free(p);
}

/* metadata_thp:always: the base chunks are advised from the start. */
static void child_metadata_always(void) {
	char sys = sys_thp();
	STR_IS("opt.metadata_thp", "always");
	void *p = malloc(opaque_size(100));
	MP_CHECK(p != NULL, "malloc");
	refresh();
	size_t n = read_size("stats.metadata_thp");
	size_t meta = read_size("stats.metadata");
	size_t hg = flagged_bytes("hg");
	print_message("# kernel THP mode '%c': stats.metadata_thp %zu, "
	    "stats.metadata %zu, hg mappings %zu bytes\n", sys, n, meta, hg);
	if (sys == 'm') {
		MP_CHECK(n >= 1, "stats.metadata_thp %zu", n);
		MP_CHECK(n * TWO_MiB <= meta, "stats.metadata_thp %zu, "
		    "stats.metadata %zu", n, meta);
		/* Only metadata is advised (thp is default). */
		MP_CHECK(hg >= n * TWO_MiB, "hg mappings %zu bytes, "
		    "stats.metadata_thp %zu", hg, n);
	} else {
		MP_CHECK(n == 0 && hg == 0, "stats.metadata_thp %zu, hg %zu",
		    n, hg);
	}
	free(p);
}

/* metadata_thp:auto: nothing until 20 MiB of metadata, then the chunks
 * are advised, the earlier ones too.  Arenas are what makes metadata
 * here (arenas.create). */
static void child_metadata_auto(void) {
	char sys = sys_thp();
	STR_IS("opt.metadata_thp", "auto");
	refresh();
	size_t meta0 = read_size("stats.metadata");
	MP_CHECK(meta0 < ((size_t)16 << 20), "stats.metadata %zu at start",
	    meta0);
	MP_CHECK(read_size("stats.metadata_thp") == 0, "metadata_thp at "
	    "start");
	MP_CHECK(flagged_bytes("hg") == 0, "hg mappings at start");
	size_t meta = meta0;
	unsigned made = 0;
	while (meta < ((size_t)24 << 20) && made < 4000) {
		unsigned ind;
		size_t sz = sizeof(ind);
		if (mallctl("arenas.create", &ind, &sz, NULL, 0) != 0) {
			break;
		}
		made++;
		if (made % 16 == 0) {
			refresh();
			meta = read_size("stats.metadata");
		}
	}
	refresh();
	meta = read_size("stats.metadata");
	size_t n = read_size("stats.metadata_thp");
	size_t hg = flagged_bytes("hg");
	print_message("# kernel THP mode '%c': %u arenas made, "
	    "stats.metadata %zu, metadata_thp %zu, hg %zu bytes\n", sys, made,
	    meta, n, hg);
	MP_CHECK(meta >= ((size_t)24 << 20), "stats.metadata %zu after %u "
	    "arenas", meta, made);
	if (sys == 'm') {
		/* Every chunk is advised by now, the first ones too: the
		 * count covers more than the chunks mapped since. */
		MP_CHECK(n * TWO_MiB > meta - ((size_t)20 << 20),
		    "stats.metadata_thp %zu, stats.metadata %zu", n, meta);
		MP_CHECK(n * TWO_MiB <= meta, "stats.metadata_thp %zu", n);
		MP_CHECK(hg >= n * TWO_MiB, "hg %zu bytes", hg);
	} else {
		MP_CHECK(n == 0 && hg == 0, "stats.metadata_thp %zu, hg %zu",
		    n, hg);
	}
}

/* oversize_threshold:1048576. */
static void child_oversize(void) {
	size_t page = read_size("arenas.page");
	MP_CHECK(read_size("opt.oversize_threshold") == THRESHOLD,
	    "opt.oversize_threshold");
	unsigned nauto = read_unsigned("opt.narenas");
	unsigned huge = nauto;
	MP_CHECK(read_unsigned("arenas.narenas") == nauto + 1,
	    "arenas.narenas");
	unsigned mine = thread_arena();
	MP_CHECK(mine < nauto, "thread.arena %u", mine);

	/* Past the threshold: the huge arena, purged at free. */
	char *p = malloc(opaque_size(HUGE_SZ));
	MP_CHECK(p != NULL, "malloc");
	MP_CHECK(lookup(p) == huge, "2 MiB block in arena %u, huge is %u",
	    lookup(p), huge);
	memset(p, 1, HUGE_SZ);
	refresh();
	MP_CHECK(arena_stat(huge, "pactive") * page >= HUGE_SZ, "pactive");
	ssize_t ms = 0;
	size_t sz = sizeof(ms);
	char name[64];
	snprintf(name, sizeof(name), "arena.%u.dirty_decay_ms", huge);
	MP_CHECK(mallctl(name, &ms, &sz, NULL, 0) == 0 && ms == 0,
	    "%s: %zd", name, ms);
	free(p);
	refresh();
	MP_CHECK(arena_stat(huge, "pdirty") == 0, "huge arena pdirty %zu "
	    "after free", arena_stat(huge, "pdirty"));
	MP_CHECK(arena_stat(huge, "dirty_purged") * page >= HUGE_SZ,
	    "dirty_purged %zu", arena_stat(huge, "dirty_purged"));

	/* Below it: the thread's arena, dirty after free (decay 10 s). */
	char *q = malloc(opaque_size(SMALLER_SZ));
	MP_CHECK(q != NULL, "malloc");
	MP_CHECK(lookup(q) == mine, "512 KiB block in arena %u, thread's "
	    "is %u", lookup(q), mine);
	memset(q, 2, SMALLER_SZ);
	free(q);
	refresh();
	MP_CHECK(arena_stat(mine, "pdirty") * page >= SMALLER_SZ,
	    "thread arena pdirty %zu", arena_stat(mine, "pdirty"));

	/* A manual arena keeps its blocks; a free run past the threshold
	 * is purged at once there too, a smaller one is not. */
	unsigned m;
	sz = sizeof(m);
	MP_CHECK(mallctl("arenas.create", &m, &sz, NULL, 0) == 0,
	    "arenas.create");
	p = mallocx(HUGE_SZ, MALLOCX_ARENA(m));
	MP_CHECK(p != NULL && lookup(p) == m, "mallocx in arena %u", m);
	memset(p, 3, HUGE_SZ);
	dallocx(p, 0);
	refresh();
	MP_CHECK(arena_stat(m, "pdirty") == 0, "manual arena pdirty %zu",
	    arena_stat(m, "pdirty"));
	q = mallocx(SMALLER_SZ, MALLOCX_ARENA(m));
	MP_CHECK(q != NULL && lookup(q) == m, "mallocx in arena %u", m);
	memset(q, 4, SMALLER_SZ);
	dallocx(q, 0);
	refresh();
	MP_CHECK(arena_stat(m, "pdirty") * page == SMALLER_SZ,
	    "manual arena pdirty %zu", arena_stat(m, "pdirty"));

	/* A thread bound to the manual arena is not redirected. */
	MP_CHECK(mallctl("thread.arena", NULL, NULL, &m, sizeof(m)) == 0,
	    "thread.arena");
	p = malloc(opaque_size(HUGE_SZ));
	MP_CHECK(p != NULL && lookup(p) == m, "bound thread: arena %u",
	    lookup(p));
	free(p);
}

/* oversize_threshold:0 (or a value below the large classes): no huge
 * arena; big blocks stay in the thread's arena and stay dirty. */
static void child_no_oversize(void) {
	size_t page = read_size("arenas.page");
	MP_CHECK(read_size("opt.oversize_threshold") == 0,
	    "opt.oversize_threshold %zu", read_size("opt.oversize_threshold"));
	unsigned nauto = read_unsigned("opt.narenas");
	MP_CHECK(read_unsigned("arenas.narenas") == nauto, "arenas.narenas");
	size_t big = (size_t)16 << 20;
	char *p = malloc(opaque_size(big));
	MP_CHECK(p != NULL, "malloc");
	unsigned mine = thread_arena();
	MP_CHECK(lookup(p) == mine, "16 MiB block in arena %u, thread's %u",
	    lookup(p), mine);
	memset(p, 1, big);
	free(p);
	refresh();
	MP_CHECK(arena_stat(mine, "pdirty") * page >= big, "pdirty %zu",
	    arena_stat(mine, "pdirty"));
}

/* Bad values: reported, and the options keep their defaults. */
static void child_bad(void) {
	STR_IS("opt.thp", sys_thp() == 'u' ? "not supported" : "default");
	STR_IS("opt.metadata_thp", "disabled");
	MP_CHECK(read_size("opt.oversize_threshold") == 0,
	    "opt.oversize_threshold");
}

/* The runbook line: no message, each option in effect. */
static void child_runbook(void) {
	STR_IS("opt.thp", sys_thp() == 'u' ? "not supported" : "always");
	STR_IS("opt.metadata_thp", "auto");
	MP_CHECK(read_size("opt.oversize_threshold") == 0,
	    "opt.oversize_threshold");
}

static int child_main(const char *mode) {
	if (strcmp(mode, "defaults") == 0) {
		child_defaults();
	} else if (strcmp(mode, "always") == 0 || strcmp(mode, "never") == 0) {
		child_thp(mode);
	} else if (strcmp(mode, "metadata_always") == 0) {
		child_metadata_always();
	} else if (strcmp(mode, "metadata_auto") == 0) {
		child_metadata_auto();
	} else if (strcmp(mode, "oversize") == 0) {
		child_oversize();
	} else if (strcmp(mode, "no_oversize") == 0) {
		child_no_oversize();
	} else if (strcmp(mode, "bad") == 0) {
		child_bad();
	} else if (strcmp(mode, "runbook") == 0) {
		child_runbook();
	} else {
		return 100;
	}
	return atomic_load(&mp_failures) == 0 ? 0 : 1;
}

/* -------------------------------------------------------------- parent */

/* Runs `--child mode` with conf (NULL: none) as its options; its output
 * goes to err and to the log.  Returns the wait status. */
static int run_child(const char *mode, const char *conf, char *err,
    size_t size) {
	return mp_run_child_conf(mode, conf, err, size, NULL, 0, NULL);
}

static char out[65536];

static void expect_ok(const char *mode, const char *conf) {
	int status = run_child(mode, conf, out, sizeof(out));
	MP_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	    "child %s (%s): status %#x", mode, conf != NULL ? conf : "no conf",
	    status);
	/* Valid options print nothing of ours. */
	MP_ASSERT(strstr(out, "<malloc_prof>") == NULL, "%s", out);
}

static void test_defaults(void **state) {
	(void)state;
	expect_ok("defaults", NULL);
}

static void test_thp_always(void **state) {
	(void)state;
	expect_ok("always", "thp:always");
}

static void test_thp_never(void **state) {
	(void)state;
	expect_ok("never", "thp:never");
}

static void test_metadata_always(void **state) {
	(void)state;
	expect_ok("metadata_always", "metadata_thp:always");
}

static void test_metadata_auto(void **state) {
	(void)state;
	expect_ok("metadata_auto", "metadata_thp:auto");
}

static void test_oversize(void **state) {
	(void)state;
	/* Both block sizes are past tcache_max: no thread cache keeps
	 * them. */
	expect_ok("oversize", "oversize_threshold:1048576");
}

static void test_oversize_off(void **state) {
	(void)state;
	expect_ok("no_oversize", "oversize_threshold:0");
	/* Below the large classes: off too, and reads 0 (jemalloc). */
	expect_ok("no_oversize", "oversize_threshold:4096");
}

static void test_runbook(void **state) {
	(void)state;
	expect_ok("runbook", "thp:always,metadata_thp:auto,"
	    "oversize_threshold:0");
}

static void test_bad_values(void **state) {
	(void)state;
	int status = run_child("bad", "thp:sometimes,metadata_thp:yes,"
	    "oversize_threshold:-1", out, sizeof(out));
	MP_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	    "status %#x", status);
	static const char *const want[] = {
		"invalid value \"sometimes\" for option \"thp\"",
		"invalid value \"yes\" for option \"metadata_thp\"",
		"invalid value \"-1\" for option \"oversize_threshold\"",
	};
	for (size_t i = 0; i < MP_ARRAY_SIZE(want); i++) {
		const char *at = strstr(out, want[i]);
		MP_ASSERT(at != NULL, "no \"%s\" in: %s", want[i], out);
		/* On a line of its own that starts with the prefix. */
		const char *bol = at;
		while (bol > out && bol[-1] != '\n') {
			bol--;
		}
		MP_ASSERT(strncmp(bol, "<malloc_prof>: ", 15) == 0, "%.*s",
		    (int)(at - bol), bol);
	}
	MP_ASSERT(strstr(out, "unknown option") == NULL, "%s", out);
}

int main(int argc, char **argv) {
	if (argc == 3 && strcmp(argv[1], "--child") == 0) {
		return child_main(argv[2]);
	}
	mp_test_init(300);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_thp_always),
		cmocka_unit_test(test_thp_never),
		cmocka_unit_test(test_metadata_always),
		cmocka_unit_test(test_metadata_auto),
		cmocka_unit_test(test_oversize),
		cmocka_unit_test(test_oversize_off),
		cmocka_unit_test(test_runbook),
		cmocka_unit_test(test_bad_values),
	};
	return mp_run_tests(tests);
}
