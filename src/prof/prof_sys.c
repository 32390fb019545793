/*
 * prof_sys.c: backtraces for the heap profiler, by walking frame
 * pointers and, from the first function that keeps none or where they
 * stop (prof_unwind:auto) or from the program's first frame
 * (prof_unwind:cfi), by call-frame information (prof_cfi.c).
 * Every frame is checked against the calling thread's stack bounds
 * before it is read, so a caller built without frame pointers gives a
 * short stack (fp) or one read from .eh_frame, never a fault; nothing
 * here locks or allocates (prof_cfi.c asks the loader for objects
 * without its lock), so it is safe inside malloc.
 *
 * The walk starts at the frame of the exported function the program
 * called (or of the slow path that function tail-called), so its first
 * return address is the program's own: the allocator's frames never
 * appear, whether the library is preloaded, linked or linked statically.
 *
 * It also stops at a return address outside every executable mapping
 * (text_contains): a thread started by code built without frame pointers
 * (libtsan's thread start, or any such library) leaves its own rbp, a
 * stale stack address, in the thread function's saved frame pointer, and
 * the "frame" there holds whatever that code last stored, different from
 * one sample to the next.  Without the check, each such value ended the
 * stacks of every sample in the thread, splitting one call site into
 * many stacks.
 *
 * Leading return addresses inside the library's own text are skipped:
 * where the exported function cannot tail-call its slow path (builds
 * without sibling calls: -O0, -O1, ThreadSanitizer's instrumentation),
 * the walk starts one frame too deep, in the slow path's frame.  Only a
 * shared library knows its own text apart from the program's; linked
 * statically, nothing is skipped.
 */
#include "malloc_prof/internal/internal.h"

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <sys/auxv.h>
#include <sched.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

/* The top of the main thread's stack as glibc's startup code saw it: the
 * frames of main and everything it calls lie below. */
extern void *__libc_stack_end;

/*
 * Stack bounds of the calling thread: from the page it is on up to the
 * top of its stack, which every frame lies below.  Candidates for the
 * top: the thread's descriptor (pthread_self), which glibc puts at the
 * top of each thread's stack block, above the frames and in the same
 * mapping, whether glibc allocated the stack or the program gave it
 * (pthread_attr_setstack); then __libc_stack_end, where glibc's startup
 * code found the main thread's stack.  The main thread's descriptor lies
 * in static TLS, below its stack, so it fails the first test at no cost,
 * and a thread's passes it first: no system call tells the main thread
 * apart (getpid and gettid were two a thread, 6,000 threads in bench's
 * threadchurn).  A candidate is taken only if every page from here up to
 * it is mapped (mincore): a process forked by another thread runs its
 * main thread on that thread's stack, and a thread started without glibc
 * may have its descriptor anywhere.  Else the walk trusts only the page
 * it is on.
 *
 * Not pthread_getattr_np: glibc's takes the thread's lock and then
 * allocates (its cpuset).  When that allocation is the thread's first
 * sample, a call from here would wait on that lock forever (Rust's
 * standard library calls it at every thread's start); and for the main
 * thread it reads /proc/self/maps with stdio (~140 KiB of resident
 * memory in a process that never touched it).
 */
#define PROF_STACK_MAX ((uintptr_t)1 << 30)
#define MINCORE_CHUNK 256               /* pages per mincore call */

static bool pages_mapped(uintptr_t lo, uintptr_t hi) {
	unsigned char vec[MINCORE_CHUNK];
	int saved = errno;
	bool ok = true;
	for (uintptr_t a = lo; ok && a < hi; a += MINCORE_CHUNK * PAGE) {
		size_t len = hi - a < MINCORE_CHUNK * PAGE ? hi - a :
		    MINCORE_CHUNK * PAGE;
		ok = mincore((void *)a, len, vec) == 0;
	}
	errno = saved;
	return ok;
}

void prof_sys_thread_init(tsd_t *tsd) {
	uintptr_t here = (uintptr_t)__builtin_frame_address(0);
	uintptr_t lo = here & ~(uintptr_t)PAGE_MASK;
	const uintptr_t top[2] = {
		(uintptr_t)pthread_self(), (uintptr_t)__libc_stack_end
	};
	for (unsigned i = 0; i < 2; i++) {
		if (top[i] > here && top[i] - here <= PROF_STACK_MAX &&
		    pages_mapped(lo, PAGE_CEILING(top[i]))) {
			tsd->stack_lo = lo;
			tsd->stack_hi = top[i];
			return;
		}
	}
	/* Unknown: trust only the page we are on. */
	tsd->stack_lo = here;
	tsd->stack_hi = (here | PAGE_MASK) + 1;
}

/*
 * The executable mappings of the process, from /proc/self/maps (read with
 * open/read: no stdio, no allocation, no dynamic loader), sorted by
 * address, in two tables: a reload fills the one readers are not using
 * and then publishes it by bumping text_gen (its low bit picks the
 * table).  Table g & 1 is rewritten only by the reload of generation
 * g + 2, which sets text_started to g + 2 before its first (release)
 * store: a reader of generation g that read any of those stores (acquire)
 * sees text_started > g + 1 afterwards and throws its result away.  All
 * entries are atomics, so a lookup racing a reload is no data race.
 *
 * A miss reloads the tables (dlopen may have added text), at most every
 * TEXT_RELOAD_NS; return addresses below TEXT_MIN_ADDR never do (nothing
 * can be mapped there: Linux's default vm.mmap_min_addr), which is what
 * libtsan's garbage frames look like.  When the tables cannot be read,
 * or hold no more mappings, every address is taken as text: the walk
 * then behaves as it did without the check.
 */
