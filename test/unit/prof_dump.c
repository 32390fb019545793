/*
 * test/unit/prof_dump.c - heap profile dumps (src/prof/prof_dump.c) and the
 * prof.* / thread.prof.* controls (src/ctl/ctl.c).
 *
 * Runs with lg_prof_sample:0 (prof_dump.conf): every allocation is
 * sampled, so the counts in a dump are exact and the unbiased values
 * printed equal the raw ones.  Dumps are parsed strictly (every line is
 * re-formatted from its parsed numbers and compared) and checked against
 * what the test allocated from known call sites, with the heap_v2 reader
 * of test_util.h.  Every dump goes to a fresh directory under /tmp,
 * removed at the end.
 */
#include "../test_util.h"

#include "malloc_prof/internal/internal.h"

/* ------------------------------------------------------ environment */

static char tmpdir[128];

/* The shared reader takes stacks of any depth; a dump of this library
 * never holds more than PROF_BT_MAX_LIMIT frames in one. */
static void check_depth(const mp_heap_t *h) {
	for (size_t i = 0; i < h->nstacks; i++)
		MP_ASSERT(h->stacks[i].nframes <= PROF_BT_MAX_LIMIT,
		    "stack %zu: %zu frames", i, h->stacks[i].nframes);
}

/* Parse path into h, failing the test on error. */
#define HEAP_PARSE(path, h) do {					\
	MP_HEAP_PARSE((path), (h));					\
	check_depth(h);							\
} while (0)

/* The sums add up exactly (R = 1); without prof_accum a stack is printed
 * only for live objects. */
static void check_sums(const mp_heap_t *h) {
	mp_heap_check_sums(h, true);
	for (size_t i = 0; i < h->nstacks; i++)
		MP_ASSERT(h->stacks[i].total.co != 0, "stack %zu printed with "
		    "no live object", i);
}

/* ----------------------------------------------------- call sites */

#define NSITE 100
static void *site_a[NSITE];
static void *site_b[NSITE];

void alloc_site_a(void);
void alloc_site_b(void);

/* Each site is its own function, so its malloc calls return into it:
 * frame 1 of their backtrace lies inside it. */
MP_SITE void alloc_site_a(void) {
	for (int i = 0; i < NSITE; i++)
		site_a[i] = malloc(opaque_size(48));
	__asm__ volatile("" ::: "memory");
}

MP_SITE void alloc_site_b(void) {
	for (int i = 0; i < NSITE; i++)
		site_b[i] = malloc(opaque_size(64));
	__asm__ volatile("" ::: "memory");
}

/*
 * The stack with a frame returning into fn, or NULL.  That should be
 * frame 1, but the allocator's own entry function may appear once more
 * (a slow path it calls instead of tail-calling, at -O1): frames 1 to 3
 * are searched.
 */
static const mp_heap_stack_t *find_site(const mp_heap_t *h,
    void (*fn)(void)) {
	return mp_heap_find_site(h, (const void *)(uintptr_t)fn, 3);
}

static void path_in_tmp(char *buf, size_t size, const char *name) {
	snprintf(buf, size, "%s/%s", tmpdir, name);
}

/* ------------------------------------------------------------ tests */

static void test_named_dump(void **state) {
	(void)state;
	char path[256];
	path_in_tmp(path, sizeof(path), "named.heap");
	alloc_site_a();
	assert_int_equal(mp_prof_dump(path), 0);

	struct stat st;
	assert_int_equal(stat(path, &st), 0);
	assert_true(S_ISREG(st.st_mode));
	MP_ASSERT((st.st_mode & 07777) == 0600, "mode %o",
	    (unsigned)(st.st_mode & 07777));

	mp_heap_t h;
	HEAP_PARSE(path, &h);
	assert_int_equal(h.rate, 1);
	assert_true(h.nthreads >= 1);
	check_sums(&h);
	assert_true(h.has_maps);
	assert_true(h.maps_lines > 0);

	const mp_heap_stack_t *s = find_site(&h, alloc_site_a);
	MP_ASSERT(s != NULL, "no stack returns into alloc_site_a (%p) among "
	    "%zu stacks", (void *)alloc_site_a, h.nstacks);
	/* Frame 0 is the entry point the program called. */
	MP_ASSERT(mp_heap_entry_is(s, (void *)malloc), "frame 0 %#lx, malloc "
	    "%p", (unsigned long)s->frames[0], (void *)malloc);
	mp_cnts_t want = {NSITE, NSITE * 48, 0, 0};
	MP_ASSERT(mp_cnts_eq(&s->total, &want), "site: %llu: %llu [%llu: %llu]",
	    (unsigned long long)s->total.co, (unsigned long long)s->total.cb,
	    (unsigned long long)s->total.ao, (unsigned long long)s->total.ab);
	/* One thread allocated there, and it is listed in the header. */
	assert_int_equal(s->nthr, 1);
	assert_true(mp_cnts_eq(&s->thr[0].c, &want));
	bool listed = false;
	for (size_t i = 0; i < h.nthreads; i++)
		listed |= h.threads[i].uid == s->thr[0].uid;
	assert_true(listed);
	mp_heap_free(&h);

	/* Freed: the stack is gone from the next dump. */
	mp_free_all(site_a, NSITE);
	assert_int_equal(mp_prof_dump(path), 0);
	HEAP_PARSE(path, &h);
	check_sums(&h);
	assert_null(find_site(&h, alloc_site_a));
	mp_heap_free(&h);
}

