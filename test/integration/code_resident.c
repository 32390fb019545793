/*
 * test/integration/code_resident.c - a process without the profiler keeps
 * the library's rarely-run code out of its resident set (issue 15, peak
 * RSS; doc/performance.md, round 7).  Fault-around maps the 64 KiB window
 * of the page cache around each page of code a process runs, so one call
 * into ctl.c or the profiler's files at boot made their windows resident
 * too: all 224 KiB of the library's code, where an ordinary process runs
 * 38 KB of it.  Makefile.am links what every process runs first and the
 * boot functions of the other files are MP_WARM.  A child started with no
 * options allocates every size class, reallocates, frees and runs
 * threads, then reads which pages of the library's executable mapping
 * are present (/proc/self/pagemap) before anything calls mallctl: at
 * least one whole 64 KiB window of the code must be absent, and so must
 * the mapping's last page (code linked after all of ours).  (A smaller
 * fault-around, or code not in the page cache, only leaves more absent.)
 * With the profiler on but inactive, the same child has no more than 4
 * pages of code more resident.
 */
#include "../test_util.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/wait.h>

#define WINDOW ((uintptr_t)64 << 10)

static void *churn(void *arg) {
	(void)arg;
	for (size_t size = 8; size <= ((size_t)1 << 22); size = size * 5 / 4 + 8) {
		unsigned char *p = LAUNDER(malloc(size));
		if (p == NULL)
			continue;
		p[0] = 1;
		unsigned char *q = LAUNDER(realloc(p, size * 2));
		free(q);
		free(LAUNDER(calloc(1, size)));
		void *a = NULL;
		if (posix_memalign(&a, 64, size) == 0)
			free(a);
	}
	return NULL;
}

/* The child: exit 0 when a whole window of the library's code is absent,
 * 1 when none is, 2 when it could not tell (the reason on stderr). */
static int child(void) {
	churn(NULL);
	pthread_t t[3];
	for (int i = 0; i < 3; i++)
		if (pthread_create(&t[i], NULL, churn, NULL) != 0)
			return 2;
	for (int i = 0; i < 3; i++)
		pthread_join(t[i], NULL);
	/* The library's file: where this process's malloc comes from. */
	Dl_info info;
	if (dladdr((void *)(uintptr_t)&malloc, &info) == 0 ||
	    info.dli_fname == NULL || strstr(info.dli_fname, "malloc_prof") ==
	    NULL) {
		fprintf(stderr, "malloc is not the library's here\n");
		return 2;
	}
	char real[PATH_MAX];
	if (realpath(info.dli_fname, real) == NULL)
		return 2;
	FILE *maps = fopen("/proc/self/maps", "r");
	int pm = open("/proc/self/pagemap", O_RDONLY);
	if (maps == NULL || pm < 0)
		return 2;
	char line[PATH_MAX + 128];
	uintptr_t lo = 0, hi = 0;
	while (fgets(line, sizeof(line), maps) != NULL) {
		unsigned long a, b;
		char perms[8];
		char *path = strchr(line, '/');
		if (sscanf(line, "%lx-%lx %7s", &a, &b, perms) != 3 ||
		    path == NULL)
			continue;
		path[strcspn(path, "\n")] = '\0';
		if (strcmp(perms, "r-xp") == 0 && strcmp(path, real) == 0) {
			lo = a;
			hi = b;
		}
	}
	fclose(maps);
	if (hi == 0) {
		fprintf(stderr, "no executable mapping of %s\n", real);
		return 2;
	}
	/* Each whole window inside the mapping: is any of its pages
	 * present? */
	size_t page = (size_t)sysconf(_SC_PAGESIZE), resident = 0;
	unsigned windows = 0, absent = 0;
	for (uintptr_t w = (lo + WINDOW - 1) & ~(WINDOW - 1); w + WINDOW <= hi;
	    w += WINDOW) {
		windows++;
		bool any = false;
		for (uintptr_t p = w; p < w + WINDOW; p += page) {
			uint64_t e = 0;
			if (pread(pm, &e, sizeof(e), (off_t)(p / page * 8)) !=
			    (ssize_t)sizeof(e))
				return 2;
			any |= (e >> 63) != 0;
		}
		absent += !any;
	}
	for (uintptr_t p = lo; p < hi; p += page) {
		uint64_t e = 0;
		if (pread(pm, &e, sizeof(e), (off_t)(p / page * 8)) ==
		    (ssize_t)sizeof(e) && (e >> 63) != 0)
			resident += page;
	}
	/* The last page: what the linker puts after all of the library's
	 * objects (libgcc's __popcountdi2, libc_nonshared's pthread_atfork
	 * wrapper) was run by every process, mapping the last window with it;
	 * now only _fini, at exit, and the endpoint's code are there. */
	uint64_t last = 0;
	if (pread(pm, &last, sizeof(last), (off_t)((hi - page) / page * 8)) !=
	    (ssize_t)sizeof(last))
		return 2;
	close(pm);
	bool tail = (last >> 63) != 0;
	fprintf(stderr, "code: %zu KiB mapped, %zu KiB present; %u of %u "
	    "whole 64 KiB windows absent; last page %s\n",
	    (size_t)(hi - lo) >> 10, resident >> 10, absent, windows,
	    tail ? "present" : "absent");
	if (windows == 0)
		return 2;
	return absent > 0 && !tail ? 0 : 1;
}