#define TEXT_MAX 1024
#define TEXT_MIN_ADDR ((uintptr_t)65536)
#define TEXT_RELOAD_NS ((uint64_t)100 * 1000 * 1000)

typedef struct {
	_Atomic uintptr_t lo[TEXT_MAX], hi[TEXT_MAX];
	_Atomic unsigned n;
	_Atomic bool complete;   /* false: unreadable or overflowed */
} text_table_t;

static text_table_t text_tables[2];
static _Atomic uint64_t text_gen;        /* 0: never loaded */
static _Atomic uint64_t text_started;    /* generation being written */
static _Atomic uint64_t text_loaded_ns;  /* monotonic time of the load */
static _Atomic bool text_busy;           /* a reload is running */
/* The executable segment holding this code, when this is a shared object
 * and not the main program (else 0, 0); set by text_self_init. */
static MP_READ_MOSTLY _Atomic uintptr_t text_self_lo, text_self_hi;
static MP_READ_MOSTLY _Atomic bool text_self_known;
static char text_buf[4096];              /* text_busy */

enum { TEXT_NO, TEXT_YES, TEXT_UNKNOWN, TEXT_UNLOADED };

/* Table loads are acquire loads, so none moves past the second read of
 * text_gen (a fence would do, but ThreadSanitizer does not model
 * fences). */
#define TEXT_LOAD(x) atomic_load_explicit(&(x), memory_order_acquire)

static int text_lookup(uintptr_t a) {
	uint64_t g = TEXT_LOAD(text_gen);
	if (g == 0)
		return TEXT_UNLOADED;
	text_table_t *t = &text_tables[g & 1];
	int r = TEXT_UNKNOWN;
	if (TEXT_LOAD(t->complete)) {
		unsigned n = TEXT_LOAD(t->n);
		unsigned lo = 0, hi = n < TEXT_MAX ? n : TEXT_MAX;
		while (lo < hi) {       /* the first mapping ending above a */
			unsigned mid = lo + (hi - lo) / 2;
			if (TEXT_LOAD(t->hi[mid]) <= a)
				lo = mid + 1;
			else
				hi = mid;
		}
		r = lo < n && lo < TEXT_MAX && TEXT_LOAD(t->lo[lo]) <= a ?
		    TEXT_YES : TEXT_NO;
	}
	if (TEXT_LOAD(text_started) > g + 1)
		return TEXT_UNKNOWN;
	return r;
}

static uint64_t now_ns(void) {
	struct timespec ts;
	if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0)
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The ELF header of the object this code is linked into (GNU ld, gold
 * and lld define it); the main program's program headers come from the
 * auxiliary vector. */
extern const ElfW(Ehdr) __ehdr_start __attribute__((visibility("hidden")));

static bool in_main_program(void) {
	return getauxval(AT_PHDR) == (uintptr_t)&__ehdr_start +
	    __ehdr_start.e_phoff;
}

/* Parses /proc/self/maps into the table readers are not using and
 * publishes it; text_busy held.  A line is "lo-hi perms ...". */
static void text_reload_locked(void) {
	uint64_t g = atomic_load_explicit(&text_gen, memory_order_relaxed);
	text_table_t *t = &text_tables[(g + 1) & 1];
	atomic_store_explicit(&text_started, g + 1, memory_order_relaxed);
	bool ok = true;
	unsigned n = 0;
	int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		ok = false;
	} else {
		/* Field 0: lo, 1: hi, 2: perms, 3: the rest of the line. */
		unsigned field = 0, col = 0;
		uintptr_t lo = 0, hi = 0, prev_hi = 0;
		bool x = false;
		for (;;) {
			ssize_t got = read(fd, text_buf, sizeof(text_buf));
			if (got < 0 && errno == EINTR)
				continue;
			if (got < 0)
				ok = false;
			if (got <= 0)
				break;
			for (ssize_t i = 0; i < got; i++) {
				char c = text_buf[i];
				if (c == '\n') {
					if (field >= 2 && x) {
						if (n == TEXT_MAX ||
						    lo < prev_hi || hi <= lo) {
							ok = false;
						} else {
							atomic_store_explicit(
							    &t->lo[n], lo,
							    memory_order_release);
							atomic_store_explicit(
							    &t->hi[n], hi,
							    memory_order_release);
							n++;
							prev_hi = hi;
						}
					}
					field = col = 0;
					lo = hi = 0;
					x = false;
					continue;
				}
				if (field <= 1) {
					unsigned d = c >= '0' && c <= '9' ?
					    (unsigned)(c - '0') : c >= 'a' &&
					    c <= 'f' ? (unsigned)(c - 'a' + 10)
					    : 16;
					if (d < 16) {
						if (field == 0)
							lo = lo << 4 | d;
						else
							hi = hi << 4 | d;
					} else {
						field++;   /* '-' or ' ' */
						col = 0;
					}
				} else if (field == 2) {
					if (c == ' ')
						field++;
					else if (col++ == 2)
						x = c == 'x';
				}
			}
		}
		close(fd);
	}
	atomic_store_explicit(&t->n, n, memory_order_release);
	atomic_store_explicit(&t->complete, ok && n > 0,
	    memory_order_release);
	atomic_store_explicit(&text_gen, g + 1, memory_order_release);
}

/*
 * The allocator's own executable segment, from its program headers: known
 * without /proc/self/maps, so that a walk that races the first table load
 * (another thread's, slow on a loaded machine) still skips the allocator's
 * frames instead of recording one (test/integration/prof_threads under
 * TSan saw mp_malloc's frame in 1 sample of 20).  Every thread computes
 * the same values, so racing ones agree.  Left empty when the allocator
 * is linked into the program: its frames share the program's segment.
 */