static void test_auto_names(void **state) {
	(void)state;
	char prefix[256];
	path_in_tmp(prefix, sizeof(prefix), "auto");
	assert_int_equal(mp_prof_prefix(prefix), 0);
	/* No value, then an explicit NULL: both are automatic names. */
	assert_int_equal(mallctl("prof.dump", NULL, NULL, NULL, 0), 0);
	const char *none = NULL;
	assert_int_equal(mallctl("prof.dump", NULL, NULL, (void *)&none,
	    sizeof(none)), 0);
	mp_autoname_t a[4];
	size_t n = mp_dump_list(tmpdir, "auto", (long)getpid(), 'm', a, 4);
	assert_int_equal(n, 2);
	assert_int_equal(a[1].seq, a[0].seq + 1);
	assert_int_equal(a[1].n, a[0].n + 1);
	char path[512];
	mp_heap_t h;
	snprintf(path, sizeof(path), "%s/%s", tmpdir, a[1].name);
	HEAP_PARSE(path, &h);
	check_sums(&h);
	mp_heap_free(&h);

	/* A forked child names its dumps with its own pid. */
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(mallctl("prof.dump", NULL, NULL, NULL, 0) == 0 ? 0 : 1);
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	assert_int_equal(mp_dump_list(tmpdir, "auto", (long)pid, 'm', a, 4), 1);
	assert_int_equal(mp_dump_list(tmpdir, "auto", (long)getpid(), 'm', a,
	    4), 2);

	/* A new prefix applies to the next dump; seq keeps counting. */
	path_in_tmp(prefix, sizeof(prefix), "auto2");
	assert_int_equal(mp_prof_prefix(prefix), 0);
	assert_int_equal(mallctl("prof.dump", NULL, NULL, NULL, 0), 0);
	mp_autoname_t b[2];
	assert_int_equal(mp_dump_list(tmpdir, "auto2", (long)getpid(), 'm', b,
	    2), 1);
	assert_true(b[0].seq > a[1].seq);
	assert_int_equal(b[0].n, a[1].n + 1);
}

