/*
 * test/stress/fork_storm.c - 1,000 forks from a process whose other
 * threads never stop allocating, freeing each other's blocks and dumping.
 *
 * Three threads swap blocks through a shared table (each frees what
 * another allocated) and one of them also writes prof.dump to a
 * temporary directory every few milliseconds.  The main thread forks
 * NFORKS children, at most MAXLIVE alive at once.  Each child (an alarm
 * against deadlock) frees a few blocks it inherited from the table,
 * allocates blocks of mixed sizes, writes prof.dump with the automatic
 * name (prof.prefix is the temporary directory), checks that exactly one
 * file carries its own pid and that it parses as heap_v2 (test_util.h's
 * reader), removes it, frees everything and _exits 0; failures are its
 * exit status.  The parent checks every status.  --disable-prof: the same
 * without the dumps.  TSan: NFORKS_TSAN forks (doc/reliability.md).
 */
#include "../test_util.h"

#include <sys/types.h>
#include <sys/wait.h>

#define NFORKS 1000
#define NFORKS_TSAN 200
#define MAXLIVE 4
#define NTHREADS 3
#define NSHARED 512
#define CHILD_TIMEOUT 120

static _Atomic(unsigned char *) shared[NSHARED];
static atomic_bool stop;
static atomic_ulong ops, parent_dumps;
static bool have_prof;
static char tmpdir[256];
static char prefix[300];

/* A block of n bytes whose first and last byte are (unsigned char)n. */
static unsigned char *block_new(mp_rng_t *rng) {
	uint64_t r = mp_rng_next(rng);
	size_t n = r % 32 == 0 ? (size_t)(r >> 8) % (256 * MP_KiB) + 1 :
	    (size_t)(r >> 8) % 600 + 1;
	unsigned char *p = LAUNDER((unsigned char *)malloc(n + 8));
	if (p == NULL) {
		return NULL;
	}
	memcpy(p, &n, sizeof(n));
	p[sizeof(n) + n - 1] = (unsigned char)n;
	return p;
}

static bool block_ok(const unsigned char *p) {
	size_t n;
	memcpy(&n, p, sizeof(n));
	return n >= 1 && n <= 256 * MP_KiB && p[sizeof(n) + n - 1] ==
	    (unsigned char)n;
}

static void *worker(void *argp) {
	unsigned id = (unsigned)(uintptr_t)argp;
	mp_rng_t rng = {0xf0f0 + id};
	unsigned long n = 0;
	uint64_t next_dump = 0;
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		unsigned char *p = block_new(&rng);
		MP_CHECK(p != NULL, "worker %u: malloc failed", id);
		/* Most likely another thread's block comes back. */
		unsigned char *old = atomic_exchange(&shared[mp_rng_below(&rng,
		    NSHARED)], p);
		if (old != NULL) {
			MP_CHECK(block_ok(old), "worker %u: block corrupted",
			    id);
			free(old);
		}
		n++;
		if (id == 0 && have_prof && mp_now_ns() >= next_dump) {
			char path[400];
			snprintf(path, sizeof(path), "%s/parent.%lu.heap", tmpdir,
			    atomic_load(&parent_dumps) % 4);
			const char *pp = path;
			MP_CHECK(mallctl("prof.dump", NULL, NULL, &pp,
			    sizeof(pp)) == 0, "parent prof.dump");
			atomic_fetch_add(&parent_dumps, 1);
			next_dump = mp_now_ns() + 3000000;
		}
	}
	atomic_fetch_add(&ops, n);
	return NULL;
}

/* The child: returns the number of failed checks. */
static unsigned child_work(unsigned k) {
	unsigned bad = 0;
	mp_rng_t rng = {0xc0ffee + k};
	/* Blocks the parent's threads left in the table. */
	for (unsigned i = 0; i < 8; i++) {
		unsigned char *p = atomic_exchange(&shared[mp_rng_below(&rng,
		    NSHARED)], NULL);
		if (p != NULL) {
			bad += !block_ok(p);
			free(p);
		}
	}
	enum { N = 200 };
	unsigned char *mine[N];
	for (unsigned i = 0; i < N; i++) {
		mine[i] = block_new(&rng);
		bad += mine[i] == NULL;
	}
	if (have_prof) {
		long pid = (long)getpid();
		bad += mallctl("prof.dump", NULL, NULL, NULL, 0) != 0;
		mp_autoname_t names[2];
		size_t nn = mp_dump_list(tmpdir, "storm", pid, 'm', names, 2);
		if (nn != 1) {
			bad++;
		} else {
			char path[600];
			snprintf(path, sizeof(path), "%s/%s", tmpdir,
			    names[0].name);
			char want[32];
			snprintf(want, sizeof(want), ".%ld.", pid);
			bad += strstr(names[0].name, want) == NULL;
			mp_heap_t h;
			if (!mp_heap_parse(path, &h)) {
				char line[700];
				snprintf(line, sizeof(line), "# child %ld: %s: "
				    "%s", pid, names[0].name, h.err);
				mp_write_line(line);
				bad++;
			}
			mp_heap_free(&h);
			unlink(path);
		}
	}
	for (unsigned i = 0; i < N; i++) {
		if (mine[i] != NULL) {
			bad += !block_ok(mine[i]);
			free(mine[i]);
		}
	}
	return bad;
}

