/*
 * test/unit/prof_stack_bounds.c - the stack bounds a thread's walks
 * trust (prof_sys.c, prof_sys_thread_init): the main thread's top is
 * where glibc's startup code found its stack (__libc_stack_end); any
 * other thread's is its descriptor at the top of its stack block,
 * including a stack the program gave (pthread_attr_setstack) and the main
 * thread of a child forked by a thread, which runs on that thread's
 * stack.  Every frame of the caller lies inside the bounds.  The
 * candidates are told apart without a system call; what this checks is
 * that the order that allows it picks the same tops.
 *
 * prof_stack_bounds.conf: prof:true.  No check depends on the machine's
 * speed.
 */
#include "../test_util.h"

#include "malloc_prof/internal/internal.h"

#include <pthread.h>
#include <sys/mman.h>
#include <sys/wait.h>

extern void *__libc_stack_end;

#define USER_STACK ((size_t)256 << 10)

typedef struct {
	uintptr_t lo, hi, self, frame;
} bounds_t;

static MP_NOINLINE void read_bounds(bounds_t *b) {
	tsd_t *tsd = tsd_fetch();
	assert_non_null(tsd);
	prof_sys_thread_init(tsd);
	b->lo = tsd->stack_lo;
	b->hi = tsd->stack_hi;
	b->self = (uintptr_t)pthread_self();
	b->frame = (uintptr_t)__builtin_frame_address(0);
}

/* The caller's frame lies inside [lo, hi). */
static void assert_inside(const bounds_t *b) {
	MP_ASSERT(b->lo <= b->frame && b->frame < b->hi, "frame %#lx outside "
	    "[%#lx, %#lx)", (unsigned long)b->frame, (unsigned long)b->lo,
	    (unsigned long)b->hi);
}

static void *thread_bounds(void *arg) {
	read_bounds(arg);
	return NULL;
}

static void test_main_thread(void **state) {
	(void)state;
	if (!config_prof)
		MP_SKIP("profiling not built in");
	bounds_t b;
	read_bounds(&b);
	assert_inside(&b);
	assert_int_equal(b.hi, (uintptr_t)__libc_stack_end);
}

static void test_glibc_thread(void **state) {
	(void)state;
	if (!config_prof)
		MP_SKIP("profiling not built in");
	bounds_t b;
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, thread_bounds, &b), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_inside(&b);
	assert_int_equal(b.hi, b.self);
}

static void test_given_stack(void **state) {
	(void)state;
	if (!config_prof)
		MP_SKIP("profiling not built in");
	void *stack = mmap(NULL, USER_STACK, PROT_READ | PROT_WRITE,
	    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(stack != MAP_FAILED);
	pthread_attr_t attr;
	assert_int_equal(pthread_attr_init(&attr), 0);
	assert_int_equal(pthread_attr_setstack(&attr, stack, USER_STACK), 0);
	bounds_t b;
	pthread_t t;
	assert_int_equal(pthread_create(&t, &attr, thread_bounds, &b), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	pthread_attr_destroy(&attr);
	assert_inside(&b);
	assert_int_equal(b.hi, b.self);
	assert_true(b.lo >= (uintptr_t)stack &&
	    b.hi <= (uintptr_t)stack + USER_STACK);
	munmap(stack, USER_STACK);
}

/* A child forked by a thread: its main thread is on the thread's stack,
 * far below __libc_stack_end; the bounds are the thread's.  Exit status
 * 0: as expected; 1: the top is not the descriptor; 2: the frame is
 * outside. */
static void *fork_from_thread(void *arg) {
	int *status = arg;
	pid_t pid = fork();
	if (pid == 0) {
		bounds_t b;
		read_bounds(&b);
		_exit(b.hi != b.self ? 1 : b.lo <= b.frame && b.frame < b.hi ?
		    0 : 2);
	}
	*status = -1;
	if (pid > 0 && waitpid(pid, status, 0) != pid)
		*status = -1;
	return NULL;
}

static void test_forked_by_thread(void **state) {
	(void)state;
	if (!config_prof)
		MP_SKIP("profiling not built in");
	int status = -1;
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, fork_from_thread, &status),
	    0);
	assert_int_equal(pthread_join(t, NULL), 0);
	MP_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	    "the child's bounds: status %#x (1: top is not its descriptor, "
	    "2: its frame outside)", (unsigned)status);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_main_thread),
		cmocka_unit_test(test_glibc_thread),
		cmocka_unit_test(test_given_stack),
		cmocka_unit_test(test_forked_by_thread),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
