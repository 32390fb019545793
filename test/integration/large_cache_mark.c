/*
 * test/integration/large_cache_mark.c - the mark a large block's record
 * carries while a cache's large bin holds it (types.h, LARGE_LIST_CACHED;
 * tcache.c).  free tells a double free of a cached large block by that
 * mark, not by scanning the freeing thread's own bin: so a block cached by
 * one thread and freed again by another is reported (the scan missed it
 * and cached the block twice), and a block the cache gave out again, or
 * flushed to the arena and carved again, frees once without a report (a
 * mark left behind would report a double free that is none).  Each case
 * runs in a forked child; the parent checks its stderr and how it ended.
 */
#include "../test_util.h"

#include <sys/wait.h>

#define LCM_SIZE (32 * MP_KiB)  /* a large class the thread cache keeps */

typedef struct {
	const char *name;
	void *(*run)(int fd);   /* writes the block's pointer to fd */
	bool report;            /* a double free is to be reported */
} lcm_case_t;

static void lcm_send(int fd, void *p) {
	uintptr_t v = (uintptr_t)p;
	if (write(fd, &v, sizeof(v)) != (ssize_t)sizeof(v)) {
		_exit(125);
	}
}

static void *lcm_free(void *p) {
	free(LAUNDER(p));
	return NULL;
}

/* Cached by the main thread, freed again by another one. */
static void *lcm_other_thread(int fd) {
	void *p = LAUNDER(malloc(LCM_SIZE));
	lcm_send(fd, p);
	free(p);
	pthread_t t;
	if (pthread_create(&t, NULL, lcm_free, p) != 0 ||
	    pthread_join(t, NULL) != 0) {
		_exit(125);
	}
	return p;
}

/* Given out again by the cache: one free is no misuse, a second is. */
static void *lcm_reused(int fd) {
	void *p = LAUNDER(malloc(LCM_SIZE));
	free(p);
	void *q = LAUNDER(malloc(LCM_SIZE));
	if (q != p) {
		_exit(124);     /* the cache did not give the block back */
	}
	lcm_send(fd, q);
	free(q);
	void *r = LAUNDER(malloc(LCM_SIZE));
	if (r != q) {
		_exit(124);
	}
	free(r);
	free(LAUNDER(r));
	return r;
}

/* Flushed to the arena and carved again: freed once, no report. */
static void *lcm_flushed(int fd) {
	void *p = LAUNDER(malloc(LCM_SIZE));
	free(p);
	if (mallctl("thread.tcache.flush", NULL, NULL, NULL, 0) != 0) {
		_exit(125);
	}
	void *q = LAUNDER(malloc(LCM_SIZE));
	lcm_send(fd, q);
	memset(q, 1, LCM_SIZE);
	free(q);
	void *r = LAUNDER(malloc(LCM_SIZE));
	free(r);
	return q;
}

static const lcm_case_t lcm_cases[] = {
	{"cached, freed again by another thread", lcm_other_thread, true},
	{"given out again by the cache, freed twice", lcm_reused, true},
	{"flushed and carved again, freed once", lcm_flushed, false},
};

static void lcm_run(const lcm_case_t *c, bool debug) {
	char out[4096];
	uintptr_t p;
	int status = mp_child_ptr(c->run, c->name, out, sizeof(out), &p);
	const char *line = strstr(out, "<malloc_prof>: ");
	if (!c->report) {
		MP_ASSERT(line == NULL, "%s: reported \"%s\"", c->name, out);
		MP_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		    "%s: status %#x, want exit 0", c->name, status);
		return;
	}
	char ptr_text[32];
	snprintf(ptr_text, sizeof(ptr_text), "%p", (void *)p);
	MP_ASSERT(line != NULL && strstr(line, "free(): double free of") !=
	    NULL && strstr(line, ptr_text) != NULL, "%s: stderr \"%s\", want "
	    "a double free of %s", c->name, out, ptr_text);
	mp_assert_misuse_exit(c->name, status, debug);
}

static void test_large_cache_mark(void **state) {
	(void)state;
	if (mp_env_sanitizer()[0] != '\0') {
		MP_SKIP("%s build: the sanitizer reports misuse itself",
		    mp_env_sanitizer());
	}
	bool debug = false;
	size_t sz = sizeof(debug);
	assert_int_equal(mallctl("config.debug", &debug, &sz, NULL, 0), 0);
	bool tcache = false;
	sz = sizeof(tcache);
	assert_int_equal(mallctl("opt.tcache", &tcache, &sz, NULL, 0), 0);
	if (!tcache) {
		MP_SKIP("tcache:false: no cache holds large blocks");
	}
	for (size_t i = 0; i < MP_ARRAY_SIZE(lcm_cases); i++) {
		lcm_run(&lcm_cases[i], debug);
	}
}

int main(void) {
	mp_test_init(120);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_large_cache_mark),
	};
	return mp_run_tests(tests);
}
