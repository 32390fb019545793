/*
 * sys.h: the system layer's cross-file prototypes (src/sys/): output that
 * never allocates (and its buffered writer, buf.h), assertions, pages and
 * time from the OS, ranked mutexes.
 * It depends on nothing but types.h, buf.h and the public header: everything
 * else may use it, it uses nothing of the allocator.
 * Conventions (for every internal header): a `bool` return means "true on
 * error" unless said otherwise; functions named *_locked expect the named
 * lock to be held.
 */
#ifndef MP_INTERNAL_SYS_H
#define MP_INTERNAL_SYS_H

#include "malloc_prof/internal/types.h"
#include "malloc_prof/internal/buf.h"    /* mp_buf_t, inline */
#include "malloc_prof.h"     /* the public prototypes, prefixed */

#include <stdarg.h>
#include <string.h>

/* ------------------------------------------------------------------ util.c */
/* Output never allocates: formatting is done into caller buffers and
 * written with write(2) (or through the public malloc_message hook). */
int mp_vsnprintf(char *buf, size_t size, const char *fmt, va_list ap);
int mp_snprintf(char *buf, size_t size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void mp_write(const char *s);                 /* malloc_message or stderr */
/* One line "<malloc_prof>: ...\n" on stderr (through mp_write). */
void mp_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Misuse of pointer p by the program ("free(): double free of 0x..."): one
 * line naming the entry point, what happened and p, then `detail`; then
 * abort() in debug builds (which abort on misuse, as sdallocx's size check
 * does) or with abort:true.  Release builds carry on, leaking the block. */
MP_COLD void mp_misuse(const char *func, const char *what, void *p,
    const char *detail);
/* abort:true (defined beside conf.c's options table): the one option this
 * layer reads, for mp_misuse. */
extern bool opt_abort;
MP_COLD __attribute__((noreturn)) void mp_abort(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));
MP_COLD __attribute__((noreturn)) void mp_assert_fail(const char *file,
    int line, const char *expr);
/* The buffered writer's formatted output (the rest is inline in buf.h):
 * a piece longer than the whole buffer is cut. */
