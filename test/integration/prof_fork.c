/*
 * test/integration/prof_fork.c - profiling across fork().
 *
 * prof_fork.conf: prof:true,lg_prof_sample:0.  After fork the child's
 * automatic dumps carry its own pid (<prefix>.<childpid>.<seq>.m<n>.heap),
 * show what it inherited plus what it allocated, and the parent's dumps
 * keep the parent's pid and never show the child's allocations.  Forking
 * while other threads allocate, sample and dump must leave every profiler
 * lock usable in the child.
 */
#include "../test_util.h"

#include <sched.h>
#include <sys/wait.h>

#define NOBJ 8

static char tmpdir[256];
static void *parent_objs[NOBJ];
static void *child_objs[NOBJ];

void parent_site(void);
void child_site(void);

MP_SITE void parent_site(void) {
	for (int i = 0; i < NOBJ; i++) {
		parent_objs[i] = malloc(opaque_size(500));	/* usize 512 */
	}
	__asm__ volatile("" : : : "memory");
}

MP_SITE void child_site(void) {
	for (int i = 0; i < NOBJ; i++) {
		child_objs[i] = malloc(opaque_size(2000));	/* usize 2048 */
	}
	__asm__ volatile("" : : : "memory");
}

static void check_file(const char *name, bool want_parent, bool want_child) {
	char path[1024];
	snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
	mp_heap_t h;
	MP_HEAP_PARSE(path, &h);
	mp_heap_check_sums(&h, true);
	const mp_heap_stack_t *p = mp_heap_find_site(&h, (void *)parent_site,
	    1);
	const mp_heap_stack_t *c = mp_heap_find_site(&h, (void *)child_site,
	    1);
	MP_ASSERT((p != NULL) == want_parent, "%s: parent_site %s", name,
	    p != NULL ? "present" : "missing");
	MP_ASSERT((c != NULL) == want_child, "%s: child_site %s", name,
	    c != NULL ? "present" : "missing");
	if (p != NULL) {
		assert_int_equal(p->total.co, NOBJ);
		assert_int_equal(p->total.cb, NOBJ * 512);
	}
	if (c != NULL) {
		assert_int_equal(c->total.co, NOBJ);
		assert_int_equal(c->total.cb, NOBJ * 2048);
	}
	mp_heap_free(&h);
}

static void test_fork_names(void **state) {
	(void)state;
	char prefix[512];
	snprintf(prefix, sizeof(prefix), "%s/fork", tmpdir);
	assert_int_equal(mp_prof_prefix(prefix), 0);
	parent_site();
	assert_int_equal(mallctl("prof.dump", NULL, NULL, NULL, 0), 0);

	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		mp_alarm_arm(120);
		child_site();
		int r1 = mallctl("prof.dump", NULL, NULL, NULL, 0);
		int r2 = mallctl("prof.dump", NULL, NULL, NULL, 0);
		_exit(r1 == 0 && r2 == 0 ? 0 : 1);
	}
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	MP_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status "
	    "%#x", status);
	assert_int_equal(mallctl("prof.dump", NULL, NULL, NULL, 0), 0);

	mp_autoname_t pa[4], ca[4];
	size_t np = mp_dump_list(tmpdir, "fork", (long)getpid(), 'm', pa, 4);
	size_t nc = mp_dump_list(tmpdir, "fork", (long)pid, 'm', ca, 4);
	assert_int_equal(np, 2);
	assert_int_equal(nc, 2);
	/* The child's counters went on from the parent's at the fork. */
	assert_int_equal(ca[0].seq, pa[0].seq + 1);
	assert_int_equal(ca[0].n, pa[0].n + 1);
	assert_int_equal(ca[1].n, ca[0].n + 1);
	/* pid differs, so the names do although the counters collide. */
	assert_int_equal(pa[1].seq, ca[0].seq);
	assert_string_not_equal(pa[1].name, ca[0].name);

	check_file(pa[0].name, true, false);
	check_file(ca[0].name, true, true);
	check_file(ca[1].name, true, true);
	check_file(pa[1].name, true, false);
	for (int i = 0; i < NOBJ; i++) {
		free(parent_objs[i]);
	}
}

/* ---- fork under load */

static atomic_bool stop;
static atomic_uint worker_rounds;

