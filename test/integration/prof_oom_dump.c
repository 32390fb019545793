/*
 * test/integration/prof_oom_dump.c - prof_oom_dump: the profile of the
 * moment an allocation fails for want of memory.
 *
 * A child (this program again, --child) lowers its RLIMIT_AS to 96 MiB
 * above what it maps, then allocates 256 KiB blocks from oom_site until
 * malloc returns NULL, keeping them all.  With prof_oom_dump:true (and
 * lg_prof_sample:16, so that nearly every block is sampled) it must
 * leave <prefix>.<pid>.0.o0.heap and <prefix>.<pid>.1.p0.heap, both
 * heap_v2, both naming oom_site with the bytes the child held when it
 * ran out (within 15%, unbiased as jeprof does), and say so in one line
 * each on stderr; malloc keeps failing cleanly afterwards (no second
 * dump), and the child then gives the room back (a sanitizer's runtime
 * needs some to exit).  With prof_peak:false only the .o0 file is
 * written; with prof_oom_dump:false nothing is.  A child with 8192
 * stacks (more than the reserve holds) gets a dump of those that fit,
 * and a message that says so; in a debug build, an injected mapping
 * failure (debug.mmap_fail) dumps too.  The child prints
 * where its oom_site is and how much it held: its addresses are its own
 * (ASLR), so the parent shifts its own oom_site by the difference.
 */
#include "../test_util.h"

#include <dirent.h>
#include <sys/resource.h>
#include <sys/wait.h>

#define BLOCK ((size_t)256 << 10)
#define HEADROOM ((size_t)96 << 20)
#define MAXBLOCKS 4096

void *oom_site(size_t size);

MP_SITE void *oom_site(size_t size) {
	void *p = malloc(size);
	__asm__ volatile("" : : "r"(p) : "memory");
	return p;
}

/* The "many" child's 2^TREE_DEPTH stacks: tree recurses through
 * tree_left or tree_right by the bits of `path`, so that each path is a
 * distinct chain of return addresses. */
#define TREE_DEPTH 13
void *tree(int depth, unsigned path);
void *tree_left(int depth, unsigned path);
void *tree_right(int depth, unsigned path);

MP_SITE void *tree_left(int depth, unsigned path) {
	void *p = tree(depth, path);
	__asm__ volatile("" : : "r"(p) : "memory");
	return p;
}

MP_SITE void *tree_right(int depth, unsigned path) {
	void *p = tree(depth, path);
	__asm__ volatile("" : : "r"(p) : "memory");
	return p;
}

MP_SITE void *tree(int depth, unsigned path) {
	if (depth == 0)
		return malloc(256);
	void *p = (path & 1) != 0 ? tree_left(depth - 1, path >> 1) :
	    tree_right(depth - 1, path >> 1);
	__asm__ volatile("" : : "r"(p) : "memory");
	return p;
}

static char tmpdir[256];
static void *blocks[MAXBLOCKS];

/* The child: run out, then report on stdout with write(2) (stdio would
 * allocate its buffer, which may fail now). */
static int child_main(const char *mode) {
	free(malloc(16));       /* the options, the first sample */
	if (strcmp(mode, "inject") == 0) {
		/* debug.mmap_fail: the next OS mapping fails (ENOMEM). */
		size_t one = 1;
		void *keep = oom_site(BLOCK);
		if (keep == NULL || mallctl("debug.mmap_fail", NULL, NULL,
		    &one, sizeof(one)) != 0)
			return 6;
		void *p = oom_site((size_t)64 << 20);
		size_t zero = 0;
		(void)mallctl("debug.mmap_fail", NULL, NULL, &zero,
		    sizeof(zero));
		free(keep);
		return p == NULL ? 0 : 7;
	}
	/* "many": more stacks than the reserve holds (lg_prof_sample:0:
	 * each is sampled). */
	for (unsigned i = 0; strcmp(mode, "many") == 0 &&
	    i < (1u << TREE_DEPTH); i++) {
		if (tree(TREE_DEPTH, i) == NULL)
			return 5;
	}
	struct rlimit rl;
	if (getrlimit(RLIMIT_AS, &rl) != 0)
		return 2;
	rlim_t old = rl.rlim_cur;
	rl.rlim_cur = mp_vm_bytes() + HEADROOM;
	if (setrlimit(RLIMIT_AS, &rl) != 0)
		return 2;
	size_t n = 0, held = 0;
	while (n < MAXBLOCKS) {
		void *p = oom_site(BLOCK);
		if (p == NULL)
			break;
		memset(p, 0x5a, 4096);
		held += malloc_usable_size(p);
		blocks[n++] = p;
	}
	if (n == MAXBLOCKS)
		return 3;       /* never ran out */
	int e = errno;
	/* Once more: still NULL, and no second dump. */
	void *again = oom_site(BLOCK);
	/* The room back: a sanitizer's runtime needs some to go on. */
	rl.rlim_cur = old;
	if (setrlimit(RLIMIT_AS, &rl) != 0)
		return 2;
	char line[128];
	int len = snprintf(line, sizeof(line), "%p %zu %d %d\n",
	    (void *)oom_site, held, e == ENOMEM, again == NULL);
	if (write(STDOUT_FILENO, line, (size_t)len) != len)
		return 4;
	free(again);
	for (size_t i = 0; i < n; i++)
		free(blocks[i]);
	return 0;
}

