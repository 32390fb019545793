/*
 * prof_sys.c: backtraces for the heap profiler, by walking frame
 * pointers.  Every frame is checked against the calling thread's stack
 * bounds before it is read, so a caller built without frame pointers gives
 * a short stack, never a fault; nothing here locks, allocates or calls
 * into the dynamic loader, so it is safe inside malloc.
 *
 * The walk starts at the frame of the exported function the program
 * called (or of the slow path that function tail-called), so its first
 * return address is the program's own: the allocator's frames never
 * appear, whether the library is preloaded, linked or linked statically.
 */
#include "malloc_prof/internal/internal.h"

#include <sys/resource.h>
#include <unistd.h>

/* The top of the main thread's stack as glibc's startup code saw it: the
 * frames of main and everything it calls lie below. */
extern void *__libc_stack_end;

/*
 * Stack bounds of the calling thread.  For the main thread they come from
 * __libc_stack_end: pthread_getattr_np would parse /proc/self/maps with
 * stdio, which cost ~140 KiB of resident memory (libc's pages and the
 * buffers; bench churn's peak RSS) in a process that never touched them.
 * Other threads' bounds come from their descriptor (no file); so do the
 * main thread's when its stack has no limit.  pthread_getattr_np may
 * still allocate (a cpuset buffer): the caller raises tsd->reentrancy, so
 * such allocations are never sampled.
 */
static bool on_main_stack(uintptr_t here) {
	/* The thread that forked is its child's main thread, on a stack of
	 * its own: check that we are within the stack limit below the top. */
	struct rlimit rl;
	uintptr_t top = (uintptr_t)__libc_stack_end;
	return getpid() == gettid() && getrlimit(RLIMIT_STACK, &rl) == 0 &&
	    rl.rlim_cur != RLIM_INFINITY && here < top &&
	    top - here < rl.rlim_cur;
}

void prof_sys_thread_init(tsd_t *tsd) {
	uintptr_t here = (uintptr_t)__builtin_frame_address(0);
	if (on_main_stack(here)) {
		tsd->stack_lo = here & ~(uintptr_t)PAGE_MASK;
		tsd->stack_hi = (uintptr_t)__libc_stack_end;
	} else {
		pthread_attr_t attr;
		if (pthread_getattr_np(pthread_self(), &attr) == 0) {
			void *addr;
			size_t size;
			if (pthread_attr_getstack(&attr, &addr, &size) == 0) {
				tsd->stack_lo = (uintptr_t)addr;
				tsd->stack_hi = (uintptr_t)addr + size;
			}
			pthread_attr_destroy(&attr);
		}
	}
	if (tsd->stack_hi <= here || tsd->stack_lo > here) {
		/* Unknown: trust only the page we are on. */
		tsd->stack_lo = here;
		tsd->stack_hi = (here | PAGE_MASK) + 1;
	}
}

unsigned prof_backtrace(void **vec, unsigned max, uintptr_t fp) {
	tsd_t *tsd = &mp_tsd;
	uintptr_t lo = (uintptr_t)__builtin_frame_address(0);
	uintptr_t hi = tsd->stack_hi;
	unsigned n = 0;
	while (n < max) {
		if (fp < lo || fp > hi - 2 * sizeof(uintptr_t) ||
		    (fp & (sizeof(uintptr_t) - 1)) != 0)
			break;
		uintptr_t next = ((const uintptr_t *)fp)[0];
		uintptr_t ret = ((const uintptr_t *)fp)[1];
		if (ret == 0)
			break;
		vec[n++] = (void *)ret;
		/* Frames sit at higher addresses as we unwind. */
		if (next <= fp)
			break;
		lo = fp;
		fp = next;
	}
	return n;
}