static void *worker(void *arg) {
	unsigned id = (unsigned)(uintptr_t)arg;
	mp_rng_t rng = {id + 1};
	void *held[64] = {NULL};
	unsigned round = 0;
	while (!atomic_load(&stop)) {
		size_t k = (size_t)mp_rng_below(&rng, 64);
		free(held[k]);
		held[k] = malloc(16 + (size_t)mp_rng_below(&rng, 40000));
		if (++round % 2000 == 0) {
			char path[600];
			snprintf(path, sizeof(path), "%s/worker-%u.heap", tmpdir,
			    id);
			MP_CHECK(mp_prof_dump(path) == 0, "worker dump");
			char name[16];
			snprintf(name, sizeof(name), "w%u-%u", id, round);
			const char *n = name;
			MP_CHECK(mallctl("thread.prof.name", NULL, NULL,
			    (void *)&n, sizeof(n)) == 0, "thread.prof.name");
		}
		atomic_fetch_add(&worker_rounds, 1);
	}
	for (size_t k = 0; k < 64; k++) {
		free(held[k]);
	}
	return NULL;
}

#define NWORKERS 3
#define NFORKS 30

static void test_fork_under_load(void **state) {
	(void)state;
	pthread_t t[NWORKERS];
	for (unsigned i = 0; i < NWORKERS; i++) {
		assert_int_equal(pthread_create(&t[i], NULL, worker,
		    (void *)(uintptr_t)i), 0);
	}
	unsigned failed = 0;
	for (int i = 0; i < NFORKS; i++) {
		/* Let the workers get going between forks. */
		unsigned r0 = atomic_load(&worker_rounds);
		while (atomic_load(&worker_rounds) < r0 + 500) {
			sched_yield();
		}
		pid_t pid = fork();
		assert_true(pid >= 0);
		if (pid == 0) {
			/* A deadlock on a profiler lock ends in SIGALRM. */
			mp_alarm_arm(120);
			child_site();
			char path[600];
			snprintf(path, sizeof(path), "%s/child-%d.heap", tmpdir,
			    i);
			int r = mp_prof_dump(path);
			for (int k = 0; k < NOBJ; k++) {
				free(child_objs[k]);
			}
			_exit(r == 0 ? 0 : 1);
		}
		int status;
		assert_int_equal(waitpid(pid, &status, 0), pid);
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
			print_message("# fork %d: child status %#x\n", i,
			    status);
			failed++;
			continue;
		}
		char name[64];
		snprintf(name, sizeof(name), "child-%d.heap", i);
		check_file(name, false, true);
	}
	atomic_store(&stop, true);
	for (unsigned i = 0; i < NWORKERS; i++) {
		assert_int_equal(pthread_join(t[i], NULL), 0);
	}
	assert_int_equal(failed, 0);
	assert_int_equal(atomic_load(&mp_failures), 0);
}

/*
 * A thread that forks before it ever allocated is the child's main thread
 * but runs on its own stack, not under __libc_stack_end: its first sample
 * must find its real stack bounds (a walk bounded by the main stack's top
 * would cross unmapped memory).  The child's stacks reach through the
 * site into forking_thread.
 */
void *forking_thread(void *arg);

MP_SITE void *forking_thread(void *arg) {
	(void)arg;
	pid_t pid = fork();
	if (pid == 0) {
		mp_alarm_arm(120);
		child_site();
		char path[600];
		snprintf(path, sizeof(path), "%s/thread-child.heap", tmpdir);
		_exit(mp_prof_dump(path) == 0 ? 0 : 1);
	}
	return (void *)(intptr_t)pid;
}

static void test_fork_from_thread(void **state) {
	(void)state;
	pthread_t t;
	void *ret;
	assert_int_equal(pthread_create(&t, NULL, forking_thread, NULL), 0);
	assert_int_equal(pthread_join(t, &ret), 0);
	pid_t pid = (pid_t)(intptr_t)ret;
	assert_true(pid > 0);
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	MP_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child "
	    "status %#x", status);
	check_file("thread-child.heap", false, true);
	char path[1024];
	snprintf(path, sizeof(path), "%s/thread-child.heap", tmpdir);
	mp_heap_t h;
	MP_HEAP_PARSE(path, &h);
	MP_ASSERT(mp_heap_find_site(&h, (void *)forking_thread, 4) != NULL,
	    "no stack reaches from child_site into forking_thread");
	mp_heap_free(&h);
}

static void test_no_profiler(void **state) {
	(void)state;
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		_exit(mallctl("prof.dump", NULL, NULL, NULL, 0) == ENOENT ? 0 :
		    1);
	}
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

int main(void) {
	mp_test_init(300);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fork_names),
		cmocka_unit_test(test_fork_under_load),
		cmocka_unit_test(test_fork_from_thread),
	};
	return mp_prof_test_main("mp_prof_fork", test_no_profiler, tests);
}