static void test_dump_errors(void **state) {
	(void)state;
	/* Unwritable path: EFAULT and one line naming the file and why. */
	const char *bad = "/nonexistent-mp-prof-dir/x.heap";
	mp_msgs_start();
	int r = mp_prof_dump(bad);
	mp_msgs_stop();
	assert_int_equal(r, EFAULT);
	assert_int_equal(mp_msgs_lines, 1);
	MP_ASSERT(strncmp(mp_msgs, "<malloc_prof>: prof.dump: ", 26) == 0,
	    "%s", mp_msgs);
	MP_ASSERT(strstr(mp_msgs, "\"/nonexistent-mp-prof-dir/x.heap\"") !=
	    NULL, "%s", mp_msgs);
	MP_ASSERT(strstr(mp_msgs, strerror(ENOENT)) != NULL, "%s", mp_msgs);

	/* A directory is not a file either. */
	mp_msgs_start();
	r = mp_prof_dump(tmpdir);
	mp_msgs_stop();
	assert_int_equal(r, EFAULT);
	assert_int_equal(mp_msgs_lines, 1);
	MP_ASSERT(strstr(mp_msgs, strerror(EISDIR)) != NULL, "%s", mp_msgs);

	/* A failing write(2) (ENOSPC) is named too. */
	if (access("/dev/full", W_OK) == 0) {
		mp_msgs_start();
		r = mp_prof_dump("/dev/full");
		mp_msgs_stop();
		assert_int_equal(r, EFAULT);
		assert_int_equal(mp_msgs_lines, 1);
		char want[256];
		snprintf(want, sizeof(want), "<malloc_prof>: prof.dump: cannot "
		    "write \"/dev/full\": %s\n", strerror(ENOSPC));
		assert_string_equal(mp_msgs, want);
	}

	/* Empty prefix: automatic names are impossible. */
	char prefix[256];
	path_in_tmp(prefix, sizeof(prefix), "err");
	assert_int_equal(mp_prof_prefix(""), 0);
	mp_msgs_start();
	r = mallctl("prof.dump", NULL, NULL, NULL, 0);
	mp_msgs_stop();
	assert_int_equal(r, EFAULT);
	assert_int_equal(mp_msgs_lines, 1);
	assert_string_equal(mp_msgs, "<malloc_prof>: prof.dump: no file name "
	    "given and prof_prefix is empty\n");
	assert_int_equal(mp_prof_prefix(prefix), 0);

	/* prof.dump is write-only; sizes must match.  Each failure says
	 * why, in one line. */
	const char *p = NULL;
	size_t sz = sizeof(p);
	mp_msgs_start();
	r = mallctl("prof.dump", (void *)&p, &sz, NULL, 0);
	mp_msgs_stop();
	assert_int_equal(r, EPERM);
	assert_int_equal(mp_msgs_lines, 1);
	const char *path = "/dev/null";
	mp_msgs_start();
	r = mallctl("prof.dump", NULL, NULL, (void *)&path, sizeof(path) - 1);
	mp_msgs_stop();
	assert_int_equal(r, EINVAL);
	assert_int_equal(mp_msgs_lines, 1);

	/* prof.prefix: NULL or no value is EFAULT, with one line. */
	mp_msgs_start();
	const char *null = NULL;
	r = mallctl("prof.prefix", NULL, NULL, (void *)&null, sizeof(null));
	mp_msgs_stop();
	assert_int_equal(r, EFAULT);
	assert_int_equal(mp_msgs_lines, 1);
	MP_ASSERT(strncmp(mp_msgs, "<malloc_prof>: prof.prefix: ", 28) == 0,
	    "%s", mp_msgs);
	mp_msgs_start();
	r = mallctl("prof.prefix", NULL, NULL, NULL, 0);
	mp_msgs_stop();
	assert_int_equal(r, EFAULT);
	assert_int_equal(mp_msgs_lines, 1);
	mp_msgs_start();
	r = mallctl("prof.prefix", (void *)&p, &sz, NULL, 0);
	mp_msgs_stop();
	assert_int_equal(r, EPERM);
	assert_int_equal(mp_msgs_lines, 1);
	/* Too long for the prefix buffer. */
	static char longp[2048];
	memset(longp, 'a', sizeof(longp) - 1);
	const char *lp = longp;
	mp_msgs_start();
	r = mallctl("prof.prefix", NULL, NULL, (void *)&lp, sizeof(lp));
	mp_msgs_stop();
	assert_int_equal(r, EINVAL);
	assert_int_equal(mp_msgs_lines, 1);
	/* The old prefix is still in force. */
	assert_int_equal(mallctl("prof.dump", NULL, NULL, NULL, 0), 0);
	mp_autoname_t a[2];
	assert_int_equal(mp_dump_list(tmpdir, "err", (long)getpid(), 'm', a, 2),
	    1);
}