static void text_self_init(void) {
	if (!in_main_program()) {
		/* __ehdr_start is declared as one Ehdr, but it starts the
		 * first mapped page, which holds the program headers too:
		 * hide the declared size from the compiler (UBSan's
		 * object-size check read the headers as out of bounds). */
		const char *image = (const char *)&__ehdr_start;
		__asm__("" : "+r"(image));
		const ElfW(Ehdr) *eh = (const ElfW(Ehdr) *)(const void *)image;
		const ElfW(Phdr) *ph = (const ElfW(Phdr) *)(const void *)
		    (image + eh->e_phoff);
		unsigned phnum = eh->e_phnum;
		uintptr_t base = (uintptr_t)image, bias = 0;
		bool have_bias = false;
		for (unsigned i = 0; i < phnum; i++) {
			if (ph[i].p_type == PT_LOAD && ph[i].p_offset == 0) {
				bias = base - (uintptr_t)ph[i].p_vaddr;
				have_bias = true;
				break;
			}
		}
		uintptr_t self = (uintptr_t)&prof_backtrace;
		for (unsigned i = 0; have_bias && i < phnum; i++) {
			uintptr_t lo = bias + (uintptr_t)ph[i].p_vaddr;
			uintptr_t hi = lo + (uintptr_t)ph[i].p_memsz;
			if (ph[i].p_type == PT_LOAD &&
			    (ph[i].p_flags & PF_X) != 0 && lo <= self &&
			    self < hi) {
				atomic_store_explicit(&text_self_lo, lo,
				    memory_order_relaxed);
				atomic_store_explicit(&text_self_hi, hi,
				    memory_order_release);
			}
		}
	}
	atomic_store_explicit(&text_self_known, true, memory_order_release);
}

/* Whether return address ret points into executable text (ret - 1: the
 * call instruction, which may end a mapping). */
static bool text_contains(uintptr_t ret) {
	if (ret < TEXT_MIN_ADDR)
		return false;
	int r = text_lookup(ret - 1);
	if (r == TEXT_YES || r == TEXT_UNKNOWN)
		return true;
	/* Not loaded yet, or text may have been mapped since the load (a
	 * library just dlopened: the loader knows it at once). */
	if (r == TEXT_NO && prof_cfi_in_text(ret - 1))
		return true;
	uint64_t now = now_ns();
	if (r == TEXT_NO && now - atomic_load_explicit(&text_loaded_ns,
	    memory_order_relaxed) < TEXT_RELOAD_NS)
		return false;
	if (atomic_exchange_explicit(&text_busy, true, memory_order_acquire))
		return r == TEXT_UNLOADED;
	int saved = errno;
	text_reload_locked();
	atomic_store_explicit(&text_loaded_ns, now, memory_order_relaxed);
	errno = saved;
	atomic_store_explicit(&text_busy, false, memory_order_release);
	return text_lookup(ret - 1) != TEXT_NO;
}

/*
 * The objects that sampled frames point into, kept after the loader
 * unloads them.  /proc/self/maps, which dumps copy, no longer lists a
 * library that was dlclosed, and the frames of the samples it made (its
 * memory still live) would point into nothing: jeprof, pprof and
 * malloc-prof printed them as bare addresses.  So each walk's frames are
 * looked up with _dl_find_object (no lock, no allocation, async-signal
 * safe: glibc 2.35+; without it nothing is kept), and an object not in
 * the table yet is added with its executable segments, read from the
 * program headers in its mapping, and its file name, copied (the loader
 * frees its own at dlclose).  An object is known by its mapping's start
 * and its link_map: a library loaded again, even at the same address,
 * is a new entry, and the newest entry of an address wins.
 *
 * The table only grows, to OBJS_MAX objects and OBJS_NAMES bytes of
 * names, in static arrays whose pages are touched only as they fill;
 * objects past that are not kept, and their frames print as before.
 * Entries are written once, under objs_lock, then published by
 * objs_tab.n (release); readers take no lock.  A dump asks which entries
 * are unloaded now and which of those its frames point into
 * (prof_sys_unloaded).
 */
#define OBJS_MAX 512
#define OBJS_SEGS 4
#define OBJS_NAMES ((size_t)64 << 10)

typedef struct {
	uintptr_t map_lo;              /* dlfo_map_start */
	const void *lm;                /* dlfo_link_map */
	unsigned nsegs;
	uintptr_t seg_lo[OBJS_SEGS], seg_hi[OBJS_SEGS], seg_off[OBJS_SEGS];
	const char *name;              /* NULL: the program, or no room */
} objs_ent_t;

/* The mappings of recorded objects the loader never unloads (the
 * program, libc, the loader, the vDSO, this library unprefixed:
 * prof_cfi_fixed): a frame inside one needs no lookup, which keeps the
 * common walk, through the program and libc, to a few compares a frame
 * (_dl_find_object on every frame was 0.65% of bench's midsize at
 * lg_prof_sample:19, by callgrind). */
#define OBJS_FIXED_MAX 8
/* Return addresses found inside a fixed mapping, direct-mapped by hash:
 * a stack seen before costs one compare a frame (the search of the
 * fixed mappings took 30 instructions a frame, 0.4% of midsize).  2 KiB:
 * 1,024 entries spread over three pages (12 KiB resident after a few
 * stacks, 0.4% of a 3 MB process), and only a new stack (gctx) looks
 * here. */
#define OBJS_SEEN_LG 8

/* Bytes of names kept in the table's first page (below). */
#define OBJS_NAMES_NEAR 512

/*
 * The table, in one page-aligned block that starts with what a process's
 * first samples write: the seen cache, the fixed mappings, the counts,
 * the first names and the first entries (the program, libc, the loader,
 * the vDSO, this library and a few more: 10 fit), so that they make one
 * page of .bss private whatever the rest of .bss looks like.  As
 * separate arrays they fell on two or three pages as soon as an
 * unrelated variable moved (test/integration/prof_data_pages).
 */
