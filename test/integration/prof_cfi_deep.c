/*
 * test/integration/prof_cfi_deep.c - a recursion 200 calls deep, built
 * without frame pointers, walked with .eh_frame: prof_bt_max cuts the
 * stack at exactly that many frames, and a limit above the depth keeps
 * the whole chain down to main.
 *
 * Each case runs in a child of its own (options are read at start-up)
 * with prof:true,lg_prof_sample:0 and:
 *   cfi-64    prof_unwind:cfi,prof_bt_max:64
 *   cfi-128   prof_unwind:cfi (the default prof_bt_max, 128)
 *   cfi-256   prof_unwind:cfi,prof_bt_max:256 (the largest allowed)
 *   auto-256  prof_unwind:auto,prof_bt_max:256
 * The child calls deep_rec(DEPTH) from deep_run (called by main through
 * deep_case); deep_rec(0) allocates, so the allocation's stack is the
 * entry point, then DEPTH + 1 return addresses in deep_rec, then
 * deep_run, deep_case, main and libc's start.  Cut: exactly
 * prof_bt_max frames (the entry point included: the profiler counts
 * it), all after it in deep_rec.  Whole:
 * DEPTH + 1 frames in deep_rec, then deep_run, deep_case, and on to
 * __libc_start_main (past main's frame).
 */
#include "../test_util.h"

#define DEPTH 200

static char tmpdir[256];

void *deep_rec(unsigned n);
void *deep_run(void);
int deep_case(const char *dir, const char *name);

/* Not a tail call (p is used after the call), and a frame of its own. */
MP_NOFP_SITE void *deep_rec(unsigned n) {
	volatile char pad[16];
	pad[n % 16] = (char)n;
	void *p;
	if (n == 0)
		p = malloc(4000 + (size_t)(unsigned char)pad[0]);
	else
		p = deep_rec(n - 1 + (unsigned)(pad[n % 16] != (char)n));
	__asm__ volatile("" : : "r"(p) : "memory");
	return p;
}

MP_NOFP_SITE void *deep_run(void) {
	void *p = deep_rec(DEPTH);
	__asm__ volatile("" : : "r"(p) : "memory");
	return p;
}

/* The child: one case, failures on stderr (exported, so that its frame
 * is found by name). */
MP_SITE int deep_case(const char *dir, const char *name) {
	unsigned bt_max = 0;
	size_t sz = sizeof(bt_max);
	MP_CHECK(mallctl("opt.prof_bt_max", &bt_max, &sz, NULL, 0) == 0,
	    "opt.prof_bt_max");
	void *p = deep_run();
	MP_CHECK(p != NULL, "malloc");
	char path[512];
	snprintf(path, sizeof(path), "%s/%s.heap", dir, name);
	MP_CHECK(mp_prof_dump(path) == 0, "prof.dump");
	mp_heap_t h;
	if (!mp_heap_parse(path, &h)) {
		MP_CHECK(false, "%s: the dump: %s", name, h.err);
		return 1;
	}
	uintptr_t lo, hi;
	mp_fn_range((const void *)deep_rec, &lo, &hi);
	const mp_heap_stack_t *s = mp_heap_find_site(&h,
	    (const void *)deep_rec, 1);
	MP_CHECK(s != NULL, "%s: no stack through deep_rec", name);
	if (s != NULL) {
		size_t u = mp_heap_user_frame(s);
		size_t rec = 0;
		while (u + rec < s->nframes &&
		    mp_ra_in(s->frames[u + rec], lo, hi))
			rec++;
		char tail[400] = "";
		int len = 0;
		for (size_t k = u + rec; k < s->nframes && len >= 0 &&
		    (size_t)len < sizeof(tail); k++) {
			len += snprintf(tail + len, sizeof(tail) - (size_t)len,
			    " %s", mp_fn_name(s->frames[k]));
		}
		printf("# %s: prof_bt_max %u: %zu frames, %zu in deep_rec, "
		    "then:%s\n", name, bt_max, s->nframes, rec, tail);
		fflush(stdout);
		if (bt_max < DEPTH + 1) {
			MP_CHECK(s->nframes == bt_max, "%s: %zu frames, "
			    "expected prof_bt_max %u", name, s->nframes,
			    bt_max);
			MP_CHECK(u + rec == s->nframes, "%s: frames after "
			    "the first %zu are not deep_rec's", name, u + rec);
		} else {
			MP_CHECK(rec == DEPTH + 1, "%s: %zu frames in "
			    "deep_rec, expected %u", name, rec, DEPTH + 1);
			/* Then deep_run, deep_case, main (a local symbol:
			 * not named), and libc's start, which main's frame
			 * leads to. */
			uintptr_t rlo, rhi, clo, chi;
			mp_fn_range((const void *)deep_run, &rlo, &rhi);
			mp_fn_range((const void *)deep_case, &clo, &chi);
			size_t k = u + rec;
			MP_CHECK(k + 1 < s->nframes &&
			    mp_ra_in(s->frames[k], rlo, rhi) &&
			    mp_ra_in(s->frames[k + 1], clo, chi), "%s: "
			    "deep_run, deep_case do not follow", name);
			bool start_found = false;
			for (k += 2; k < s->nframes; k++)
				start_found |= strcmp(mp_fn_name(s->frames[k]),
				    "__libc_start_main") == 0;
			MP_CHECK(start_found, "%s: the stack does not reach "
			    "main's caller", name);
		}
	}
	mp_heap_free(&h);
	free(p);
	return atomic_load(&mp_failures) == 0 ? 0 : 1;
}

static void test_no_profiler(void **state) {
	(void)state;
	const char *opt = NULL;
	size_t sz = sizeof(opt);
	assert_int_equal(mallctl("opt.prof_unwind", &opt, &sz, NULL, 0),
	    ENOENT);
}

static void run_child(const char *name, const char *opts) {
	char conf[256];
	snprintf(conf, sizeof(conf), "prof:true,lg_prof_sample:0,%s", opts);
	assert_int_equal(setenv(mp_env_conf_name(), conf, 1), 0);
	assert_int_equal(setenv("MP_PROF_CFI_DIR", tmpdir, 1), 0);
	mp_run_self("prof_cfi_deep", name);
}

static void test_cfi_64(void **state) {
	(void)state;
	run_child("cfi-64", "prof_unwind:cfi,prof_bt_max:64");
}

static void test_cfi_128(void **state) {
	(void)state;
	run_child("cfi-128", "prof_unwind:cfi");
}

static void test_cfi_256(void **state) {
	(void)state;
	run_child("cfi-256", "prof_unwind:cfi,prof_bt_max:256");
}

static void test_auto_256(void **state) {
	(void)state;
	run_child("auto-256", "prof_unwind:auto,prof_bt_max:256");
}

int main(int argc, char **argv) {
	if (argc == 2) {
		const char *dir = getenv("MP_PROF_CFI_DIR");
		if (dir == NULL)
			return 2;
		return deep_case(dir, argv[1]);
	}
	mp_test_init(300);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cfi_64),
		cmocka_unit_test(test_cfi_128),
		cmocka_unit_test(test_cfi_256),
		cmocka_unit_test(test_auto_256),
	};
	return mp_prof_test_main("mp_prof_cfi_deep", test_no_profiler, tests);
}
