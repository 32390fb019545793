/*
 * os.c: the operating-system layer: page mappings, purging, commit and
 * decommit (and the check that MADV_DONTNEED zeroes: trust_madvise), the
 * program break (dss), time and the CPU count, with the
 * mapping fault injection of debug builds in a section of its own.
 * Nothing above this file calls mmap, madvise or sbrk directly (mutexes
 * are in mutex.c).
 */
#include "malloc_prof/internal/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

/* ---- fault injection (debug builds; doc/reliability.md) ---- */

#if MP_CONFIG_DEBUG
size_t opt_debug_mmap_fail;
static _Atomic size_t mmap_fail_at;
static _Atomic uint64_t mmap_fail_count;

void os_mmap_fail_conf_apply(void) {
	atomic_store(&mmap_fail_at, opt_debug_mmap_fail);
}

void os_mmap_fail_set(size_t n) {
	atomic_store(&mmap_fail_at, n);
}

size_t os_mmap_fail_get(void) {
	return atomic_load(&mmap_fail_at);
}

uint64_t os_mmap_fail_count(void) {
	return atomic_load(&mmap_fail_count);
}

/* true if this mapping is to fail (see os_mmap_fail_set). */
static bool mmap_fail_now(void) {
	size_t n = atomic_load_explicit(&mmap_fail_at, memory_order_relaxed);
	for (;;) {
		if (n == 0)
			return false;
		if (n == 1) {
			atomic_fetch_add(&mmap_fail_count, 1);
			errno = ENOMEM;
			return true;
		}
		if (atomic_compare_exchange_weak(&mmap_fail_at, &n, n - 1))
			return false;
	}
}
#else
static bool mmap_fail_now(void) {
	return false;
}
#endif

/* ---- pages ---- */

/* Heap mappings the OS refused (ENOMEM: RLIMIT_AS, overcommit, or the
 * fault injection): prof_oom_dump dumps only after one. */
static _Atomic uint64_t os_map_refused;

uint64_t os_map_refusals(void) {
	return atomic_load_explicit(&os_map_refused, memory_order_relaxed);
}

static void *os_map_fail(void) {
	if (errno == ENOMEM)
		atomic_fetch_add_explicit(&os_map_refused, 1,
		    memory_order_relaxed);
	return NULL;
}

/*
 * Map `size` bytes aligned to `align`.  Over-map and trim when the kernel's
 * address is not aligned: the result is always exactly [ret, ret + size).
 * No MAP_NORESERVE: the kernel's overcommit heuristic should refuse an
 * absurd request with ENOMEM here rather than OOM-kill the process later.
 */