static _Alignas(4096) struct {
	_Atomic uintptr_t seen[(size_t)1 << OBJS_SEEN_LG];
	_Atomic uintptr_t fixed_lo[OBJS_FIXED_MAX];
	_Atomic uintptr_t fixed_hi[OBJS_FIXED_MAX];
	_Atomic unsigned fixed_n;
	_Atomic unsigned n;              /* entries published */
	/* Names: the first ones here, the rest in objs_names (objs_lock). */
	size_t near_len, names_len;
	char near[OBJS_NAMES_NEAR];
	objs_ent_t ent[OBJS_MAX];
} objs_tab;
static PROF_DATA atomic_flag objs_lock = ATOMIC_FLAG_INIT;
static char objs_names[OBJS_NAMES];      /* objs_lock */

#if MP_HAVE_DL_FIND_OBJECT
/* The entry of (map_lo, lm) among the first n, newest first; or NULL. */
static const objs_ent_t *objs_find(unsigned n, uintptr_t map_lo,
    const void *lm) {
	for (unsigned i = n; i-- > 0;) {
		const objs_ent_t *e = &objs_tab.ent[i];
		if (e->map_lo == map_lo && e->lm == lm)
			return e;
	}
	return NULL;
}

/* Fill e's segments from the program headers at the start of the
 * object's mapping [lo, hi) (its ELF header), page-aligned as the kernel
 * maps them. */
static void objs_segments(objs_ent_t *e, uintptr_t lo, uintptr_t hi) {
	const ElfW(Ehdr) *eh = (const ElfW(Ehdr) *)lo;
	e->nsegs = 0;
	if (hi - lo < sizeof(*eh) || memcmp(eh->e_ident, ELFMAG,
	    SELFMAG) != 0 || eh->e_phentsize != sizeof(ElfW(Phdr)) ||
	    eh->e_phoff > hi - lo || eh->e_phnum > (hi - lo - eh->e_phoff) /
	    sizeof(ElfW(Phdr)))
		return;
	const ElfW(Phdr) *ph = (const ElfW(Phdr) *)(lo + eh->e_phoff);
	uintptr_t bias = 0;
	bool have_bias = false;
	for (unsigned i = 0; i < eh->e_phnum && !have_bias; i++) {
		if (ph[i].p_type == PT_LOAD && ph[i].p_offset == 0) {
			bias = lo - ((uintptr_t)ph[i].p_vaddr &
			    ~(uintptr_t)PAGE_MASK);
			have_bias = true;
		}
	}
	for (unsigned i = 0; have_bias && i < eh->e_phnum &&
	    e->nsegs < OBJS_SEGS; i++) {
		if (ph[i].p_type != PT_LOAD || (ph[i].p_flags & PF_X) == 0)
			continue;
		uintptr_t a = bias + (uintptr_t)ph[i].p_vaddr;
		e->seg_lo[e->nsegs] = a & ~(uintptr_t)PAGE_MASK;
		e->seg_hi[e->nsegs] = PAGE_CEILING(a + (uintptr_t)ph[i].p_memsz);
		e->seg_off[e->nsegs] = (uintptr_t)ph[i].p_offset &
		    ~(uintptr_t)PAGE_MASK;
		e->nsegs++;
	}
}

/*
 * Copy lm's file name into dst (cap bytes, NUL included) and return its
 * length, or 0 if it is not an absolute path that fits: the program's
 * name is "", the vDSO's a bare name; neither is ever unloaded.  The
 * loader published lm (filled before _dl_find_object can return it)
 * with its own atomics, which ThreadSanitizer does not see in the
 * uninstrumented ld.so: this read is left out of its checks, and copies
 * byte by byte so that no intercepted strnlen/memcpy reports it either.
 */
__attribute__((no_sanitize_thread))
static size_t objs_copy_name(const struct link_map *lm, char *dst,
    size_t cap) {
	const volatile char *name = lm != NULL ? lm->l_name : NULL;
	if (name == NULL || name[0] != '/')
		return 0;
	size_t len = 0;
	while (len < PATH_MAX && len + 1 < cap && name[len] != '\0')
		len++;
	if (name[len] != '\0')
		return 0;
	for (size_t i = 0; i < len; i++)
		dst[i] = name[i];
	dst[len] = '\0';
	return len;
}

/* A copy of lm's name for the table (objs_lock held), in its first page
 * while there is room there; NULL if none. */
static const char *objs_name_copy(const struct link_map *lm) {
	size_t used = objs_tab.near_len;
	size_t len = objs_copy_name(lm, objs_tab.near + used,
	    OBJS_NAMES_NEAR - used);
	if (len > 0) {
		objs_tab.near_len = used + len + 1;
		return objs_tab.near + used;
	}
	used = objs_tab.names_len;
	len = objs_copy_name(lm, objs_names + used, OBJS_NAMES - used);
	if (len > 0) {
		objs_tab.names_len = used + len + 1;
		return objs_names + used;
	}
	return NULL;
}

/* Add the object d names, unless another thread just did.  Skipped
 * while another add runs (false then: the next sample of the stack adds
 * it): a walk in a signal handler must not wait for the add it
 * interrupted. */