void mp_buf_vprintf(mp_buf_t *b, const char *fmt, va_list ap);
void mp_buf_printf(mp_buf_t *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void mp_buf_puts(mp_buf_t *b, const char *s);

/* libm's exp, log1p, llround and round for the profiler's estimates (the
 * library links no libm; util.c says how accurate they are): exp within an
 * ulp, log1p within an ulp, the roundings exact (halves away from zero;
 * util_llround gives LLONG_MIN out of range, as glibc does on x86-64). */
double util_exp(double x);
double util_log1p(double x);
long long util_llround(double x);
double util_round(double x);

/* The set bits of w.  Not __builtin_popcountll: without -mpopcnt it calls
 * libgcc's __popcountdi2, which the linker puts after every object of the
 * library, so the page of .text every process would touch for it sits in
 * the last fault-around window, with whatever cold code shares it. */
static inline unsigned util_popcount64(uint64_t w) {
	w -= (w >> 1) & 0x5555555555555555ull;
	w = (w & 0x3333333333333333ull) + ((w >> 2) & 0x3333333333333333ull);
	w = (w + (w >> 4)) & 0x0f0f0f0f0f0f0f0full;
	return (unsigned)((w * 0x0101010101010101ull) >> 56);
}

#define mp_assert(e) do {						\
	if (config_debug && unlikely(!(e)))				\
		mp_assert_fail(__FILE__, __LINE__, #e);			\
} while (0)
#define mp_not_reached() mp_assert_fail(__FILE__, __LINE__, "not reached")

/* -------------------------------------------------------------------- os.c */
/* The OS layer.  Mappings are page aligned; all return NULL/true on error. */
void *os_map(size_t size, size_t align);
/* How many heap mappings the OS refused with ENOMEM so far. */
uint64_t os_map_refusals(void);
void os_unmap(void *addr, size_t size);
/* A sparse, zeroed table that takes memory only where written (no
 * fault injection); NULL when refused. */
void *os_map_sparse(size_t size);
#if MP_CONFIG_DEBUG
/* Fault injection (debug builds only; doc/reliability.md): with n != 0,
 * n - 1 more OS mappings succeed, then the nth and every later one fails
 * with ENOMEM until n is set again (0: off).  Set by the conf option
 * debug_mmap_fail and the mallctl debug.mmap_fail, which reads what is
 * left (1: failing now). */
extern size_t opt_debug_mmap_fail;
void os_mmap_fail_conf_apply(void);
void os_mmap_fail_set(size_t n);
size_t os_mmap_fail_get(void);
/* Mappings failed by the switch since start-up. */
uint64_t os_mmap_fail_count(void);
#endif
bool os_purge_forced(void *addr, size_t size);  /* MADV_DONTNEED: zero */
bool os_file_pages_drop(const void *addr, size_t size);  /* read-only file */
/* opt.trust_madvise, and whether MADV_DONTNEED zeroes pages here (checked
 * once, at the first call, unless trusted); the number of checks run. */
extern bool opt_trust_madvise;
bool os_purge_zeroes(void);
uint64_t os_purge_zeroes_checks(void);
bool os_purge_lazy(void *addr, size_t size);    /* MADV_FREE */
/* For the default extent hooks: a mapping at exactly addr (NULL if the
 * kernel will not place it there), commit (read-write again) and
 * decommit (no access, no memory) of [addr, addr + size). */
void *os_map_at(void *addr, size_t size);
bool os_commit(void *addr, size_t size);
bool os_decommit(void *addr, size_t size);
/* dss: `size` bytes aligned to `align` from the program break (sbrk),
 * zeroed; NULL when the break cannot grow.  Such pages are never
 * unmapped: os_in_dss tells them apart. */
void *os_dss_alloc(size_t size, size_t align);
bool os_in_dss(const void *addr);
/* mremap(MREMAP_DONTUNMAP): pages move, `from` reads as zero after. */
bool os_move_pages(void *from, void *to, size_t size);
/* Transparent huge pages.  The modes, in opt.thp's order (its names are
 * "default", "always", "never"; "not supported" reads where the kernel has
 * no THP). */
typedef enum {
	OS_THP_DEFAULT = 0,      /* kernel: madvise; option: leave alone */
	OS_THP_ALWAYS,
	OS_THP_NEVER,
	OS_THP_UNSUPPORTED,
} os_thp_t;
#define LG_HUGEPAGE 21
#define HUGEPAGE ((size_t)1 << LG_HUGEPAGE)
#define HUGEPAGE_CEILING(s) (((s) + HUGEPAGE - 1) & ~(HUGEPAGE - 1))
os_thp_t os_thp_system(void);                   /* the kernel's mode */
/* MADV_HUGEPAGE (huge) or MADV_NOHUGEPAGE. */
bool os_pages_huge(void *addr, size_t size, bool huge);
/* Advise [addr, addr + size) as opt.thp `want` asks, given the kernel's
 * mode (jemalloc's pages_set_thp_state). */
void os_thp_apply(void *addr, size_t size, os_thp_t want);
unsigned os_ncpus(void);
uint64_t os_now_ns(void);                        /* monotonic */
uint64_t os_now_coarse_ns(void);                 /* at tick resolution */

/* ----------------------------------------------------------------- mutex.c */
void mp_mutex_init(mp_mutex_t *m, lock_rank_t rank);
/* The same lock without glibc's mutex: one atomic each way when
 * uncontended, a futex wait when not (ThreadSanitizer builds: glibc's).
 * Taken and given back only by mp_mutex_lite_lock / _unlock (and the
 * _quiet, trylock and counter functions, which take either kind). */
void mp_mutex_init_lite(mp_mutex_t *m, lock_rank_t rank);
void mp_mutex_lite_lock(mp_mutex_t *m);
void mp_mutex_lite_unlock(mp_mutex_t *m);
void mp_mutex_lock(mp_mutex_t *m);
bool mp_mutex_trylock(mp_mutex_t *m);     /* true if taken */
void mp_mutex_unlock(mp_mutex_t *m);
void mp_mutex_postfork_child(mp_mutex_t *m);     /* reinitialise, unlocked */
/* Lite locks' spin before they block: none when ncpus (the CPUs the
 * process may run on, at boot) is 1. */
void mp_mutex_boot(unsigned ncpus);
unsigned mp_mutex_lite_spins(void);
/* Without rank tracking or counters: fork handlers and lock-all loops,
 * which take every lock of one rank. */
void mp_mutex_lock_quiet(mp_mutex_t *m);
void mp_mutex_unlock_quiet(mp_mutex_t *m);
/* A copy of m's profiling counters, read under m; zero them (under m). */
void mp_mutex_prof_read(mp_mutex_t *m, mp_mutex_prof_t *out);
void mp_mutex_prof_copy_held(const mp_mutex_t *m, mp_mutex_prof_t *out);
void mp_mutex_prof_reset(mp_mutex_t *m);

#endif /* MP_INTERNAL_SYS_H */
