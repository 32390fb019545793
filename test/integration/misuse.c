/*
 * test/integration/misuse.c - double free, free of a pointer malloc_prof
 * did not allocate, free and realloc of an interior pointer and sdallocx
 * with a wrong size (doc/reliability.md, "Misuse").  Each misuse runs in a
 * forked child, so that the abort or the corrupted heap stays there; the
 * parent checks the child's stderr line (the entry point, the misuse, the
 * pointer) and how it ended.  Debug builds detect every case and abort;
 * release builds detect the ones their slow paths check (and every double
 * free of a region that a thread other than its slab's owner frees twice),
 * report them and go on (abort: false), and miss the rest, which run on
 * the free fast path.
 */
#include "../test_util.h"

#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>

typedef struct {
	const char *name;
	void *(*run)(int fd);   /* does the misuse; writes the pointer to fd */
	const char *want;       /* the report: "free(): double free of" */
	const char *want_alt;   /* another acceptable report, or NULL */
	bool release;           /* detected in release builds too */
} misuse_case_t;

static void send_ptr(int fd, void *p) {
	uintptr_t v = (uintptr_t)p;
	if (write(fd, &v, sizeof(v)) != (ssize_t)sizeof(v)) {
		_exit(125);
	}
}

static void *small_double_free(int fd) {
	void *p = LAUNDER(malloc(64));
	send_ptr(fd, p);
	free(p);
	free(LAUNDER(p));
	return p;
}

/* Not the head of the slab's free list any more: found by the walk. */
static void *small_double_free_later(int fd) {
	void *p = LAUNDER(malloc(64));
	void *q = LAUNDER(malloc(64));
	send_ptr(fd, p);
	free(p);
	free(q);
	free(LAUNDER(p));
	return p;
}

static void *free_twice(void *p) {
	free(p);
	free(LAUNDER(p));
	return NULL;
}

/* Freed twice by a thread that does not own the slab: the second free
 * finds the region's bit already set in the slab's remote bitmap. */
static void *small_double_free_remote(int fd) {
	void *p = LAUNDER(malloc(64));
	send_ptr(fd, p);
	pthread_t t;
	if (pthread_create(&t, NULL, free_twice, p) != 0 ||
	    pthread_join(t, NULL) != 0) {
		_exit(125);
	}
	return p;
}

static void *small_interior(int fd) {
	char *p = LAUNDER(malloc(64));
	send_ptr(fd, p + 16);
	free(LAUNDER(p + 16));
	return p;
}

/* 32 KiB: kept in the thread's cache of large blocks when freed. */
static void *large_double_free_cached(int fd) {
	void *p = LAUNDER(malloc(32 * MP_KiB));
	send_ptr(fd, p);
	free(p);
	free(LAUNDER(p));
	return p;
}

/* 1 MiB: above tcache_max, back to the arena as a free extent (which may
 * coalesce with a neighbour: then p is not a block start any more). */
static void *large_double_free_arena(int fd) {
	void *p = LAUNDER(malloc(MP_MiB));
	send_ptr(fd, p);
	free(p);
	free(LAUNDER(p));
	return p;
}

static void *large_interior(int fd) {
	char *p = LAUNDER(malloc(32 * MP_KiB));
	send_ptr(fd, p + 16);
	free(LAUNDER(p + 16));
	return p;
}

/* realloc of an interior pointer: reported, NULL with EINVAL, nothing
 * moved or resized (the same class once went through the in-place path
 * and came back as if it were the block). */
static void *realloc_interior(int fd, size_t size, size_t offset,
    size_t new_size) {
	char *p = LAUNDER(malloc(size));
	send_ptr(fd, p + offset);
	errno = 0;
	void *q = realloc(LAUNDER(p + offset), new_size);
	if (q != NULL || errno != EINVAL) {
		_exit(3);
	}
	return p;
}