static bool objs_add(const struct dl_find_object *d) {
	uintptr_t lo = (uintptr_t)d->dlfo_map_start;
	if (atomic_flag_test_and_set_explicit(&objs_lock,
	    memory_order_acquire))
		return false;
	unsigned n = atomic_load_explicit(&objs_tab.n, memory_order_relaxed);
	if (n < OBJS_MAX && objs_find(n, lo, d->dlfo_link_map) == NULL) {
		objs_ent_t *e = &objs_tab.ent[n];
		memset(e, 0, sizeof(*e));
		e->map_lo = lo;
		e->lm = d->dlfo_link_map;
		objs_segments(e, lo, (uintptr_t)d->dlfo_map_end);
		/* A name is read only once its object is unloaded, which a
		 * fixed one never is: a process that loads nothing at run
		 * time writes no names (nor their page). */
		bool fixed = prof_cfi_fixed(lo);
		if (!fixed)
			e->name = objs_name_copy(d->dlfo_link_map);
		atomic_store_explicit(&objs_tab.n, n + 1, memory_order_release);
		unsigned f = atomic_load_explicit(&objs_tab.fixed_n,
		    memory_order_relaxed);
		if (f < OBJS_FIXED_MAX && fixed) {
			atomic_store_explicit(&objs_tab.fixed_lo[f], lo,
			    memory_order_relaxed);
			atomic_store_explicit(&objs_tab.fixed_hi[f],
			    (uintptr_t)d->dlfo_map_end, memory_order_relaxed);
			atomic_store_explicit(&objs_tab.fixed_n, f + 1,
			    memory_order_release);
		}
	}
	atomic_flag_clear_explicit(&objs_lock, memory_order_release);
	return true;
}

/* The objects of a new stack's frames into the table: false if one
 * could not be added now. */
static bool objs_note(void *const *vec, unsigned nframes) {
	bool done = true;
	uintptr_t last_lo = 0;
	const void *last_lm = NULL;
	unsigned nf = atomic_load_explicit(&objs_tab.fixed_n,
	    memory_order_acquire);
	/* The fixed mapping of the previous frame: most frames are in the
	 * same object as the one before. */
	uintptr_t flo = 0, fhi = 0;
	for (unsigned i = 0; i < nframes; i++) {
		uintptr_t a = (uintptr_t)vec[i] - 1;
		size_t h = (size_t)((a * UINT64_C(0x9e3779b97f4a7c15)) >>
		    (64 - OBJS_SEEN_LG));
		if (atomic_load_explicit(&objs_tab.seen[h],
		    memory_order_relaxed) == a)
			continue;
		bool fixed = a - flo < fhi - flo;
		for (unsigned k = 0; k < nf && !fixed; k++) {
			flo = atomic_load_explicit(&objs_tab.fixed_lo[k],
			    memory_order_relaxed);
			fhi = atomic_load_explicit(&objs_tab.fixed_hi[k],
			    memory_order_relaxed);
			fixed = a - flo < fhi - flo;
		}
		if (fixed) {
			atomic_store_explicit(&objs_tab.seen[h], a,
			    memory_order_relaxed);
			continue;
		}
		struct dl_find_object d;
		if (_dl_find_object((void *)a, &d) != 0)
			continue;
		uintptr_t lo = (uintptr_t)d.dlfo_map_start;
		if (lo == last_lo && d.dlfo_link_map == last_lm)
			continue;
		last_lo = lo;
		last_lm = d.dlfo_link_map;
		unsigned n = atomic_load_explicit(&objs_tab.n,
		    memory_order_acquire);
		if (objs_find(n, lo, d.dlfo_link_map) == NULL && n < OBJS_MAX &&
		    !objs_add(&d))
			done = false;
	}
	return done;
}

/* Whether e's object is no longer what the loader has at its address. */
static bool objs_unloaded(const objs_ent_t *e) {
	struct dl_find_object d;
	return _dl_find_object((void *)e->map_lo, &d) != 0 ||
	    (uintptr_t)d.dlfo_map_start != e->map_lo ||
	    d.dlfo_link_map != e->lm;
}
#else
static bool objs_note(void *const *vec, unsigned nframes) {
	(void)vec;
	(void)nframes;
	return true;
}

static bool objs_unloaded(const objs_ent_t *e) {
	(void)e;
	return false;
}
#endif

/* Whether a frame of s points into [lo, hi). */
static bool snap_points_into(const dump_snap_t *s, uintptr_t lo,
    uintptr_t hi) {
	const char *p = s->gbuf;
	for (size_t i = 0; i < s->ngctx; i++) {
		const dump_gctx_t *g = (const dump_gctx_t *)p;
		p += sizeof(*g);
		void *const *frames = (void *const *)p;
		for (uint32_t f = 0; f < g->nframes; f++) {
			uintptr_t a = (uintptr_t)frames[f];
			if (a - 1 - lo < hi - lo)
				return true;
		}
		p += dump_frames_size(g->nframes) + g->ntctx *
		    sizeof(dump_tctx_t);
	}
	return false;
}

size_t prof_sys_unloaded(const dump_snap_t *s, prof_sys_unloaded_t *out,
    size_t max) {
	unsigned n = atomic_load_explicit(&objs_tab.n, memory_order_acquire);
	size_t k = 0;
	for (unsigned i = 0; i < n && k < max; i++) {
		const objs_ent_t *e = &objs_tab.ent[i];
		if (e->name == NULL || !objs_unloaded(e))
			continue;
		/* A newer entry at the same address speaks for it. */
		bool newer = false;
		for (unsigned j = i + 1; j < n && !newer; j++)
			newer = objs_tab.ent[j].map_lo == e->map_lo;
		for (unsigned g = 0; !newer && g < e->nsegs && k < max; g++) {
			if (!snap_points_into(s, e->seg_lo[g], e->seg_hi[g]))
				continue;
			out[k++] = (prof_sys_unloaded_t){e->seg_lo[g],
			    e->seg_hi[g], e->seg_off[g], e->name};
		}
	}
	return k;
}

/* fork while a reload runs: wait for it (it holds no lock), so that the
 * child neither inherits the descriptor nor a reload never finished;
 * the same for an object being added. */