static void test_active(void **state) {
	(void)state;
	char path[256];
	path_in_tmp(path, sizeof(path), "active.heap");
	bool old;
	/* prof.active off: nothing new is sampled.  A write returns the old
	 * value. */
	assert_int_equal(mp_prof_switch("prof.active", false, &old), 0);
	assert_true(old);
	alloc_site_b();
	assert_int_equal(mp_prof_switch("prof.active", true, &old), 0);
	assert_false(old);
	assert_int_equal(mp_prof_dump(path), 0);
	mp_heap_t h;
	HEAP_PARSE(path, &h);
	check_sums(&h);
	assert_null(find_site(&h, alloc_site_b));
	mp_heap_free(&h);
	mp_free_all(site_b, NSITE);

	/* thread.prof.active off: this thread is not sampled. */
	assert_int_equal(mp_prof_switch("thread.prof.active", false, &old), 0);
	assert_true(old);
	alloc_site_b();
	assert_int_equal(mp_prof_switch("thread.prof.active", true, &old), 0);
	assert_false(old);
	assert_int_equal(mp_prof_dump(path), 0);
	HEAP_PARSE(path, &h);
	assert_null(find_site(&h, alloc_site_b));
	mp_heap_free(&h);
	mp_free_all(site_b, NSITE);

	/* Both on: sampled again. */
	alloc_site_b();
	assert_int_equal(mp_prof_dump(path), 0);
	HEAP_PARSE(path, &h);
	check_sums(&h);
	const mp_heap_stack_t *s = find_site(&h, alloc_site_b);
	assert_non_null(s);
	mp_cnts_t want = {NSITE, NSITE * 64, 0, 0};
	assert_true(mp_cnts_eq(&s->total, &want));
	mp_heap_free(&h);
	mp_free_all(site_b, NSITE);

	/* Wrong sizes. */
	bool b = true;
	assert_int_equal(mallctl("prof.active", NULL, NULL, &b, 4), EINVAL);
	size_t sz = 4;
	assert_int_equal(mallctl("prof.active", &b, &sz, NULL, 0), EINVAL);
}

static void test_switches(void **state) {
	(void)state;
	bool b;
	MALLCTL_READ("prof.thread_active_init", b);
	assert_true(b);
	MALLCTL_READ("prof.gdump", b);
	assert_false(b);
	MALLCTL_READ("opt.prof", b);
	assert_true(b);
	MALLCTL_READ("opt.prof_accum", b);
	assert_false(b);
	size_t lg;
	MALLCTL_READ("opt.lg_prof_sample", lg);
	assert_int_equal(lg, 0);
	MALLCTL_READ("prof.lg_sample", lg);
	assert_int_equal(lg, 0);
	ssize_t li;
	MALLCTL_READ("opt.lg_prof_interval", li);
	assert_int_equal(li, -1);
	uint64_t iv = 1;
	MALLCTL_READ("prof.interval", iv);
	assert_int_equal(iv, 0);
	unsigned bt;
	MALLCTL_READ("opt.prof_bt_max", bt);
	assert_int_equal(bt, 128);
	const char *pfx;
	MALLCTL_READ("opt.prof_prefix", pfx);
	assert_string_equal(pfx, "/tmp/mp_prof_dump_conf");
	/* r- nodes refuse writes. */
	assert_int_equal(mallctl("prof.lg_sample", NULL, NULL, &lg,
	    sizeof(lg)), EPERM);
	assert_int_equal(mallctl("prof.interval", NULL, NULL, &iv,
	    sizeof(iv)), EPERM);
	assert_int_equal(mallctl("opt.prof", NULL, NULL, &b, sizeof(b)),
	    EPERM);
	/* A new thread starts with prof.thread_active_init. */
	bool old;
	assert_int_equal(mp_prof_switch("prof.thread_active_init", false,
	    &old), 0);
	assert_true(old);
	assert_int_equal(mp_prof_switch("prof.thread_active_init", true,
	    &old), 0);
	assert_false(old);
	/* Partial names. */
	assert_int_equal(mallctl("prof", &b, NULL, NULL, 0), ENOENT);
	assert_int_equal(mallctl("thread.prof", &b, NULL, NULL, 0), ENOENT);
}

/* thread.prof.name, in a thread of its own (fresh tdata). */
typedef struct {
	int r_initial, r_set, r_read, r_long, r_null, r_ctrl, r_nl, r_rw;
	int r_len, r_tab;
	char initial[32], after[32], after_long[32], after_tab[32];
	void *leak;
} name_result_t;

static int read_name(char *out, size_t size) {
	const char *n = NULL;
	size_t sz = sizeof(n);
	int r = mallctl("thread.prof.name", (void *)&n, &sz, NULL, 0);
	if (r == 0)
		snprintf(out, size, "%s", n);
	return r;
}

static int write_name(const char *name) {
	return mallctl("thread.prof.name", NULL, NULL, (void *)&name,
	    sizeof(name));
}