static unsigned reap(int *live) {
	int status;
	pid_t w;
	while ((w = wait(&status)) < 0 && errno == EINTR) {
	}
	if (w < 0) {
		printf("# wait: %s\n", strerror(errno));
		return 1;
	}
	(*live)--;
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
		return 0;
	}
	printf("# child %ld: status 0x%x (%s)\n", (long)w, status,
	    WIFSIGNALED(status) ? (WTERMSIG(status) == SIGALRM ?
	    "timed out: deadlock after fork?" : "killed by a signal") :
	    "failed checks");
	return 1;
}

static void test_fork_storm(void **state) {
	(void)state;
	bool tsan = strcmp(mp_env_sanitizer(), "tsan") == 0;
	int nforks = tsan ? NFORKS_TSAN : NFORKS;
	bool cp = false;
	size_t sz = sizeof(cp);
	have_prof = mallctl("config.prof", &cp, &sz, NULL, 0) == 0 && cp;
	bool on = false;
	sz = sizeof(on);
	have_prof = have_prof && mallctl("opt.prof", &on, &sz, NULL, 0) ==
	    0 && on;
	assert_true(mp_tmpdir_make(tmpdir, sizeof(tmpdir), "mp_fork_storm"));
	if (have_prof) {
		snprintf(prefix, sizeof(prefix), "%s/storm", tmpdir);
		const char *pp = prefix;
		assert_int_equal(mallctl("prof.prefix", NULL, NULL, &pp,
		    sizeof(pp)), 0);
	} else {
		printf("# no profiler: forks without dumps\n");
	}
	pthread_t th[NTHREADS];
	for (unsigned i = 0; i < NTHREADS; i++) {
		assert_int_equal(pthread_create(&th[i], NULL, worker,
		    (void *)(uintptr_t)i), 0);
	}
	mp_sleep_ms(10);
	uint64_t t0 = mp_now_ns();
	unsigned bad = 0;
	int live = 0;
	for (int k = 0; k < nforks; k++) {
		if (live == MAXLIVE) {
			bad += reap(&live);
		}
		fflush(NULL);
		pid_t pid = fork();
		if (pid == 0) {
			mp_alarm_arm(CHILD_TIMEOUT);
			unsigned b = child_work((unsigned)k);
			_exit(b == 0 ? 0 : b > 100 ? 100 : (int)b);
		}
		assert_true(pid > 0);
		live++;
	}
	while (live > 0) {
		bad += reap(&live);
	}
	double secs = (double)(mp_now_ns() - t0) / 1e9;
	atomic_store(&stop, true);
	for (unsigned i = 0; i < NTHREADS; i++) {
		assert_int_equal(pthread_join(th[i], NULL), 0);
	}
	for (unsigned i = 0; i < NSHARED; i++) {
		unsigned char *p = atomic_exchange(&shared[i], NULL);
		if (p != NULL) {
			MP_CHECK(block_ok(p), "table block %u corrupted", i);
			free(p);
		}
	}
	printf("# %d forks (%d at a time) in %.1f s; %lu blocks swapped by "
	    "%d threads, %lu dumps by the parent\n", nforks, MAXLIVE, secs,
	    atomic_load(&ops), NTHREADS, atomic_load(&parent_dumps));
	mp_tmpdir_remove(tmpdir);
	MP_ASSERT(bad == 0, "%u of %d children failed", bad, nforks);
	assert_int_equal(atomic_load(&mp_failures), 0);
	assert_true(atomic_load(&ops) > 0);
}

int main(void) {
	mp_test_init(300);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fork_storm),
	};
	return mp_run_tests(tests);
}