void prof_sys_prefork(void) {
	while (atomic_exchange_explicit(&text_busy, true,
	    memory_order_acquire))
		sched_yield();
	while (atomic_flag_test_and_set_explicit(&objs_lock,
	    memory_order_acquire))
		sched_yield();
	prof_cfi_prefork();
}

void prof_sys_postfork_parent(void) {
	prof_cfi_postfork_parent();
	atomic_flag_clear_explicit(&objs_lock, memory_order_release);
	atomic_store_explicit(&text_busy, false, memory_order_release);
}

void prof_sys_postfork_child(void) {
	prof_cfi_postfork_child();
	atomic_flag_clear_explicit(&objs_lock, memory_order_release);
	atomic_store_explicit(&text_busy, false, memory_order_release);
}

const char *const prof_unwind_names[PROF_UNWIND_COUNT] = {
	"fp", "cfi", "auto"
};
MP_READ_MOSTLY unsigned opt_prof_unwind = PROF_UNWIND_AUTO;

/* Whether prof_cfi.c's rules apply here (x86-64 only). */
#if defined(__x86_64__)
#define CFI_ARCH true
#else
#define CFI_ARCH false
#endif

/*
 * The memo of a thread's last walks (prof_bt_memo_new).  A walk is a
 * function of where it starts (fp, the walker's own frame, the stack's
 * top, max and the mode), of the stack words it reads, and of the rows
 * and text table it consults.  A row found, or an address found in the
 * text table, stays so while its code is on the stack; so a walk whose
 * every row was found and every text lookup succeeded is remembered with
 * the words it read (address, value), and a later walk from the same
 * start whose words all still hold those values would read the same
 * addresses and take the same steps: it copies the frames.  A walk that
 * consulted a missing row or address (tables that can change: a library
 * loaded since) is not remembered.  Four slots: a thread's allocation
 * walks (from malloc's sampled shortcuts, from alloc_impl) and its free
 * walks (the recent records' free side, from free_slow for large blocks
 * and dalloc_impl for small ones) start from different frames; with
 * three, replaced in turn, bench's midsize with recent records looked up
 * 5,425 rows over 8,773 walks (30 with four).
 * Only the owning thread uses its memo; `busy` keeps a walk in a signal
 * handler off a memo being written.
 */
#define MEMO_FRAMES 24
#define MEMO_WORDS (2 * MEMO_FRAMES + 2)
#define MEMO_SLOTS 4
typedef struct {
	uintptr_t fp, lo, hi;
	unsigned max, mode, n, nwords;
	bool valid;
	/* The words read: at lo + woff[i], the value wval[i].  Offsets
	 * from lo (every word read lies in [lo, hi)) keep the memo within
	 * base_malloc's recycled classes (below). */
	uint32_t woff[MEMO_WORDS];
	uintptr_t wval[MEMO_WORDS];
	void *vec[MEMO_FRAMES];
	/* The sampler's hint for this walk (prof_bt_hint_t), and how many
	 * times the slot was recorded (a hint is stored only for the
	 * recording it was found for). */
	prof_bt_hint_t hint;
	uint32_t version;
} memo_slot_t;

struct prof_bt_memo_s {
	bool busy;
	unsigned next;                   /* the slot to replace */
	uint64_t hits;                   /* walks answered (for the tests) */
	memo_slot_t slot[MEMO_SLOTS];
};

/* At most BASE_SMALL_MAX bytes, a memo comes from base_malloc's free
 * lists and goes back to them when its thread exits; over it, each was a
 * mapping of its own, mapped at a thread's first sample and unmapped at
 * its exit (bench's threadchurn: an mmap, a munmap and two page faults a
 * thread, 6,000 threads). */
_Static_assert(sizeof(prof_bt_memo_t) <= BASE_SMALL_MAX,
    "the walk memo in one of base_malloc's recycled classes");

prof_bt_memo_t *prof_bt_memo_new(void) {
	return base_malloc(sizeof(prof_bt_memo_t));
}

uint64_t prof_bt_memo_hits(const prof_bt_memo_t *m) {
	return m != NULL ? m->hits : 0;
}

void prof_bt_memo_free(prof_bt_memo_t *m) {
	if (m != NULL)
		base_free(m, sizeof(*m));
}

/* A walk being recorded into a slot (NULL: not recorded). */
typedef struct {
	memo_slot_t *s;
	bool ok;                         /* still worth remembering */
	/* The stack word (address, value) that rbp was last read from,
	 * not recorded yet: see memo_rbp_defer. */
	bool rbp_pending;
	uintptr_t rbp_addr, rbp_val;
} memo_rec_t;

static inline void memo_word(memo_rec_t *r, uintptr_t addr, uintptr_t val) {
	if (r->s == NULL)
		return;
	if (r->s->nwords == MEMO_WORDS) {
		r->ok = false;
		return;
	}
	uintptr_t off = addr - r->s->lo;
	if (off >= UINT32_MAX) {        /* below lo, or 4 GiB above it */
		r->ok = false;
		return;
	}
	r->s->woff[r->s->nwords] = (uint32_t)off;
	r->s->wval[r->s->nwords++] = val;
}

/*
 * rbp as the walk leaves the frame-pointer chain for call-frame
 * information: the saved rbp of the last frame walked, which a caller
 * built without frame pointers may use for data, different at every
 * call (a loop counter, a pointer).  It is recorded only once a step
 * computes a CFA from it (memo_rbp_used), and forgotten once a step sets
 * rbp from elsewhere: recorded at once, it made every walk through such a
 * caller miss the memo (bench's mpbench-nofp: 4,519 of 4,519 walks on
 * midsize, about 1,000 instructions a sample of CFI steps).
 */