static void *name_thread(void *arg) {
	name_result_t *res = arg;
	res->r_initial = read_name(res->initial, sizeof(res->initial));
	res->r_set = write_name("worker");
	res->r_read = read_name(res->after, sizeof(res->after));
	res->r_null = write_name(NULL);
	res->r_ctrl = write_name("bad\x01name");
	res->r_nl = write_name("\n");
	const char *n = "x";
	const char *o = NULL;
	size_t sz = sizeof(o);
	res->r_rw = mallctl("thread.prof.name", (void *)&o, &sz, (void *)&n,
	    sizeof(n));
	res->r_len = mallctl("thread.prof.name", NULL, NULL, (void *)&n,
	    sizeof(n) + 1);
	res->r_long = write_name("0123456789abcdefghij");
	read_name(res->after_long, sizeof(res->after_long));
	res->r_tab = write_name("my\tworker");
	read_name(res->after_tab, sizeof(res->after_tab));
	/* Left allocated: the thread's line (and name) outlives it. */
	res->leak = malloc(4096);
	return NULL;
}

static void test_thread_name(void **state) {
	(void)state;
	name_result_t res;
	memset(&res, 0, sizeof(res));
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, name_thread, &res), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(res.r_initial, 0);
	assert_string_equal(res.initial, "");
	assert_int_equal(res.r_set, 0);
	assert_int_equal(res.r_read, 0);
	assert_string_equal(res.after, "worker");
	assert_int_equal(res.r_null, EINVAL);
	assert_int_equal(res.r_ctrl, EINVAL);
	assert_int_equal(res.r_nl, EINVAL);
	assert_int_equal(res.r_rw, EPERM);
	assert_int_equal(res.r_len, EINVAL);
	assert_int_equal(res.r_long, 0);
	assert_string_equal(res.after_long, "0123456789abcde");
	assert_int_equal(res.r_tab, 0);
	assert_string_equal(res.after_tab, "my\tworker");

	/* The exited thread still owns its object: its header line carries
	 * its name, and its stack line its uid. */
	char path[256];
	path_in_tmp(path, sizeof(path), "name.heap");
	assert_int_equal(mp_prof_dump(path), 0);
	mp_heap_t h;
	HEAP_PARSE(path, &h);
	check_sums(&h);
	const mp_heap_thread_t *named = NULL;
	for (size_t i = 0; i < h.nthreads; i++) {
		if (strcmp(h.threads[i].name, "my\tworker") == 0)
			named = &h.threads[i];
	}
	assert_non_null(named);
	assert_true(named->c.co >= 1 && named->c.cb >= 4096);
	bool found = false;
	for (size_t i = 0; i < h.nstacks; i++) {
		for (size_t k = 0; k < h.stacks[i].nthr; k++)
			found |= h.stacks[i].thr[k].uid == named->uid;
	}
	assert_true(found);
	mp_heap_free(&h);
	free(res.leak);

	/* This thread has no name: no suffix on its line. */
	char mine[32];
	assert_int_equal(read_name(mine, sizeof(mine)), 0);
}

/* gdump: with prof.gdump on, each new high of active memory dumps to
 * .u<n>.heap; failures are reported once, then rate limited. */
static void test_gdump(void **state) {
	(void)state;
	char prefix[256];
	path_in_tmp(prefix, sizeof(prefix), "g");
	assert_int_equal(mp_prof_prefix(prefix), 0);
	bool old;
	assert_int_equal(mp_prof_switch("prof.gdump", true, &old), 0);
	assert_false(old);
	void *big = malloc(8 * MP_MiB);
	assert_int_equal(mp_prof_switch("prof.gdump", false, &old), 0);
	assert_true(old);
	mp_autoname_t a[64];
	size_t n = mp_dump_list(tmpdir, "g", (long)getpid(), 'u', a, 64);
	assert_true(n >= 1);
	assert_true(a[0].n == 0);
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", tmpdir, a[n > 64 ? 63 : n - 1]
	    .name);
	mp_heap_t h;
	HEAP_PARSE(path, &h);
	check_sums(&h);
	mp_heap_free(&h);

	/* Unwritable prefix: the first failure is reported, the next ones
	 * (within 10 s) are counted silently. */
	assert_int_equal(mp_prof_prefix("/nonexistent-mp-prof-dir/g"), 0);
	assert_int_equal(mp_prof_switch("prof.gdump", true, NULL), 0);
	mp_msgs_start();
	void *more[3];
	for (int i = 0; i < 3; i++)
		more[i] = malloc((size_t)(16 + 8 * i) * MP_MiB);
	mp_msgs_stop();
	assert_int_equal(mp_prof_switch("prof.gdump", false, NULL), 0);
	MP_ASSERT(mp_msgs_lines == 1, "%u lines: %s", mp_msgs_lines, mp_msgs);
	MP_ASSERT(strstr(mp_msgs, "cannot open \"/nonexistent-mp-prof-dir/g.")
	    != NULL, "%s", mp_msgs);
	for (int i = 0; i < 3; i++)
		free(more[i]);
	free(big);
	assert_int_equal(mp_prof_prefix(prefix), 0);
}