void *os_map(size_t size, size_t align) {
	mp_assert(size % PAGE == 0 && align % PAGE == 0);
	if (mmap_fail_now())
		return os_map_fail();
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE,
	    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return os_map_fail();
	if (((uintptr_t)p & (align - 1)) == 0)
		return p;
	munmap(p, size);
	size_t over = size + align - PAGE;
	if (over < size)
		return NULL;
	p = mmap(NULL, over, PROT_READ | PROT_WRITE,
	    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return os_map_fail();
	uintptr_t start = ALIGNMENT_CEILING((uintptr_t)p, align);
	size_t lead = start - (uintptr_t)p;
	size_t trail = over - lead - size;
	if (lead != 0)
		munmap(p, lead);
	if (trail != 0)
		munmap((char *)start + size, trail);
	return (void *)start;
}

/*
 * Whether a reservation of this size would cost the process, or the
 * machine, something: an address-space limit (RLIMIT_AS) would lose
 * `size` of its room at once, and strict overcommit
 * (vm.overcommit_memory 2, as PostgreSQL hosts run) ignores
 * MAP_NORESERVE and charges the whole size against the commit limit that
 * every process shares.  Unknown (no /proc) counts as strict.
 */
static bool os_sparse_costly(void) {
	struct rlimit rl;
	if (getrlimit(RLIMIT_AS, &rl) != 0 || rl.rlim_cur != RLIM_INFINITY)
		return true;
	int fd = open("/proc/sys/vm/overcommit_memory", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return true;
	char c = '2';
	ssize_t n = read(fd, &c, 1);
	close(fd);
	return n != 1 || c == '2';
}

/*
 * A sparse table of `size` bytes (the page map's class tags): reserved
 * with MAP_NORESERVE, since only the pages written ever take memory, and
 * kept out of huge pages, which would make each write fault in 2 MiB.
 * Not subject to the fault injection, whose counts are of heap mappings.
 * NULL when refused, or not asked for where it would be charged
 * (os_sparse_costly: strict overcommit, an address-space limit).
 */
void *os_map_sparse(size_t size) {
	int saved = errno;
	bool costly = os_sparse_costly();
	errno = saved;
	if (costly)
		return NULL;
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE,
	    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
#ifdef MADV_NOHUGEPAGE
	madvise(p, size, MADV_NOHUGEPAGE);
#endif
	return p;
}

void os_unmap(void *addr, size_t size) {
	if (munmap(addr, size) != 0 && config_debug)
		mp_abort("munmap(%p, %zu) failed: errno %d", addr, size, errno);
}

/*
 * opt.trust_madvise: false (jemalloc's default on Linux) checks once, at
 * the first forced purge, that MADV_DONTNEED leaves a page reading zero
 * (some emulators drop the advice).  The check costs one page's mmap,
 * write, madvise, read and munmap; a program that never purges never
 * pays it.  0: not checked yet, 1: zeroes, 2: does not.
 */
bool opt_trust_madvise = false;
static _Atomic int purge_zeroes_state;
static _Atomic uint64_t purge_zeroes_checks;

static bool madvise_zeroes_page(void) {
	unsigned char *p = mmap(NULL, PAGE, PROT_READ | PROT_WRITE,
	    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return true;  /* cannot tell: trust it, as before the check */
	memset(p, 0x5a, PAGE);
	bool zeroes = madvise(p, PAGE, MADV_DONTNEED) == 0;
#if MP_CONFIG_DEBUG
	/* The tests' stand-in for an emulator that ignores the advice. */
	const char *sim = getenv("MALLOC_PROF_DEBUG_MADVISE_NOZERO");
	if (sim != NULL && sim[0] == '1')
		memset(p, 0x5a, PAGE);
#endif
	/* By words: a byte loop was 26,000 instructions of the check. */
	const uint64_t *w = (const uint64_t *)(void *)p;
	for (size_t i = 0; zeroes && i < PAGE / sizeof(*w); i++)
		zeroes = w[i] == 0;
	munmap(p, PAGE);
	return zeroes;
}

bool os_purge_zeroes(void) {
	if (opt_trust_madvise)
		return true;
	int s = atomic_load_explicit(&purge_zeroes_state,
	    memory_order_acquire);
	if (likely(s != 0))
		return s == 1;
	/* Two threads may both check: the same answer, one line each at
	 * worst. */
	bool zeroes = madvise_zeroes_page();
	atomic_fetch_add(&purge_zeroes_checks, 1);
	atomic_store_explicit(&purge_zeroes_state, zeroes ? 1 : 2,
	    memory_order_release);
	if (!zeroes)
		mp_error("MADV_DONTNEED does not zero pages here (an "
		    "emulator?): purged pages are zeroed with memset when "
		    "needed (trust_madvise:true skips this check)");
	return zeroes;
}

uint64_t os_purge_zeroes_checks(void) {
	return atomic_load_explicit(&purge_zeroes_checks,
	    memory_order_relaxed);
}

/* true when the pages may not read zero after: the madvise failed, or it
 * does not zero here (os_purge_zeroes); they are released either way. */
bool os_purge_forced(void *addr, size_t size) {
	bool failed = madvise(addr, size, MADV_DONTNEED) != 0;
#if MP_CONFIG_DEBUG
	if (!failed && !opt_trust_madvise && !os_purge_zeroes()) {
		const char *sim = getenv("MALLOC_PROF_DEBUG_MADVISE_NOZERO");
		if (sim != NULL && sim[0] == '1')
			memset(addr, 0x5a, size);
	}
#endif
	return failed || !os_purge_zeroes();
}

/* Pages of a read-only file mapping out of the process's page tables:
 * they are read again from the page cache when touched (for the
 * profiler's one-time reads of .eh_frame: prof_cfi.c says when that is
 * safe).  true on failure. */
bool os_file_pages_drop(const void *addr, size_t size) {
	return madvise((void *)(uintptr_t)addr, size, MADV_DONTNEED) != 0;
}

/*
 * Move the pages of [from, from + size) to [to, to + size), replacing
 * what was mapped there, and leave `from` mapped and reading as zero, as
 * after os_purge_forced.  Page tables move, no page is copied, zeroed or
 * faulted: a freed block's resident pages serve a new block elsewhere in
 * the mapping (extent.c, calloc's large blocks).  True on failure (a
 * kernel before 5.13 has no MREMAP_DONTUNMAP for these mappings); then
 * nothing has moved.
 */
bool os_move_pages(void *from, void *to, size_t size) {
#if defined(MREMAP_DONTUNMAP) && defined(MREMAP_FIXED)
	return mremap(from, size, size, MREMAP_MAYMOVE | MREMAP_FIXED |
	    MREMAP_DONTUNMAP, to) == MAP_FAILED;
#else
	(void)from;
	(void)to;
	(void)size;
	return true;
#endif
}

bool os_purge_lazy(void *addr, size_t size) {
#ifdef MADV_FREE
	return madvise(addr, size, MADV_FREE) != 0;
#else
	return true;
#endif
}

void *os_map_at(void *addr, size_t size) {
	mp_assert(size % PAGE == 0 && (uintptr_t)addr % PAGE == 0);
	if (mmap_fail_now())
		return os_map_fail();
	/* A hint, not MAP_FIXED: an address already in use must fail, not
	 * be replaced. */
	void *p = mmap(addr, size, PROT_READ | PROT_WRITE,
	    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return os_map_fail();
	if (p != addr) {
		munmap(p, size);
		return NULL;
	}
	return p;
}

/* Over the pages in place (MAP_FIXED on our own range): decommitted pages
 * hold no memory and fault on access, committed ones read as zero. */
bool os_commit(void *addr, size_t size) {
	return mmap(addr, size, PROT_READ | PROT_WRITE,
	    MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == MAP_FAILED;
}

bool os_decommit(void *addr, size_t size) {
	return mmap(addr, size, PROT_NONE,
	    MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0) ==
	    MAP_FAILED;
}

/* ---- dss (the program break) ---- */

/* Our sbrk calls are serialised by a spin lock (rare calls, under an
 * arena's lock: os.c sits below mutex.c, which uses it); another user of
 * sbrk (the C library's malloc in a prefixed build) may move the break
 * between two of them, which the check of sbrk's result catches. */
static atomic_flag dss_lock = ATOMIC_FLAG_INIT;
static _Atomic uintptr_t dss_lo, dss_hi;  /* what we took: [lo, hi) */

void *os_dss_alloc(size_t size, size_t align) {
	mp_assert(size % PAGE == 0 && align % PAGE == 0);
	void *ret = NULL;
	while (atomic_flag_test_and_set_explicit(&dss_lock,
	    memory_order_acquire))
		sched_yield();
	uintptr_t cur = (uintptr_t)sbrk(0);
	if (cur == (uintptr_t)-1)
		goto out;
	size_t pad = ALIGNMENT_CEILING(cur, align) - cur;
	if (pad + size < size)
		goto out;
	uintptr_t got = (uintptr_t)sbrk((intptr_t)(pad + size));
	if (got == (uintptr_t)-1)
		goto out;
	uintptr_t start = ALIGNMENT_CEILING(got, align);
	if (start + size > got + pad + size)
		goto out;       /* the break moved under us: leave it */
	if (atomic_load(&dss_lo) == 0 || got < atomic_load(&dss_lo))
		atomic_store(&dss_lo, got);
	if (got + pad + size > atomic_load(&dss_hi))
		atomic_store(&dss_hi, got + pad + size);
	ret = (void *)start;
out:
	atomic_flag_clear_explicit(&dss_lock, memory_order_release);
	return ret;
}

bool os_in_dss(const void *addr) {
	uintptr_t a = (uintptr_t)addr;
	return a >= atomic_load_explicit(&dss_lo, memory_order_relaxed) &&
	    a < atomic_load_explicit(&dss_hi, memory_order_relaxed);
}

/* ---- transparent huge pages ---- */

/* The kernel's mode, as /sys/kernel/mm/transparent_hugepage/enabled
 * names it with brackets; -1 until read. */
static _Atomic int os_thp_mode = -1;

/* Read once with open/read (no allocation: called during start-up).  A
 * kernel without THP, or a file in an unknown format, is "unsupported",
 * as jemalloc's pages.c judges it. */
os_thp_t os_thp_system(void) {
	int mode = atomic_load_explicit(&os_thp_mode, memory_order_relaxed);
	if (mode >= 0)
		return (os_thp_t)mode;
	mode = OS_THP_UNSUPPORTED;
	char buf[128];
	int fd = open("/sys/kernel/mm/transparent_hugepage/enabled",
	    O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		ssize_t n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		buf[n > 0 ? n : 0] = '\0';
		if (strstr(buf, "[madvise]") != NULL)
			mode = OS_THP_DEFAULT;
		else if (strstr(buf, "[always]") != NULL)
			mode = OS_THP_ALWAYS;
		else if (strstr(buf, "[never]") != NULL)
			mode = OS_THP_NEVER;
	}
	atomic_store_explicit(&os_thp_mode, mode, memory_order_relaxed);
	return (os_thp_t)mode;
}

bool os_pages_huge(void *addr, size_t size, bool huge) {
#if defined(MADV_HUGEPAGE) && defined(MADV_NOHUGEPAGE)
	return madvise(addr, size, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE) != 0;
#else
	(void)addr; (void)size; (void)huge;
	return true;
#endif
}

/* jemalloc's rule (pages_set_thp_state): nothing when the wish is
 * "default" or already the kernel's mode; "always" advises huge pages
 * unless the kernel never gives them; "never" advises against them. */
void os_thp_apply(void *addr, size_t size, os_thp_t want) {
	os_thp_t sys = os_thp_system();
	if (want == OS_THP_DEFAULT || want == OS_THP_UNSUPPORTED ||
	    sys == OS_THP_UNSUPPORTED || want == sys)
		return;
	if (want == OS_THP_ALWAYS && sys != OS_THP_NEVER)
		os_pages_huge(addr, size, true);
	else if (want == OS_THP_NEVER)
		os_pages_huge(addr, size, false);
}

/* ---- time and CPUs ---- */

unsigned os_ncpus(void) {
	cpu_set_t set;
	if (sched_getaffinity(0, sizeof(set), &set) == 0) {
		int n = CPU_COUNT(&set);
		if (n > 0)
			return (unsigned)n;
	}
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	return n > 0 ? (unsigned)n : 1;
}

uint64_t os_now_ns(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The same clock at its tick's resolution (a few ms, never ahead of
 * os_now_ns), a third of the cost here (6 ns against 20): enough to ask
 * whether a decay pass is due. */
uint64_t os_now_coarse_ns(void) {
	struct timespec ts;
	if (clock_gettime(CLOCK_MONOTONIC_COARSE, &ts) != 0)
		return os_now_ns();
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}