static inline void memo_rbp_defer(memo_rec_t *r, uintptr_t addr,
    uintptr_t val) {
	r->rbp_pending = true;
	r->rbp_addr = addr;
	r->rbp_val = val;
}

static inline void memo_rbp_used(memo_rec_t *r) {
	if (r->rbp_pending) {
		r->rbp_pending = false;
		memo_word(r, r->rbp_addr, r->rbp_val);
	}
}

/* The frames of a remembered walk from this start whose words all still
 * hold (their addresses lie inside [lo, hi): they did when recorded
 * with the same bounds); 0 if none.  *slotp: the slot that answered. */
PROF_STACK_READER static unsigned memo_lookup(prof_bt_memo_t *m,
    void **vec, uintptr_t fp, uintptr_t lo, uintptr_t hi, unsigned max,
    unsigned mode, unsigned *slotp) {
	for (unsigned k = 0; k < MEMO_SLOTS; k++) {
		const memo_slot_t *s = &m->slot[k];
		if (!s->valid || s->fp != fp || s->lo != lo || s->hi != hi ||
		    s->max != max || s->mode != mode)
			continue;
		unsigned i = 0;
		while (i < s->nwords &&
		    *(const uintptr_t *)(lo + s->woff[i]) == s->wval[i])
			i++;
		if (i < s->nwords)
			continue;       /* the other slot may be this walk */
		memcpy(vec, s->vec, s->n * sizeof(void *));
		*slotp = k;
		return s->n;
	}
	return 0;
}

/*
 * The rest of the stack by call-frame information, from the registers
 * of the caller of the last frame walked: g.rip its return address,
 * g.rsp the address above that frame, g.rbp what the frame saved; row
 * the result of the lookup of g.rip's row into *rule, if the caller made
 * it (have_row).  Elsewhere than on x86-64 the walk ends here.
 */

static unsigned cfi_walk(void **vec, unsigned n, unsigned max,
    prof_cfi_walk_t *w, prof_cfi_regs_t g, prof_cfi_rule_t *rule,
    bool have_row, prof_cfi_err_t row, uintptr_t lo, uintptr_t hi,
    memo_rec_t *rec) {
#if defined(__x86_64__)
	if (!have_row)
		row = prof_cfi_row(w, g.rip, rule);
	if (row != PROF_CFI_OK)
		rec->ok = false;
	while (n < max && row == PROF_CFI_OK) {
		if (rule->cfa == PROF_CFI_CFA_RBP)
			memo_rbp_used(rec);
		if (prof_cfi_apply(rule, &g, lo, hi) != PROF_CFI_OK) {
			/* Only an undefined return address ends the walk
			 * whatever the words (the outermost frame's rule). */
			if (rule->ra_how != PROF_CFI_UNDEF)
				rec->ok = false;
			break;
		}
		/* The words the step read: the return address below the
		 * CFA (g.rsp now), and the saved rbp if it was read. */
		memo_word(rec, g.rsp + (uintptr_t)rule->ra_off, g.rip);
		if (rule->rbp_how == PROF_CFI_AT_CFA)
			memo_word(rec, g.rsp + (uintptr_t)rule->rbp_off,
			    g.rbp);
		if (rule->rbp_how != PROF_CFI_SAME)
			rec->rbp_pending = false;       /* rbp set anew */
		/* The caller's row (the next step's): having one says g.rip
		 * is code; without one, the text table decides whether it
		 * is a last frame or garbage. */
		row = prof_cfi_row(w, g.rip, rule);
		if (row != PROF_CFI_OK) {
			rec->ok = false;
			if (!text_contains(g.rip))
				break;
		}
		vec[n++] = (void *)g.rip;
	}
#else
	(void)vec;
	(void)max;
	(void)w;
	(void)g;
	(void)rule;
	(void)have_row;
	(void)row;
	(void)lo;
	(void)hi;
	rec->ok = false;
#endif
	return n;
}

unsigned prof_backtrace_self_frames(void *const *vec, unsigned n) {
	if (!atomic_load_explicit(&text_self_known, memory_order_acquire))
		text_self_init();
	uintptr_t hi = atomic_load_explicit(&text_self_hi,
	    memory_order_acquire);
	uintptr_t lo = atomic_load_explicit(&text_self_lo,
	    memory_order_relaxed);
	unsigned k = 0;
	while (k + 1 < n && (uintptr_t)vec[k] - 1 - lo < hi - lo)
		k++;
	return k;
}

void prof_bt_hint_store(prof_bt_memo_t *m, prof_bt_ref_t ref,
    const prof_bt_hint_t *hint) {
	if (m == NULL || ref.slot >= MEMO_SLOTS || m->busy)
		return;
	m->busy = true;
	atomic_signal_fence(memory_order_seq_cst);
	memo_slot_t *s = &m->slot[ref.slot];
	if (s->version == ref.version)
		s->hint = *hint;
	atomic_signal_fence(memory_order_seq_cst);
	m->busy = false;
}

PROF_STACK_READER unsigned prof_backtrace(void **vec, unsigned max,
    uintptr_t fp) {
	prof_bt_hint_t hint;
	prof_bt_ref_t ref;
	return prof_backtrace_hinted(vec, max, fp, &hint, &ref);
}