static void *realloc_large_interior(int fd) {
	return realloc_interior(fd, 32 * MP_KiB, 16, 32 * MP_KiB);
}

static void *realloc_small_interior(int fd) {
	return realloc_interior(fd, 64, 16, 200);
}

static void *foreign(int fd) {
	void *p = mmap(NULL, 4 * MP_KiB, PROT_READ | PROT_WRITE,
	    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		_exit(125);
	}
	send_ptr(fd, p);
	free(LAUNDER(p));
	return p;
}

static void *dallocx_double_free(int fd) {
	void *p = LAUNDER(mallocx(64, MALLOCX_TCACHE_NONE));
	send_ptr(fd, p);
	dallocx(p, MALLOCX_TCACHE_NONE);
	dallocx(LAUNDER(p), MALLOCX_TCACHE_NONE);
	return p;
}

static void *sdallocx_wrong_size(int fd) {
	void *p = LAUNDER(malloc(64));
	send_ptr(fd, p);
	sdallocx(p, 4096, 0);
	return p;
}

static const misuse_case_t cases[] = {
	{"small double free", small_double_free, "free(): double free of",
	    NULL, false},
	{"small double free, not the last free", small_double_free_later,
	    "free(): double free of", NULL, false},
	{"small double free, another thread", small_double_free_remote,
	    "free(): double free of", NULL, true},
	{"small interior pointer", small_interior,
	    "free(): interior pointer (not a region start)", NULL, false},
	{"large double free (thread cache)", large_double_free_cached,
	    "free(): double free of", NULL, true},
	{"large double free (arena)", large_double_free_arena,
	    "free(): double free of", "free(): invalid pointer", true},
	{"large interior pointer", large_interior,
	    "free(): interior pointer (not a block start)", NULL, true},
	{"foreign pointer", foreign, "free(): invalid pointer", NULL, true},
	{"realloc of a large interior pointer", realloc_large_interior,
	    "realloc(): interior pointer (not a block start)", NULL, true},
	{"realloc of a small interior pointer", realloc_small_interior,
	    "realloc(): interior pointer (not a region start)", NULL, true},
	{"dallocx double free", dallocx_double_free,
	    "dallocx(): double free of", NULL, true},
	{"sdallocx wrong size", sdallocx_wrong_size, "sdallocx(", NULL, false},
};

static void run_case(const misuse_case_t *c, bool debug) {
	char out[4096];
	uintptr_t p;
	int status = mp_child_ptr(c->run, c->name, out, sizeof(out), &p);
	char ptr_text[32];
	snprintf(ptr_text, sizeof(ptr_text), "%p", (void *)p);
	bool detect = debug || c->release;
	const char *line = strstr(out, "<malloc_prof>: ");
	if (!detect) {
		MP_ASSERT(line == NULL, "%s: release build reported \"%s\"",
		    c->name, out);
		return;
	}
	MP_ASSERT(line != NULL && (strstr(line, c->want) != NULL ||
	    (c->want_alt != NULL && strstr(line, c->want_alt) != NULL)),
	    "%s: stderr \"%s\", want \"%s\"", c->name, out, c->want);
	MP_ASSERT(strstr(line, ptr_text) != NULL, "%s: stderr \"%s\" does "
	    "not name %s", c->name, out, ptr_text);
	mp_assert_misuse_exit(c->name, status, debug);
}

static void test_misuse(void **state) {
	(void)state;
	if (mp_env_sanitizer()[0] != '\0') {
		MP_SKIP("%s build: the sanitizer reports misuse itself",
		    mp_env_sanitizer());
	}
	bool debug = false;
	size_t sz = sizeof(debug);
	assert_int_equal(mallctl("config.debug", &debug, &sz, NULL, 0), 0);
	for (size_t i = 0; i < MP_ARRAY_SIZE(cases); i++) {
		run_case(&cases[i], debug);
	}
}

int main(void) {
	mp_test_init(120);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_misuse),
	};
	return mp_run_tests(tests);
}