/* Interval dumps (lg_prof_interval is conf-only: set the variable). */
static void test_idump(void **state) {
	(void)state;
	char prefix[256];
	path_in_tmp(prefix, sizeof(prefix), "i");
	assert_int_equal(mp_prof_prefix(prefix), 0);
	opt_lg_prof_interval = 20;
	for (int i = 0; i < 3; i++)
		free(malloc(MP_MiB + 1));
	opt_lg_prof_interval = -1;
	mp_autoname_t a[8];
	size_t n = mp_dump_list(tmpdir, "i", (long)getpid(), 'i', a, 8);
	assert_true(n >= 2);
	for (size_t i = 1; i < n && i < 8; i++) {
		assert_int_equal(a[i].n, a[i - 1].n + 1);
		assert_true(a[i].seq > a[i - 1].seq);
	}
}

/* The final dump and the leak summary (called directly: in this process
 * prof_final is off). */
static void test_final_and_leak(void **state) {
	(void)state;
	char prefix[256];
	path_in_tmp(prefix, sizeof(prefix), "f");
	assert_int_equal(mp_prof_prefix(prefix), 0);
	alloc_site_a();
	opt_prof_leak = true;
	mp_msgs_start();
	prof_final_dump();
	mp_msgs_stop();
	opt_prof_leak = false;
	mp_autoname_t a[2];
	assert_int_equal(mp_dump_list(tmpdir, "f", (long)getpid(), 'f', a, 2),
	    1);
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", tmpdir, a[0].name);
	mp_heap_t h;
	HEAP_PARSE(path, &h);
	check_sums(&h);
	assert_non_null(find_site(&h, alloc_site_a));
	/* R = 1: the scaled totals are the raw ones. */
	assert_int_equal(mp_msgs_lines, 2);
	char sum[256];
	snprintf(sum, sizeof(sum), "<malloc_prof>: Leak approximation summary: "
	    "~%llu byte%s, ~%llu object%s, >= %zu context%s\n",
	    (unsigned long long)h.total.cb, h.total.cb == 1 ? "" : "s",
	    (unsigned long long)h.total.co, h.total.co == 1 ? "" : "s",
	    h.nstacks, h.nstacks == 1 ? "" : "s");
	MP_ASSERT(strncmp(mp_msgs, sum, strlen(sum)) == 0, "got %s want %s",
	    mp_msgs, sum);
	char want[600];
	snprintf(want, sizeof(want), "<malloc_prof>: Run jeprof on \"%s\" for "
	    "leak detail\n", path);
	MP_ASSERT(strstr(mp_msgs, want) != NULL, "%s", mp_msgs);
	mp_heap_free(&h);

	/* prof_leak_error: the complete dump, then exit status 1. */
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		opt_prof_leak = opt_prof_leak_error = true;
		malloc_message = mp_msgs_hook;
		prof_final_dump();
		_exit(0);
	}
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 1);
	assert_int_equal(mp_dump_list(tmpdir, "f", (long)pid, 'f', a, 2), 1);
	snprintf(path, sizeof(path), "%s/%s", tmpdir, a[0].name);
	HEAP_PARSE(path, &h);
	assert_true(h.has_maps);
	assert_non_null(find_site(&h, alloc_site_a));
	mp_heap_free(&h);
	mp_free_all(site_a, NSITE);

	/* Empty prefix: no file, and the summary says why. */
	assert_int_equal(mp_prof_prefix(""), 0);
	alloc_site_a();
	opt_prof_leak = true;
	mp_msgs_start();
	prof_final_dump();
	mp_msgs_stop();
	opt_prof_leak = false;
	mp_free_all(site_a, NSITE);
	assert_int_equal(mp_msgs_lines, 2);
	MP_ASSERT(strstr(mp_msgs, "prof_prefix is empty") != NULL, "%s",
	    mp_msgs);
	assert_int_equal(mp_prof_prefix(prefix), 0);
}