PROF_STACK_READER unsigned prof_backtrace_hinted(void **vec, unsigned max,
    uintptr_t fp, prof_bt_hint_t *hint, prof_bt_ref_t *ref) {
	tsd_t *tsd = &mp_tsd;
	memset(hint, 0, sizeof(*hint));
	ref->slot = UINT32_MAX;
	ref->version = 0;
	uintptr_t lo = (uintptr_t)__builtin_frame_address(0);
	uintptr_t hi = tsd->stack_hi;
	unsigned n = 0, skipped = 0;
	/* No bounds (prof_sys_thread_init not run on this thread): no
	 * stack read could be checked, so none is made. */
	if (hi == 0)
		return 0;
	/* The text table is loaded by its first lookup (text_contains): a
	 * walk whose every frame has a row needs none. */
	if (!atomic_load_explicit(&text_self_known, memory_order_acquire))
		text_self_init();
	uintptr_t self_hi = atomic_load_explicit(&text_self_hi,
	    memory_order_acquire);
	uintptr_t self_lo = atomic_load_explicit(&text_self_lo,
	    memory_order_relaxed);
	unsigned mode = opt_prof_unwind;
	/* The thread's memo: a walk from here seen before, or a slot to
	 * record this one into. */
	prof_bt_memo_t *m = tsd->prof_tdata != NULL ?
	    tsd->prof_tdata->bt_memo : NULL;
	memo_rec_t rec = {.s = NULL, .ok = true};
	if (m != NULL && !m->busy) {
		m->busy = true;
		atomic_signal_fence(memory_order_seq_cst);
		unsigned k = 0;
		n = memo_lookup(m, vec, fp, lo, hi, max, mode, &k);
		if (n > 0) {
			m->hits++;
			*hint = m->slot[k].hint;
			*ref = (prof_bt_ref_t){k, m->slot[k].version};
			atomic_signal_fence(memory_order_seq_cst);
			m->busy = false;
			return n;
		}
		*ref = (prof_bt_ref_t){m->next, ++m->slot[m->next].version};
		rec.s = &m->slot[m->next];
		m->next = (m->next + 1) % MEMO_SLOTS;
		memset(&rec.s->hint, 0, sizeof(rec.s->hint));
		/* The header only: a walk that misses every time (stacks
		 * that never repeat) pays for the words it records, not for
		 * clearing the slot. */
		rec.s->valid = false;
		rec.s->fp = fp;
		rec.s->lo = lo;
		rec.s->hi = hi;
		rec.s->max = max;
		rec.s->mode = mode;
		rec.s->nwords = 0;
		rec.s->n = 0;
	}
	prof_cfi_walk_t w = {false};
	uintptr_t stack_lo = lo;
	/* The registers of the caller of the last frame recorded, and the
	 * row of its return address if looked up (auto). */
	prof_cfi_regs_t g = {0, 0, 0};
	prof_cfi_rule_t rule;
	prof_cfi_err_t row = PROF_CFI_NOT_FOUND;
	bool have_row = false;
	while (n < max) {
		if (fp < lo || fp > hi - 2 * sizeof(uintptr_t) ||
		    (fp & (sizeof(uintptr_t) - 1)) != 0)
			break;
		uintptr_t next = ((const uintptr_t *)fp)[0];
		uintptr_t ret = ((const uintptr_t *)fp)[1];
		memo_word(&rec, fp + sizeof(uintptr_t), ret);
		if (ret == 0)
			break;
		/* Up to 8 of the allocator's own frames are skipped here,
		 * with no row looked up: a free's walk (the recent
		 * allocations' free side) starts 5-6 frames inside. */
		if (n == 0 && ret - 1 - self_lo < self_hi - self_lo &&
		    skipped < 8) {
			skipped++;      /* the allocator's own frame */
		} else {
			/* auto: the row of the function at ret says whether
			 * it keeps a frame pointer, and that ret is code (no
			 * text table lookup then). */
			have_row = mode == PROF_UNWIND_AUTO && CFI_ARCH;
			row = have_row ? prof_cfi_row(&w, ret, &rule) :
			    PROF_CFI_NOT_FOUND;
			/* The first return address left is the call into
			 * the allocator: the program's own, whatever the
			 * tables say. */
			if (have_row && row != PROF_CFI_OK)
				rec.ok = false;
			if (n > 0 && row != PROF_CFI_OK &&
			    !text_contains(ret)) {
				have_row = false;       /* not g.rip's */
				rec.ok = false;
				break;
			}
			vec[n++] = (void *)ret;
			g = (prof_cfi_regs_t){ret, fp + 2 * sizeof(uintptr_t),
			    next};
			/* cfi: the allocator's frames have frame pointers;
			 * the program's are read from .eh_frame.  auto: so
			 * are those of a function that keeps none, whose
			 * rbp may still hold a frame further up (frames
			 * would be lost without a sign) or anything. */
			if (mode == PROF_UNWIND_CFI || (row == PROF_CFI_OK &&
			    !prof_cfi_rule_keeps_fp(&rule))) {
				memo_rbp_defer(&rec, fp, next);
				break;
			}
		}
		/* next is the next frame (or ends the walk): its word is
		 * part of the answer. */
		memo_word(&rec, fp, next);
		/* Frames sit at higher addresses as we unwind. */
		if (next <= fp)
			break;
		lo = fp;
		fp = next;
	}
	/* Where the chain of frame pointers stops, or a function keeps
	 * none (or at once, for cfi), the walk goes on from the last frame
	 * recorded. */
	if (mode != PROF_UNWIND_FP && n > 0 && n < max)
		n = cfi_walk(vec, n, max, &w, g, &rule, have_row, row,
		    stack_lo, hi, &rec);
	if (w.read_pc[0] != 0)
		prof_cfi_walk_end(&w);
	if (rec.s != NULL) {
		if (rec.ok && n <= MEMO_FRAMES) {
			memcpy(rec.s->vec, vec, n * sizeof(void *));
			rec.s->n = n;
			rec.s->valid = n > 0;
		}
		atomic_signal_fence(memory_order_seq_cst);
		m->busy = false;
	}
	return n;
}

bool prof_sys_note(void *const *vec, unsigned n) {
	return objs_note(vec, n);
}