/* How many files of tmpdir start with prefix. */
static unsigned count_files(const char *prefix) {
	DIR *d = opendir(tmpdir);
	unsigned n = 0;
	if (d == NULL)
		return 0;
	for (struct dirent *e; (e = readdir(d)) != NULL;) {
		if (strncmp(e->d_name, prefix, strlen(prefix)) == 0)
			n++;
	}
	closedir(d);
	return n;
}

/* The unbiased bytes of the stack whose frames hold a return address
 * into oom_site shifted by delta (the child's ASLR), in path. */
static double site_bytes(const char *path, intptr_t delta, char *err,
    size_t errsize) {
	mp_heap_t h;
	if (!mp_heap_parse(path, &h)) {
		snprintf(err, errsize, "%s: %s", path, h.err);
		return -1;
	}
	uintptr_t lo, hi;
	mp_fn_range((const void *)oom_site, &lo, &hi);
	lo += (uintptr_t)delta;
	hi += (uintptr_t)delta;
	double best = 0;
	for (size_t i = 0; i < h.nstacks; i++) {
		const mp_heap_stack_t *s = &h.stacks[i];
		for (size_t k = 1; k < s->nframes && k < 4; k++) {
			if (mp_ra_in(s->frames[k], lo, hi)) {
				double n, b;
				mp_heap_unbias(s->total.co, s->total.cb, h.rate,
				    &n, &b);
				best += b;
				break;
			}
		}
	}
	mp_heap_free(&h);
	return best;
}

/* The file's first line starts with "heap_v2/". */
static bool is_heap_v2(const char *path) {
	char buf[16] = {0};
	FILE *f = fopen(path, "r");
	if (f == NULL)
		return false;
	size_t n = fread(buf, 1, 8, f);
	fclose(f);
	return n == 8 && memcmp(buf, "heap_v2/", 8) == 0;
}

static void run_child_mode(const char *mode, const char *opts, char *err,
    size_t errsize, char *out, size_t outsize, pid_t *pid) {
	char conf[512];
	snprintf(conf, sizeof(conf), "prof:true,lg_prof_sample:16,%s,"
	    "prof_prefix:%s/oom", opts, tmpdir);
	int st = mp_run_child_conf(mode, conf, err, errsize, out, outsize,
	    pid);
	MP_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child: status %#x, "
	    "stderr: %s", st, err);
}

static void run_child(const char *opts, char *err, size_t errsize,
    char *out, size_t outsize, pid_t *pid) {
	run_child_mode("oom", opts, err, errsize, out, outsize, pid);
}

static void test_oom_dump(void **state) {
	(void)state;
	char err[8192], out[256], path[512], why[1024], prefix[64];
	pid_t pid;
	run_child("prof_oom_dump:true", err, sizeof(err), out, sizeof(out),
	    &pid);
	void *child_site = NULL;
	size_t held = 0;
	int enomem = 0, again_null = 0;
	MP_ASSERT(sscanf(out, "%p %zu %d %d", &child_site, &held, &enomem,
	    &again_null) == 4, "child's stdout: %s", out);
	MP_ASSERT(enomem && again_null, "child: errno ENOMEM %d, NULL again "
	    "%d", enomem, again_null);
	intptr_t delta = (intptr_t)((uintptr_t)child_site -
	    (uintptr_t)(void *)oom_site);
	snprintf(prefix, sizeof(prefix), "oom.%ld.", (long)pid);
	/* Exactly the two files: once per process. */
	assert_int_equal(count_files(prefix), 2);
	const char *kinds[2] = {"0.o0", "1.p0"};
	for (int i = 0; i < 2; i++) {
		snprintf(path, sizeof(path), "%s/oom.%ld.%s.heap", tmpdir,
		    (long)pid, kinds[i]);
		MP_ASSERT(is_heap_v2(path), "%s: not a heap_v2 file (stderr: "
		    "%s)", path, err);
		why[0] = '\0';
		double b = site_bytes(path, delta, why, sizeof(why));
		MP_ASSERT(b >= 0, "%s", why);
		MP_ASSERT(b >= (double)held * 0.85 && b <= (double)held * 1.15,
		    "%s: oom_site holds %.0f bytes, the child held %zu", path,
		    b, held);
	}
	MP_ASSERT(strstr(err, "<malloc_prof>: out of memory: profile written "
	    "to") != NULL && strstr(err, "<malloc_prof>: out of memory: peak "
	    "profile written to") != NULL, "stderr: %s", err);
}