/* Bad profiler options are reported like any other. */
static void test_conf_rows(void **state) {
	(void)state;
	static const char *const bad[] = {
		"prof_bt_max:0", "prof_bt_max:257", "lg_prof_sample:64",
		"lg_prof_interval:-2", "lg_prof_interval:64", "prof:yes",
	};
	for (size_t i = 0; i < MP_ARRAY_SIZE(bad); i++) {
		mp_msgs_start();
		bool err = conf_parse("test", bad[i]);
		mp_msgs_stop();
		MP_ASSERT(err && mp_msgs_lines == 1, "%s: %s", bad[i], mp_msgs);
	}
	assert_int_equal(opt_prof_bt_max, 128);
	assert_int_equal(opt_lg_prof_sample, 0);
	assert_int_equal(opt_lg_prof_interval, -1);
}

/* Dumps while other threads allocate, free, name themselves and exit:
 * every dump parses and adds up. */
typedef struct {
	unsigned id;
	atomic_bool *stop;
} churn_arg_t;

static void *churn_thread(void *argp) {
	churn_arg_t *arg = argp;
	mp_rng_t rng = {arg->id * 7919u + 1};
	void *live[64] = {NULL};
	unsigned rounds = 0;
	while (!atomic_load(arg->stop) || rounds < 2) {
		char name[32];
		snprintf(name, sizeof(name), "churn %u.%u", arg->id, rounds++);
		const char *n = name;
		MP_CHECK(mallctl("thread.prof.name", NULL, NULL, (void *)&n,
		    sizeof(n)) == 0, "name");
		for (int i = 0; i < 2000; i++) {
			size_t k = (size_t)mp_rng_below(&rng, 64);
			free(live[k]);
			size_t sz = (size_t)mp_rng_below(&rng, 100) == 0 ?
			    (size_t)mp_rng_below(&rng, 100000) :
			    (size_t)mp_rng_below(&rng, 512) + 1;
			live[k] = malloc(sz);
		}
		for (int k = 0; k < 64; k++) {
			free(live[k]);
			live[k] = NULL;
		}
	}
	return NULL;
}

static void test_concurrent_dumps(void **state) {
	(void)state;
	enum { NT = 4, NGEN = 3, NDUMP = 20 };
	atomic_bool stop;
	char path[256];
	path_in_tmp(path, sizeof(path), "conc.heap");
	char prefix[256];
	path_in_tmp(prefix, sizeof(prefix), "conc");
	/* Threads come and go over a few generations. */
	for (int gen = 0; gen < NGEN; gen++) {
		pthread_t t[NT];
		churn_arg_t args[NT];
		atomic_store(&stop, false);
		for (unsigned i = 0; i < NT; i++) {
			args[i].id = (unsigned)gen * NT + i;
			args[i].stop = &stop;
			assert_int_equal(pthread_create(&t[i], NULL,
			    churn_thread, &args[i]), 0);
		}
		for (int d = 0; d < NDUMP; d++) {
			assert_int_equal(mp_prof_dump(path), 0);
			mp_heap_t h;
			HEAP_PARSE(path, &h);
			mp_cnts_t sum;
			memset(&sum, 0, sizeof(sum));
			for (size_t i = 0; i < h.nstacks; i++)
				mp_cnts_add(&sum, &h.stacks[i].total);
			assert_true(mp_cnts_eq(&sum, &h.total));
			mp_heap_free(&h);
		}
		atomic_store(&stop, true);
		for (unsigned i = 0; i < NT; i++)
			assert_int_equal(pthread_join(t[i], NULL), 0);
	}
	assert_int_equal(atomic_load(&mp_failures), 0);
	/* Every churn thread freed all it allocated: no stack of theirs, and
	 * (their tdatas being gone) no line for them either. */
	assert_int_equal(mp_prof_dump(path), 0);
	mp_heap_t h;
	HEAP_PARSE(path, &h);
	check_sums(&h);
	for (size_t i = 0; i < h.nthreads; i++)
		MP_ASSERT(strncmp(h.threads[i].name, "churn", 5) != 0,
		    "t%llu \"%s\" still listed",
		    (unsigned long long)h.threads[i].uid, h.threads[i].name);
	mp_heap_free(&h);
}