static void test_cold_code_absent(void **state) {
	(void)state;
	if (mp_env_sanitizer()[0] != '\0')
		MP_SKIP("sanitizer build (%s): its instrumentation runs "
		    "everywhere", mp_env_sanitizer());
	static char err[1 << 12];
	int status = mp_run_child_conf("resident", NULL, err, sizeof(err),
	    NULL, 0, NULL);
	if (WIFEXITED(status) && WEXITSTATUS(status) == 2)
		MP_SKIP("could not read the mappings: %s", err);
	MP_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	    "every 64 KiB window of the library's code, or its last page, is "
	    "resident in a process without the profiler (status %#x): %s",
	    status, err);
}

/* The child's resident code in KiB, from its report; -1 if it could not
 * tell. */
static long child_resident_kib(const char *conf) {
	static char err[1 << 12];
	int status = mp_run_child_conf("resident", conf, err, sizeof(err),
	    NULL, 0, NULL);
	const char *at = strstr(err, "code: ");
	size_t mapped, present;
	if (!WIFEXITED(status) || WEXITSTATUS(status) == 2 || at == NULL ||
	    sscanf(at, "code: %zu KiB mapped, %zu KiB present", &mapped,
	    &present) != 2)
		return -1;
	return (long)present;
}

/* A process with the profiler on but inactive (prof:true,
 * prof_active:false, as a service that turns it on when asked) runs the
 * profiler's boot only, whose functions are MP_WARM: its resident code is
 * that of a process without the profiler, give or take 4 pages.  Before,
 * prof_gdump_maybe (run at each new high of the heap, gdump on or off)
 * brought a 64 KiB window of the profiler's code in: 15 pages more. */
static void test_inactive_profiler_code(void **state) {
	(void)state;
	if (mp_env_sanitizer()[0] != '\0')
		MP_SKIP("sanitizer build (%s): its instrumentation runs "
		    "everywhere", mp_env_sanitizer());
	bool prof = false;
	MALLCTL_READ("config.prof", prof);
	if (!prof)
		MP_SKIP("profiling not built in");
	long plain = child_resident_kib(NULL);
	long inactive = child_resident_kib("prof:true,prof_active:false");
	if (plain < 0 || inactive < 0)
		MP_SKIP("could not read the mappings");
	long page_kib = (long)(mp_page_size() >> 10);
	MP_ASSERT(inactive <= plain + 4 * page_kib, "%ld KiB of the library's "
	    "code resident with the profiler inactive, %ld without it",
	    inactive, plain);
}

int main(int argc, char **argv) {
	if (argc > 2 && strcmp(argv[1], "--child") == 0)
		return child();
	mp_test_init(120);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cold_code_absent),
		cmocka_unit_test(test_inactive_profiler_code),
	};
	return mp_run_tests(tests);
}