static void test_oom_dump_off(void **state) {
	(void)state;
	char err[8192], out[256], prefix[64];
	pid_t pid;
	run_child("prof_oom_dump:false", err, sizeof(err), out, sizeof(out),
	    &pid);
	snprintf(prefix, sizeof(prefix), "oom.%ld.", (long)pid);
	assert_int_equal(count_files(prefix), 0);
	MP_ASSERT(strstr(err, "out of memory") == NULL, "stderr: %s", err);
}

/* prof_peak:false: the profile of the moment only (and the reserve is
 * still taken, at the first sample). */
static void test_oom_dump_no_peak(void **state) {
	(void)state;
	char err[8192], out[256], prefix[64], path[512];
	pid_t pid;
	run_child("prof_oom_dump:true,prof_peak:false", err, sizeof(err), out,
	    sizeof(out), &pid);
	snprintf(prefix, sizeof(prefix), "oom.%ld.", (long)pid);
	assert_int_equal(count_files(prefix), 1);
	snprintf(path, sizeof(path), "%s/oom.%ld.0.o0.heap", tmpdir,
	    (long)pid);
	MP_ASSERT(is_heap_v2(path), "%s: not a heap_v2 file (stderr: %s)",
	    path, err);
}

/* More stacks than the reserve (1 MiB of records: prof_peak:false
 * never grows it) holds: the dump is written with what fits, parses,
 * and the message says it is not all. */
static void test_oom_dump_bounded(void **state) {
	(void)state;
	char err[8192], out[256], prefix[64], path[512];
	pid_t pid;
	run_child_mode("many", "prof_oom_dump:true,prof_peak:false,"
	    "lg_prof_sample:0", err, sizeof(err), out, sizeof(out), &pid);
	snprintf(prefix, sizeof(prefix), "oom.%ld.", (long)pid);
	assert_int_equal(count_files(prefix), 1);
	snprintf(path, sizeof(path), "%s/oom.%ld.0.o0.heap", tmpdir,
	    (long)pid);
	mp_heap_t h;
	MP_ASSERT(mp_heap_parse(path, &h), "%s: %s", path, h.err);
	size_t n = h.nstacks;
	mp_heap_free(&h);
	MP_ASSERT(n > 1000 && n < ((size_t)1 << TREE_DEPTH), "%zu stacks "
	    "(the child had %u and more)", n, 1u << TREE_DEPTH);
	MP_ASSERT(strstr(err, "(not all of it: the stacks or threads of the "
	    "moment did not fit the memory reserved for it)") != NULL,
	    "stderr: %s", err);
}

/* A debug build's injected mapping failure counts as the OS's refusal. */
static void test_oom_dump_injected(void **state) {
	(void)state;
	if (!MALLOC_PROF_CONFIG_DEBUG)
		MP_SKIP("debug.mmap_fail exists only in --enable-debug builds");
	char err[8192], out[256], prefix[64];
	pid_t pid;
	run_child_mode("inject", "prof_oom_dump:true", err, sizeof(err), out,
	    sizeof(out), &pid);
	snprintf(prefix, sizeof(prefix), "oom.%ld.", (long)pid);
	assert_int_equal(count_files(prefix), 2);
}

static void test_option(void **state) {
	(void)state;
	bool v = true;
	size_t len = sizeof(v);
	assert_int_equal(mallctl("opt.prof_oom_dump", &v, &len, NULL, 0), 0);
	assert_false(v);
}

static void test_no_profiler(void **state) {
	(void)state;
	bool v;
	size_t len = sizeof(v);
	int r = mallctl("opt.prof_oom_dump", &v, &len, NULL, 0);
	assert_true(r == 0 || r == ENOENT);
}

int main(int argc, char **argv) {
	if (argc == 3 && strcmp(argv[1], "--child") == 0)
		return child_main(argv[2]);
	mp_test_init(300);
	if (!mp_tmpdir_make(tmpdir, sizeof(tmpdir), "mp_prof_oom")) {
		printf("Bail out! mkdtemp: %s\n", strerror(errno));
		return 99;
	}
	int r;
	if (!MALLOC_PROF_CONFIG_PROF) {
		const struct CMUnitTest tests[] = {
			cmocka_unit_test(test_no_profiler),
		};
		r = mp_run_tests(tests);
	} else {
		const struct CMUnitTest tests[] = {
			cmocka_unit_test(test_option),
			cmocka_unit_test(test_oom_dump),
			cmocka_unit_test(test_oom_dump_off),
			cmocka_unit_test(test_oom_dump_no_peak),
			cmocka_unit_test(test_oom_dump_bounded),
			cmocka_unit_test(test_oom_dump_injected),
		};
		r = mp_run_tests(tests);
	}
	mp_tmpdir_remove(tmpdir);
	return r;
}