/* Last: changes the sampling rate (and leaves it at 0 again). */
static void test_reset(void **state) {
	(void)state;
	size_t lg;
	/* Live objects stop being counted, but stay harmless to free. */
	alloc_site_a();
	assert_int_equal(mallctl("prof.reset", NULL, NULL, NULL, 0), 0);
	MALLCTL_READ("prof.lg_sample", lg);
	assert_int_equal(lg, 0);
	char path[256];
	path_in_tmp(path, sizeof(path), "reset.heap");
	assert_int_equal(mp_prof_dump(path), 0);
	mp_heap_t h;
	HEAP_PARSE(path, &h);
	check_sums(&h);
	assert_null(find_site(&h, alloc_site_a));
	mp_heap_free(&h);
	mp_free_all(site_a, NSITE);

	size_t v = 5;
	assert_int_equal(mallctl("prof.reset", NULL, NULL, &v, sizeof(v)), 0);
	MALLCTL_READ("prof.lg_sample", lg);
	assert_int_equal(lg, 5);
	assert_int_equal(mp_prof_dump(path), 0);
	HEAP_PARSE(path, &h);
	assert_int_equal(h.rate, 32);
	mp_heap_free(&h);
	/* No value keeps the rate. */
	assert_int_equal(mallctl("prof.reset", NULL, NULL, NULL, 0), 0);
	MALLCTL_READ("prof.lg_sample", lg);
	assert_int_equal(lg, 5);
	v = 100;
	assert_int_equal(mallctl("prof.reset", NULL, NULL, &v, sizeof(v)), 0);
	MALLCTL_READ("prof.lg_sample", lg);
	assert_int_equal(lg, 63);
	v = 0;
	assert_int_equal(mallctl("prof.reset", NULL, NULL, &v, sizeof(v)), 0);
	MALLCTL_READ("prof.lg_sample", lg);
	assert_int_equal(lg, 0);
	assert_int_equal(mallctl("prof.reset", NULL, NULL, &v, 4), EINVAL);
	size_t sz = sizeof(lg);
	assert_int_equal(mallctl("prof.reset", &lg, &sz, NULL, 0), EPERM);
}

/* ------------------------------------------------- without profiler */

static void test_no_profiler(void **state) {
	(void)state;
	static const char *const names[] = {
		"prof.active", "prof.thread_active_init", "prof.gdump",
		"prof.dump", "prof.prefix", "prof.reset", "prof.lg_sample",
		"prof.interval", "thread.prof.name", "thread.prof.active",
		"opt.prof", "opt.prof_prefix", "opt.lg_prof_sample",
		"opt.lg_prof_interval", "opt.prof_bt_max", "opt.prof_leak",
	};
	for (size_t i = 0; i < MP_ARRAY_SIZE(names); i++) {
		uint64_t v = 0;
		size_t sz = sizeof(v);
		mp_msgs_start();
		int r = mallctl(names[i], &v, &sz, NULL, 0);
		mp_msgs_stop();
		MP_ASSERT(r == ENOENT, "%s: %d", names[i], r);
	}
	mp_msgs_start();
	bool err = conf_parse("MALLOC_CONF", "prof:true");
	mp_msgs_stop();
	assert_true(err);
	assert_string_equal(mp_msgs, "<malloc_prof>: MALLOC_CONF: option "
	    "\"prof\" is not available: this build has no profiler "
	    "(configured with --disable-prof; config.prof is false)\n");
	mp_msgs_start();
	err = conf_parse("MALLOC_CONF", "lg_prof_sample:3");
	mp_msgs_stop();
	assert_true(err);
	MP_ASSERT(strstr(mp_msgs, "option \"lg_prof_sample\" is not available")
	    != NULL, "%s", mp_msgs);
	bool b;
	MALLCTL_READ("config.prof", b);
	assert_false(b);
}

int main(void) {
	mp_test_init(300);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_switches),
		cmocka_unit_test(test_named_dump),
		cmocka_unit_test(test_auto_names),
		cmocka_unit_test(test_dump_errors),
		cmocka_unit_test(test_active),
		cmocka_unit_test(test_thread_name),
		cmocka_unit_test(test_gdump),
		cmocka_unit_test(test_idump),
		cmocka_unit_test(test_final_and_leak),
		cmocka_unit_test(test_conf_rows),
		cmocka_unit_test(test_concurrent_dumps),
		cmocka_unit_test(test_reset),
	};
	return mp_prof_test_main("mp_prof_dump", test_no_profiler, tests);
}
