/*
 * test/stress/soak.c - the soak run (doc/reliability.md, "Soak"): minutes
 * of multi-threaded churn with the profiler on, a dump every second and
 * the scrape endpoint polled.  Built with the tests, never run by
 * `make check`; `sh scripts/soak.sh [SECONDS]` builds and runs it.
 *
 *   soak [-t SECONDS] [-j THREADS] [-o DIR] [-s SLOTS] [-w WARMUP]
 *
 * Needs prof:true,prof_active:true and prof_http:127.0.0.1:0 in the conf
 * variable (MALLOC_CONF, or MP_MALLOC_CONF in a prefixed build).
 *
 * Workers (THREADS, default 4) churn objects of mixed sizes (3 in 4 of
 * 32 B-1 KiB, then up to 32 KiB, 512 KiB and 4 MiB) through malloc,
 * calloc, posix_memalign, aligned_alloc, realloc(NULL), mallocx, realloc,
 * xallocx, free, sdallocx and dallocx.  Each keeps SLOTS objects (default
 * 768) and swaps some with a shared handoff table, so that many objects
 * are freed by a thread other than the one that allocated them.  Every
 * object carries a header (its usable size, requested size, alignment) and
 * a canary at its requested end, checked before it is freed or resized.
 * Each worker counts the usable bytes (malloc_usable_size) it allocated
 * minus those it freed; the sum over workers is the live bytes the test
 * tracks.
 *
 * The main thread, once a second: stops the workers and the poller at a
 * quiescent point (they park on a condition variable between
 * operations), writes `epoch`, reads `stats.allocated` and checks
 *
 *   stats.allocated == baseline + tracked live bytes       (exactly)
 *
 * where baseline is stats.allocated measured the same way before the
 * churn began (the bytes the rest of the process holds: stdio's buffer,
 * what glibc allocated creating the threads ...), and checks each worker's
 * thread.allocated - thread.deallocated against its own count, and the
 * tracked total against an inventory of the slots and the handoff table.
 * It reads RSS from /proc/self/statm, writes prof.dump to DIR/soak.heap
 * (on even seconds while the workers are stopped, on odd seconds after
 * they resume) and parses it (test_util.h's strict heap_v2 reader): the
 * header's t* line must agree with the sum of the stacks (after jeprof's
 * unbiasing, within rounding), each stack with its thread lines, and a
 * dump taken while stopped must estimate stats.allocated within 20%.
 * After the warm-up (WARMUP seconds, default 60, at most half the run)
 * RSS must stay within 1.5 times the RSS measured then.
 *
 * The poller fetches /debug/pprof/heap from the endpoint every 250 ms:
 * status 200, Content-Length equal to the body, gzip magic, and the body
 * must decode as a pprof profile with inuse_space > 0; every 8th fetch
 * is ?format=heap_v2, parsed as above.
 *
 * At the end everything is freed and stats.allocated must be back at the
 * baseline.  Output: a progress line every 10 s, then "soak: ..." lines
 * with the numbers and a last line "soak: PASS" or "soak: FAIL: <reason>"
 * (exit status 0 or 1; 2 for bad usage).
 */
#include "../test_util.h"

#include <arpa/inet.h>
#include <getopt.h>
#include <netinet/in.h>
#include <sys/socket.h>

#define MAX_WORKERS 64
#define NHANDOFF 512
#define POLL_MS 250
#define PARK_TIMEOUT_S 60
#define EST_TOLERANCE 0.20
#define RSS_FACTOR 1.5

/* ---- options and results */

static unsigned opt_seconds = 600;
static unsigned opt_threads = 4;
static unsigned opt_slots = 768;
static unsigned opt_warmup = 60;
static const char *opt_dir;

static atomic_bool stop;
static atomic_bool has_failed;
static pthread_mutex_t fail_mtx = PTHREAD_MUTEX_INITIALIZER;
static char fail_reason[512];

/* Record the first failure (any thread) and stop the run. */
static void soak_fail(const char *fmt, ...) __attribute__((format(printf, 1,
    2)));
static void soak_fail(const char *fmt, ...) {
	pthread_mutex_lock(&fail_mtx);
	if (fail_reason[0] == '\0') {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(fail_reason, sizeof(fail_reason), fmt, ap);
		va_end(ap);
		char line[600];
		snprintf(line, sizeof(line), "soak: failure: %s", fail_reason);
		mp_write_line(line);
	}
	atomic_store(&has_failed, true);
	pthread_mutex_unlock(&fail_mtx);
	atomic_store(&stop, true);
}

static bool failed(void) {
	return atomic_load(&has_failed);
}

/* ---- objects */

/* At the start of every object (requests are at least 32 bytes). */
typedef struct {
	uint64_t usize;         /* malloc_usable_size when last changed */
	uint32_t req;           /* requested size: the canary ends there */
	uint16_t lg_align;      /* alignment asked for (0: natural) */
	uint16_t tag;
} hdr_t;

#define REQ_MIN 32

static uint32_t canary_of(uint32_t req, uint16_t tag) {
	return (req * 2654435761u) ^ ((uint32_t)tag << 8) ^ 0xa5c3e1f7u;
}

static void obj_stamp(void *p, size_t usize, size_t req, unsigned lg,
    uint16_t tag) {
	hdr_t h = {usize, (uint32_t)req, (uint16_t)lg, tag};
	memcpy(p, &h, sizeof(h));
	uint32_t c = canary_of((uint32_t)req, tag);
	memcpy((char *)p + req - sizeof(c), &c, sizeof(c));
}

/* Checks p's header and canary and that the allocator still reports the
 * usable size recorded; the header, or a failure. */
static bool obj_check(void *p, hdr_t *h, const char *when) {
	memcpy(h, p, sizeof(*h));
	if (h->req < REQ_MIN || h->req > 8 * MP_MiB || h->usize < h->req) {
		soak_fail("object %p (%s): header corrupt (usize %" PRIu64
		    ", req %u)", p, when, h->usize, h->req);
		return false;
	}
	uint32_t c;
	memcpy(&c, (char *)p + h->req - sizeof(c), sizeof(c));
	if (c != canary_of(h->req, h->tag)) {
		soak_fail("object %p (%s): canary at %u bytes overwritten", p,
		    when, h->req);
		return false;
	}
	size_t u = malloc_usable_size(p);
	if (u != h->usize) {
		soak_fail("object %p (%s): malloc_usable_size %zu, was %"
		    PRIu64, p, when, u, h->usize);
		return false;
	}
	return true;
}

/* ---- workers */

typedef struct {
	void *p;                /* NULL: empty */
} slot_t;

enum {
	OP_MALLOC, OP_CALLOC, OP_MEMALIGN, OP_ALIGNED_ALLOC, OP_REALLOC_NULL,
	OP_MALLOCX, OP_REALLOC, OP_XALLOCX, OP_FREE, OP_SDALLOCX, OP_DALLOCX,
	OP_HANDOFF, OP_TAKE, OP_NKINDS
};
static const char *const op_names[OP_NKINDS] = {
	"malloc", "calloc", "posix_memalign", "aligned_alloc",
	"realloc(NULL)", "mallocx", "realloc", "xallocx", "free", "sdallocx",
	"dallocx", "handoff", "take",
};

typedef struct {
	/* Written by the worker only; read by the main thread while the
	 * worker is parked (the park mutex orders them). */
	int64_t net;            /* usable bytes allocated - freed */
	uint64_t ops[OP_NKINDS];
	uint64_t nops;
	uint64_t *allocatedp, *deallocatedp;    /* thread.allocatedp ... */
	uint64_t thread_base;   /* allocated - deallocated at the start */
	slot_t *slots;
	unsigned id;
	pthread_t thr;
	char pad[64];
} worker_t;

static worker_t workers[MAX_WORKERS];
static _Atomic(void *) handoff[NHANDOFF];

/* Parking: participants (workers and the poller) park between operations
 * while pause_req is set; the main thread waits until all have. */
static pthread_mutex_t park_mtx = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t park_cv = PTHREAD_COND_INITIALIZER;
static pthread_cond_t resume_cv = PTHREAD_COND_INITIALIZER;
static atomic_bool pause_req;
static unsigned parked;
static uint64_t park_gen;
static unsigned participants;

static void park(void) {
	pthread_mutex_lock(&park_mtx);
	if (atomic_load(&pause_req)) {
		uint64_t g = park_gen;
		parked++;
		pthread_cond_signal(&park_cv);
		while (park_gen == g) {
			pthread_cond_wait(&resume_cv, &park_mtx);
		}
	}
	pthread_mutex_unlock(&park_mtx);
}

/* Stop every participant; false (a failure recorded) on timeout. */
static bool pause_all(void) {
	pthread_mutex_lock(&park_mtx);
	atomic_store(&pause_req, true);
	uint64_t give_up = mp_now_ns() + (uint64_t)PARK_TIMEOUT_S *
	    1000000000u;
	bool ok = true;
	/* Short waits: a participant that failed has left for good. */
	while (parked < participants && !atomic_load(&stop)) {
		struct timespec dl;
		clock_gettime(CLOCK_REALTIME, &dl);
		dl.tv_nsec += 100000000;
		if (dl.tv_nsec >= 1000000000) {
			dl.tv_sec++;
			dl.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&park_cv, &park_mtx, &dl);
		if (mp_now_ns() > give_up) {
			ok = false;
			break;
		}
	}
	ok = ok && parked == participants;
	unsigned n = parked;
	pthread_mutex_unlock(&park_mtx);
	if (!ok && !failed()) {
		soak_fail("only %u of %u threads reached the pause in %d s "
		    "(deadlock?)", n, participants, PARK_TIMEOUT_S);
	}
	return ok;
}

static void resume_all(void) {
	pthread_mutex_lock(&park_mtx);
	atomic_store(&pause_req, false);
	parked = 0;
	park_gen++;
	pthread_cond_broadcast(&resume_cv);
	pthread_mutex_unlock(&park_mtx);
}

/* A request size: 3 in 4 small, then medium, large, a few huge. */
static size_t pick_size(mp_rng_t *r) {
	uint64_t x = mp_rng_next(r);
	unsigned k = (unsigned)(x % 100);
	x >>= 8;
	if (k < 75) {
		return REQ_MIN + (size_t)(x % (1024 - REQ_MIN + 1));
	}
	if (k < 93) {
		return 1024 + (size_t)(x % (31 * MP_KiB));
	}
	if (k < 99) {
		return 32 * MP_KiB + (size_t)(x % (480 * MP_KiB));
	}
	return 512 * MP_KiB + (size_t)(x % (3584 * MP_KiB));
}

static unsigned pick_lg_align(mp_rng_t *r) {
	uint64_t x = mp_rng_next(r);
	if (x % 16 == 0) {
		return 13 + (unsigned)((x >> 8) % 4);   /* 8-64 KiB */
	}
	return 4 + (unsigned)((x >> 8) % 9);            /* 16 B-4 KiB */
}

/* Whether a zeroed object of req bytes is zero: all of it if small,
 * else its first, middle and last 64 bytes. */
static bool is_zeroed(const void *p, size_t req) {
	const char *b = p;
	if (req <= 256) {
		return first_nonzero(b, req) == SIZE_MAX;
	}
	return first_nonzero(b, 64) == SIZE_MAX &&
	    first_nonzero(b + req / 2, 64) == SIZE_MAX &&
	    first_nonzero(b + req - 64, 64) == SIZE_MAX;
}

/* The usable size the allocator reports for a new object, checked. */
static bool new_usize(void *p, size_t req, size_t want, const char *fn,
    size_t *out) {
	size_t u = malloc_usable_size(p);
	if (u < req || u != want) {
		soak_fail("%s(%zu) = %p: malloc_usable_size %zu, expected %zu",
		    fn, req, p, u, want);
		return false;
	}
	*out = u;
	return true;
}

/* Allocate into an empty slot. */
static void op_alloc(worker_t *w, mp_rng_t *r, slot_t *s) {
	size_t req = pick_size(r);
	unsigned kind = (unsigned)(mp_rng_next(r) % 100);
	unsigned lg = 0;
	void *p = NULL;
	size_t want;
	int op;
	if (kind < 50) {
		op = OP_MALLOC;
		p = malloc(req);
		want = mp_expected_size_class(req);
	} else if (kind < 65) {
		op = OP_CALLOC;
		size_t n = 1 + (size_t)(mp_rng_next(r) % 4);
		req = (req + n - 1) / n * n;
		p = calloc(n, req / n);
		want = mp_expected_size_class(req);
		if (p != NULL && !is_zeroed(p, req)) {
			soak_fail("calloc(%zu, %zu) = %p: not zeroed", n,
			    req / n, p);
			return;
		}
	} else if (kind < 80) {
		op = OP_MEMALIGN;
		lg = pick_lg_align(r);
		int e = posix_memalign(&p, (size_t)1 << lg, req);
		if (e != 0) {
			p = NULL;
		}
		want = nallocx(req, MALLOCX_LG_ALIGN(lg));
	} else if (kind < 85) {
		op = OP_ALIGNED_ALLOC;
		lg = pick_lg_align(r);
		p = aligned_alloc((size_t)1 << lg, req);
		want = nallocx(req, MALLOCX_LG_ALIGN(lg));
	} else if (kind < 90) {
		op = OP_REALLOC_NULL;
		p = realloc(NULL, req);
		want = mp_expected_size_class(req);
	} else {
		op = OP_MALLOCX;
		uint64_t x = mp_rng_next(r);
		int flags = 0;
		if (x & 1) {
			flags |= MALLOCX_ZERO;
		}
		if (x & 2) {
			lg = pick_lg_align(r);
			flags |= MALLOCX_LG_ALIGN(lg);
		}
		p = mallocx(req, flags);
		want = nallocx(req, flags);
		if (p != NULL && (flags & MALLOCX_ZERO) && !is_zeroed(p,
		    req)) {
			soak_fail("mallocx(%zu, MALLOCX_ZERO) = %p: not zeroed",
			    req, p);
			return;
		}
	}
	p = LAUNDER(p);
	if (p == NULL) {
		soak_fail("%s(%zu) failed: %s", op_names[op], req,
		    strerror(errno));
		return;
	}
	if (lg != 0 && !mp_is_aligned(p, (size_t)1 << lg)) {
		soak_fail("%s(%zu, align %zu) = %p: misaligned", op_names[op],
		    req, (size_t)1 << lg, p);
		return;
	}
	size_t u;
	if (!new_usize(p, req, want, op_names[op], &u)) {
		return;
	}
	obj_stamp(p, u, req, lg, (uint16_t)mp_rng_next(r));
	w->net += (int64_t)u;
	w->ops[op]++;
	s->p = p;
}

/* Free p (checked) with one of free, sdallocx, dallocx. */
static void obj_free(worker_t *w, mp_rng_t *r, void *p) {
	hdr_t h;
	if (!obj_check(p, &h, "before free")) {
		return;
	}
	unsigned k = (unsigned)(mp_rng_next(r) % 10);
	if (k < 8) {
		free(p);
		w->ops[OP_FREE]++;
	} else if (k < 9 && h.lg_align <= 12) {
		/* (Larger alignments: the size class sdallocx would check in
		 * a debug build is not the requested size's.) */
		sdallocx(p, h.req, h.lg_align ? MALLOCX_LG_ALIGN(h.lg_align) :
		    0);
		w->ops[OP_SDALLOCX]++;
	} else {
		dallocx(p, 0);
		w->ops[OP_DALLOCX]++;
	}
	w->net -= (int64_t)h.usize;
}

static void op_realloc(worker_t *w, mp_rng_t *r, slot_t *s) {
	hdr_t h;
	if (!obj_check(s->p, &h, "before realloc")) {
		return;
	}
	size_t req;
	if (mp_rng_next(r) % 4 == 0) {
		/* Within or near the current size: often the same class. */
		uint64_t d = mp_rng_next(r) % 64;
		req = h.req > REQ_MIN + 32 && (d & 1) ? h.req - d / 2 :
		    h.req + d / 2;
		if (req > 8 * MP_MiB - 64) {
			req = h.req;
		}
	} else {
		req = pick_size(r);
	}
	void *q = LAUNDER(realloc(s->p, req));
	if (q == NULL) {
		soak_fail("realloc(%p, %zu) failed: %s", s->p, req,
		    strerror(errno));
		return;
	}
	/* The header moved with the contents. */
	hdr_t h2;
	memcpy(&h2, q, sizeof(h2));
	if (h2.usize != h.usize || h2.req != h.req || h2.tag != h.tag) {
		soak_fail("realloc(%p, %zu) = %p: contents not kept", s->p,
		    req, q);
		return;
	}
	size_t u;
	if (!new_usize(q, req, mp_expected_size_class(req), "realloc", &u)) {
		return;
	}
	obj_stamp(q, u, req, 0, h.tag);
	w->net += (int64_t)u - (int64_t)h.usize;
	w->ops[OP_REALLOC]++;
	s->p = q;
}

/* xallocx on a large object: grow or shrink in place, or not. */
static void op_xallocx(worker_t *w, mp_rng_t *r, slot_t *s) {
	hdr_t h;
	if (!obj_check(s->p, &h, "before xallocx")) {
		return;
	}
	size_t req = h.req;
	uint64_t x = mp_rng_next(r);
	if ((x & 1) && req < 6 * MP_MiB) {
		req += (size_t)((x >> 8) % (256 * MP_KiB));
	} else if (req > 64 * MP_KiB) {
		req -= (size_t)((x >> 8) % (req / 2));
	}
	size_t got = xallocx(s->p, req, 0, 0);
	size_t u = malloc_usable_size(s->p);
	if (got != u) {
		soak_fail("xallocx(%p, %zu) = %zu, malloc_usable_size %zu",
		    s->p, req, got, u);
		return;
	}
	if (got != h.usize) {
		if (got < req) {
			soak_fail("xallocx(%p, %zu) resized to %zu, less than "
			    "asked", s->p, req, got);
			return;
		}
		obj_stamp(s->p, got, req, h.lg_align, h.tag);
		w->net += (int64_t)got - (int64_t)h.usize;
	}
	w->ops[OP_XALLOCX]++;
}

/*
 * Call paths: allocations and resizes are made at the end of a chain of
 * up to PATH_DEPTH calls through two functions chosen by the bits of a
 * random number, so that the profiler keeps a few hundred distinct
 * stacks (2^(PATH_DEPTH+1) - 1 chains times the kinds of call).
 */
#define PATH_DEPTH 6
typedef void op_fn_t(worker_t *, mp_rng_t *, slot_t *);
MP_SITE void soak_path_a(op_fn_t *fn, worker_t *w, mp_rng_t *r, slot_t *s,
    unsigned depth, unsigned bits);
MP_SITE void soak_path_b(op_fn_t *fn, worker_t *w, mp_rng_t *r, slot_t *s,
    unsigned depth, unsigned bits);

MP_SITE void soak_path_a(op_fn_t *fn, worker_t *w, mp_rng_t *r, slot_t *s,
    unsigned depth, unsigned bits) {
	if (depth == 0) {
		fn(w, r, s);
	} else if (bits & 1) {
		soak_path_a(fn, w, r, s, depth - 1, bits >> 1);
	} else {
		soak_path_b(fn, w, r, s, depth - 1, bits >> 1);
	}
	__asm__ volatile("" : : : "memory");    /* no tail call */
}

MP_SITE void soak_path_b(op_fn_t *fn, worker_t *w, mp_rng_t *r, slot_t *s,
    unsigned depth, unsigned bits) {
	if (depth == 0) {
		fn(w, r, s);
	} else if (bits & 1) {
		soak_path_a(fn, w, r, s, depth - 1, bits >> 1);
	} else {
		soak_path_b(fn, w, r, s, depth - 1, bits >> 1);
	}
	__asm__ volatile("" : : : "memory");
}

static void via_path(op_fn_t *fn, worker_t *w, mp_rng_t *r, slot_t *s) {
	uint64_t x = mp_rng_next(r);
	soak_path_a(fn, w, r, s, (unsigned)(x % (PATH_DEPTH + 1)),
	    (unsigned)(x >> 32));
}

static void *worker_main(void *arg) {
	worker_t *w = arg;
	mp_rng_t r = {0x50a4ull * (w->id + 1) ^ (uint64_t)mp_now_ns()};
	char name[32];
	snprintf(name, sizeof(name), "soak-worker-%u", w->id);
	const char *np = name;
	(void)mallctl("thread.prof.name", NULL, NULL, &np, sizeof(np));
	size_t sz = sizeof(w->allocatedp);
	if (mallctl("thread.allocatedp", &w->allocatedp, &sz, NULL, 0) != 0 ||
	    mallctl("thread.deallocatedp", &w->deallocatedp, &sz, NULL, 0)
	    != 0) {
		soak_fail("worker %u: thread.allocatedp unavailable", w->id);
		return NULL;
	}
	/* Whatever this thread's first calls set up for good is in the
	 * baseline: one round trip of each kind before parking. */
	for (unsigned i = 0; i < 64; i++) {
		void *p = LAUNDER(malloc(pick_size(&r)));
		free(p);
	}
	w->thread_base = *w->allocatedp - *w->deallocatedp;
	unsigned nslots = opt_slots;
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		if (atomic_load_explicit(&pause_req, memory_order_relaxed)) {
			park();
			continue;
		}
		uint64_t x = mp_rng_next(&r);
		slot_t *s = &w->slots[x % nslots];
		unsigned k = (unsigned)((x >> 32) % 100);
		if (s->p == NULL) {
			if (k < 8) {
				/* Take one from the table instead. */
				void *q = atomic_exchange(&handoff[(x >> 16) %
				    NHANDOFF], NULL);
				if (q != NULL) {
					hdr_t h;
					if (obj_check(q, &h, "taken")) {
						s->p = q;
					}
					w->ops[OP_TAKE]++;
					w->nops++;
					continue;
				}
			}
			via_path(op_alloc, w, &r, s);
		} else if (k < 45) {
			obj_free(w, &r, s->p);
			s->p = NULL;
		} else if (k < 70) {
			via_path(op_realloc, w, &r, s);
		} else if (k < 75) {
			hdr_t h;
			memcpy(&h, s->p, sizeof(h));
			if (h.usize > 16 * MP_KiB) {
				via_path(op_xallocx, w, &r, s);
			} else {
				via_path(op_realloc, w, &r, s);
			}
		} else {
			/* Swap with the table: what comes back is most
			 * likely another thread's object. */
			hdr_t h;
			if (obj_check(s->p, &h, "handed off")) {
				s->p = atomic_exchange(&handoff[(x >> 16) %
				    NHANDOFF], s->p);
				w->ops[OP_HANDOFF]++;
			}
		}
		w->nops++;
	}
	return NULL;
}

/* ---- the scrape endpoint's poller */

static unsigned http_port;
static _Atomic uint64_t scrapes, scrapes_heap_v2, scrape_bytes_max;
static char scrape_path[600];

/* GET path; the body (malloc'd) and its length, or NULL with why[]. */
static uint8_t *http_get(const char *path, size_t *blen, char *why,
    size_t whysize) {
	int fd = mp_connect_loopback(AF_INET, http_port, 30);
	if (fd < 0) {
		snprintf(why, whysize, "connect: %s", strerror(errno));
		return NULL;
	}
	char req[256];
	int n = snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: "
	    "127.0.0.1\r\nUser-Agent: malloc_prof-soak\r\n\r\n", path);
	if (send(fd, req, (size_t)n, MSG_NOSIGNAL) != n) {
		snprintf(why, whysize, "send: %s", strerror(errno));
		close(fd);
		return NULL;
	}
	size_t len;
	uint8_t *all = mp_read_fd_all(fd, &len);
	close(fd);
	uint8_t *end = NULL;
	for (size_t i = 0; i + 3 < len && i < 4096; i++) {
		if (memcmp(all + i, "\r\n\r\n", 4) == 0) {
			end = all + i;
			break;
		}
	}
	if (end == NULL) {
		snprintf(why, whysize, "no response head in %zu bytes", len);
		free(all);
		return NULL;
	}
	*end = '\0';
	int status = 0;
	if (sscanf((char *)all, "HTTP/1.1 %d ", &status) != 1 ||
	    status != 200) {
		snprintf(why, whysize, "status %d: %.100s", status,
		    (char *)end + 4);
		free(all);
		return NULL;
	}
	const char *cl = strcasestr((char *)all, "\r\nContent-Length:");
	size_t body = len - (size_t)(end + 4 - all);
	if (cl == NULL || strtoull(cl + 17, NULL, 10) != body) {
		snprintf(why, whysize, "Content-Length %s, body %zu bytes",
		    cl != NULL ? "wrong" : "missing", body);
		free(all);
		return NULL;
	}
	memmove(all, end + 4, body);
	*blen = body;
	return all;
}

static void *poller_main(void *arg) {
	(void)arg;
	uint64_t k = 0;
	while (!atomic_load(&stop)) {
		if (atomic_load(&pause_req)) {
			park();
			continue;
		}
		char why[300];
		size_t len = 0;
		bool v2 = k % 8 == 7;
		uint8_t *b = http_get(v2 ? "/debug/pprof/heap?format=heap_v2" :
		    "/debug/pprof/heap", &len, why, sizeof(why));
		if (b == NULL) {
			soak_fail("scrape %" PRIu64 ": %s", k + 1, why);
			break;
		}
		if (len > scrape_bytes_max) {
			scrape_bytes_max = len;
		}
		if (v2) {
			int fd = open(scrape_path, O_WRONLY | O_CREAT | O_TRUNC |
			    O_CLOEXEC, 0600);
			bool ok = fd >= 0 && write(fd, b, len) == (ssize_t)len;
			if (fd >= 0) {
				close(fd);
			}
			mp_heap_t h;
			if (!ok) {
				soak_fail("scrape %" PRIu64 ": cannot write %s",
				    k + 1, scrape_path);
			} else if (!mp_heap_parse(scrape_path, &h)) {
				soak_fail("scrape %" PRIu64 " (heap_v2, %zu "
				    "bytes) does not parse: %s", k + 1, len,
				    h.err);
			} else {
				if (h.nstacks == 0) {
					soak_fail("scrape %" PRIu64 " (heap_v2): "
					    "no stack", k + 1);
				}
				mp_heap_free(&h);
				scrapes_heap_v2++;
			}
		} else if (len < 18 || b[0] != 0x1f || b[1] != 0x8b) {
			soak_fail("scrape %" PRIu64 ": %zu bytes, not gzip", k + 1,
			    len);
		} else {
			mp_pprof_t pp;
			if (!mp_pprof_decode(b, len, &pp)) {
				soak_fail("scrape %" PRIu64 ": %zu bytes do not "
				    "decode: %s", k + 1, len, pp.err);
			} else {
				int in = mp_pprof_type(&pp, "inuse_space");
				int64_t inuse = 0;
				for (size_t i = 0; in >= 0 && i < pp.nsamples;
				    i++) {
					inuse += pp.samples[i].vals[in];
				}
				if (in < 0 || inuse <= 0) {
					soak_fail("scrape %" PRIu64 ": inuse_space"
					    " %" PRId64 " in %zu samples", k + 1,
					    inuse, pp.nsamples);
				}
			}
			mp_pprof_free(&pp);
		}
		free(b);
		k++;
		scrapes = k;
		/* Sleep in short steps, so that a pause is not held up. */
		for (unsigned ms = 0; ms < POLL_MS && !atomic_load(&stop) &&
		    !atomic_load(&pause_req); ms += 10) {
			mp_sleep_ms(10);
		}
	}
	return NULL;
}

/* ---- dumps */

typedef struct {
	uint64_t dumps, quiescent;
	double est_min, est_max;        /* estimate / stats.allocated */
	double sum_err_max;             /* |t* - sum of stacks| / t* */
	size_t stacks_max, bytes_max;
} dump_stats_t;

static dump_stats_t ds = {0, 0, 1e9, 0, 0, 0, 0};
static bool churning;           /* the workers have started */
static char dump_path[600];

static double unbiased_bytes(const mp_cnts_t *c, uint64_t rate) {
	double n, s;
	mp_heap_unbias(c->co, c->cb, rate, &n, &s);
	return s;
}

/* prof.dump, parse, sums; with allocated != 0 (workers stopped) the
 * estimate must be near it. */
static bool dump_and_check(size_t allocated) {
	const char *p = dump_path;
	int e = mallctl("prof.dump", NULL, NULL, &p, sizeof(p));
	if (e != 0) {
		soak_fail("prof.dump %" PRIu64 ": %s", ds.dumps + 1,
		    strerror(e));
		return false;
	}
	ds.dumps++;
	struct stat st;
	if (stat(dump_path, &st) == 0 && (size_t)st.st_size > ds.bytes_max) {
		ds.bytes_max = (size_t)st.st_size;
	}
	mp_heap_t h;
	if (!mp_heap_parse(dump_path, &h)) {
		soak_fail("dump %" PRIu64 " does not parse: %s", ds.dumps,
		    h.err);
		return false;
	}
	bool ok = true;
	double R = (double)h.rate;
	double total = unbiased_bytes(&h.total, h.rate), sum = 0;
	for (size_t i = 0; i < h.nstacks && ok; i++) {
		const mp_heap_stack_t *s = &h.stacks[i];
		double st_b = unbiased_bytes(&s->total, h.rate), th = 0;
		if (s->nthr == 0) {
			soak_fail("dump %" PRIu64 ": stack %zu has no thread "
			    "line", ds.dumps, i);
			ok = false;
		}
		for (size_t k = 0; k < s->nthr; k++) {
			th += unbiased_bytes(&s->thr[k].c, h.rate);
		}
		/* Each printed line is rounded to whole objects: at most
		 * about R/2 bytes off once unbiased. */
		if (fabs(th - st_b) > R * (double)(s->nthr + 1) + 0.005 * st_b) {
			soak_fail("dump %" PRIu64 ": stack %zu: t* %.0f bytes, "
			    "its thread lines %.0f", ds.dumps, i, st_b, th);
			ok = false;
		}
		sum += st_b;
	}
	double err = fabs(total - sum);
	if (ok && err > R * (double)(h.nstacks + 1) + 0.005 * total) {
		soak_fail("dump %" PRIu64 ": t* %.0f bytes, the %zu stacks add up "
		    "to %.0f", ds.dumps, total, h.nstacks, sum);
		ok = false;
	}
	if (total > 0 && err / total > ds.sum_err_max) {
		ds.sum_err_max = err / total;
	}
	if (ok && h.nstacks == 0 && churning) {
		soak_fail("dump %" PRIu64 ": no stack", ds.dumps);
		ok = false;
	}
	if (h.nstacks > ds.stacks_max) {
		ds.stacks_max = h.nstacks;
	}
	if (ok && allocated != 0) {
		ds.quiescent++;
		double ratio = total / (double)allocated;
		if (ratio < ds.est_min) {
			ds.est_min = ratio;
		}
		if (ratio > ds.est_max) {
			ds.est_max = ratio;
		}
		if (fabs(ratio - 1) > EST_TOLERANCE) {
			soak_fail("dump %" PRIu64 ": estimates %.0f bytes live, "
			    "stats.allocated is %zu (ratio %.3f)", ds.dumps,
			    total, allocated, ratio);
			ok = false;
		}
	}
	mp_heap_free(&h);
	return ok;
}

/* ---- the checks at a quiescent point */

static size_t baseline;
static uint64_t checks;
static size_t live_max, live_last;

static size_t read_allocated(void) {
	mp_epoch();
	size_t v = 0;
	int e = mp_read_size("stats.allocated", &v);
	if (e != 0) {
		soak_fail("stats.allocated: %s", strerror(e));
	}
	return v;
}

static int64_t tracked_live(void) {
	int64_t t = 0;
	for (unsigned i = 0; i < opt_threads; i++) {
		t += workers[i].net;
	}
	return t;
}

/* The same total from the objects themselves: slots and table. */
static uint64_t inventory(void) {
	uint64_t t = 0;
	for (unsigned i = 0; i < opt_threads; i++) {
		for (unsigned k = 0; k < opt_slots; k++) {
			void *p = workers[i].slots[k].p;
			if (p != NULL) {
				hdr_t h;
				memcpy(&h, p, sizeof(h));
				t += h.usize;
			}
		}
	}
	for (unsigned k = 0; k < NHANDOFF; k++) {
		void *p = atomic_load(&handoff[k]);
		if (p != NULL) {
			hdr_t h;
			memcpy(&h, p, sizeof(h));
			t += h.usize;
		}
	}
	return t;
}

/* Workers parked: every exact check; *allocated gets stats.allocated. */
static bool check_quiescent(size_t *allocated) {
	size_t a = read_allocated();
	int64_t tr = tracked_live();
	uint64_t inv = inventory();
	checks++;
	if (failed()) {
		return false;
	}
	if (tr < 0 || (uint64_t)tr != inv) {
		soak_fail("check %" PRIu64 ": the workers count %" PRId64 " live "
		    "bytes, the objects hold %" PRIu64 " (test bug)", checks, tr,
		    inv);
		return false;
	}
	if (a != baseline + (size_t)tr) {
		soak_fail("check %" PRIu64 ": stats.allocated %zu != baseline %zu "
		    "+ tracked %" PRId64 " (off by %+" PRId64 ")", checks, a,
		    baseline, tr, (int64_t)(a - baseline - (size_t)tr));
		return false;
	}
	for (unsigned i = 0; i < opt_threads; i++) {
		worker_t *w = &workers[i];
		uint64_t t = *w->allocatedp - *w->deallocatedp - w->thread_base;
		if ((int64_t)t != w->net) {
			soak_fail("check %" PRIu64 ": worker %u: thread.allocated "
			    "- thread.deallocated moved by %" PRId64 ", the "
			    "worker counts %" PRId64, checks, i, (int64_t)t,
			    w->net);
			return false;
		}
	}
	live_last = (size_t)tr;
	if (live_last > live_max) {
		live_max = live_last;
	}
	*allocated = a;
	return true;
}

/* ---- main */

static uint64_t total_ops(void) {
	uint64_t n = 0;
	for (unsigned i = 0; i < opt_threads; i++) {
		n += workers[i].nops;
	}
	return n;
}

static void usage(void) {
	fprintf(stderr, "usage: soak [-t SECONDS] [-j THREADS] [-o DIR] "
	    "[-s SLOTS] [-w WARMUP_SECONDS]\n");
	exit(2);
}

static unsigned num_arg(const char *s, unsigned lo, unsigned hi) {
	char *end;
	unsigned long v = strtoul(s, &end, 10);
	if (*s == '\0' || *end != '\0' || v < lo || v > hi) {
		usage();
	}
	return (unsigned)v;
}

static void watchdog(int sig) {
	(void)sig;
	static const char msg[] = "soak: FAIL: watchdog: the run did not end "
	    "in time (deadlock?)\n";
	(void)!write(STDOUT_FILENO, msg, sizeof(msg) - 1);
	mp_dump_threads();
	_exit(1);
}

#define MiB(x) ((double)(x) / (double)MP_MiB)

int main(int argc, char **argv) {
	int c;
	while ((c = getopt(argc, argv, "t:j:o:s:w:")) != -1) {
		switch (c) {
		case 't': opt_seconds = num_arg(optarg, 1, 86400 * 7); break;
		case 'j': opt_threads = num_arg(optarg, 1, MAX_WORKERS); break;
		case 'o': opt_dir = optarg; break;
		case 's': opt_slots = num_arg(optarg, 1, 1 << 20); break;
		case 'w': opt_warmup = num_arg(optarg, 0, 86400); break;
		default: usage();
		}
	}
	if (optind != argc) {
		usage();
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	signal(SIGALRM, watchdog);
	alarm(opt_seconds + 300);
	unsigned warmup = opt_warmup < opt_seconds / 2 ? opt_warmup :
	    opt_seconds / 2;

	/* The profiler and the endpoint must be on. */
	bool prof = false, active = false;
	size_t sz = sizeof(prof);
	if (mallctl("opt.prof", &prof, &sz, NULL, 0) != 0 || !prof ||
	    mallctl("prof.active", &active, &sz, NULL, 0) != 0 || !active) {
		printf("soak: FAIL: profiling is not active: run with %s="
		    "prof:true,prof_active:true,lg_prof_sample:14,"
		    "prof_http:127.0.0.1:0 (scripts/soak.sh does)\n",
		    mp_env_conf_name());
		return 1;
	}
	sz = sizeof(http_port);
	if (mallctl("prof.http_port", &http_port, &sz, NULL, 0) != 0 ||
	    http_port == 0) {
		printf("soak: FAIL: the scrape endpoint is not running: add "
		    "prof_http:127.0.0.1:0 to %s\n", mp_env_conf_name());
		return 1;
	}
	size_t lg_sample = 0;
	sz = sizeof(lg_sample);
	(void)mallctl("opt.lg_prof_sample", &lg_sample, &sz, NULL, 0);

	char tmp[256];
	if (opt_dir == NULL) {
		if (!mp_tmpdir_make(tmp, sizeof(tmp), "soak")) {
			printf("soak: FAIL: mkdtemp: %s\n", strerror(errno));
			return 1;
		}
		opt_dir = tmp;
	} else if (mkdir(opt_dir, 0700) != 0 && errno != EEXIST) {
		printf("soak: FAIL: mkdir %s: %s\n", opt_dir, strerror(errno));
		return 1;
	}
	snprintf(dump_path, sizeof(dump_path), "%s/soak.heap", opt_dir);
	snprintf(scrape_path, sizeof(scrape_path), "%s/scrape.heap", opt_dir);
	printf("soak: %u s, %u worker threads x %u slots, handoff table %u, "
	    "lg_prof_sample %zu, endpoint 127.0.0.1:%u, dumps in %s, warm-up "
	    "%u s\n", opt_seconds, opt_threads, opt_slots, NHANDOFF, lg_sample,
	    http_port, opt_dir, warmup);

	/* Start everyone parked: they park at their first look. */
	atomic_store(&pause_req, true);
	participants = opt_threads + 1;
	for (unsigned i = 0; i < opt_threads; i++) {
		workers[i].id = i;
		workers[i].slots = calloc(opt_slots, sizeof(slot_t));
		if (workers[i].slots == NULL) {
			printf("soak: FAIL: out of memory\n");
			return 1;
		}
	}
	for (unsigned i = 0; i < opt_threads; i++) {
		if (pthread_create(&workers[i].thr, NULL, worker_main,
		    &workers[i]) != 0) {
			printf("soak: FAIL: pthread_create\n");
			return 1;
		}
	}
	pthread_t poller;
	if (pthread_create(&poller, NULL, poller_main, NULL) != 0) {
		printf("soak: FAIL: pthread_create\n");
		return 1;
	}
	/* One dump and one scrape before the baseline, so that whatever the
	 * first of each sets up is in it. */
	if (!pause_all() || !dump_and_check(0)) {
		printf("soak: FAIL: %s\n", fail_reason);
		return 1;
	}
	{
		char why[200];
		size_t n;
		uint8_t *b = http_get("/debug/pprof/heap", &n, why, sizeof(why));
		if (b == NULL) {
			printf("soak: FAIL: first scrape: %s\n", why);
			return 1;
		}
		free(b);
	}
	ds = (dump_stats_t){0, 0, 1e9, 0, 0, 0, 0};
	baseline = read_allocated();
	size_t rss0 = read_rss_bytes();
	printf("soak: baseline stats.allocated %zu bytes (held outside the "
	    "workers), RSS %.1f MiB\n", baseline, MiB(rss0));

	churning = true;
	uint64_t t0 = mp_now_ns();
	size_t rss_warm = 0, rss_max = rss0, rss_max_after = 0, rss_last = 0;
	double rss_warm_t = 0;
	unsigned sec = 0;
	resume_all();
	while (!atomic_load(&stop)) {
		sec++;
		uint64_t due = t0 + (uint64_t)sec * 1000000000ull;
		while (!atomic_load(&stop)) {
			uint64_t now = mp_now_ns();
			if (now >= due) {
				break;
			}
			uint64_t left = (due - now) / 1000000;
			mp_sleep_ms(left > 50 ? 50 : (unsigned)left + 1);
		}
		if (atomic_load(&stop) || !pause_all()) {
			break;
		}
		size_t allocated;
		if (!check_quiescent(&allocated)) {
			break;
		}
		size_t rss = read_rss_bytes();
		rss_last = rss;
		if (rss > rss_max) {
			rss_max = rss;
		}
		double t = (double)(mp_now_ns() - t0) / 1e9;
		if (sec == warmup || (warmup == 0 && sec == 1)) {
			rss_warm = rss;
			rss_warm_t = t;
		}
		if (rss_warm != 0) {
			if (rss > rss_max_after) {
				rss_max_after = rss;
			}
			if ((double)rss > RSS_FACTOR * (double)rss_warm) {
				soak_fail("RSS %.1f MiB at %.0f s, more than %.1f "
				    "times the %.1f MiB at %.0f s", MiB(rss), t,
				    RSS_FACTOR, MiB(rss_warm), rss_warm_t);
				break;
			}
		}
		bool quiet = sec % 2 == 0;
		if (quiet && !dump_and_check(allocated)) {
			break;
		}
		uint64_t nops = total_ops();
		resume_all();
		if (!quiet && !dump_and_check(0)) {
			break;
		}
		if (sec % 10 == 0) {
			size_t act = 0, res = 0;
			(void)mp_read_size("stats.active", &act);
			(void)mp_read_size("stats.resident", &res);
			printf("soak: %4.0f s: %" PRIu64 " ops, live %.1f MiB, "
			    "stats.allocated %.1f MiB, active %.1f MiB, "
			    "resident %.1f MiB, RSS %.1f MiB, %" PRIu64
			    " dumps, %" PRIu64 " scrapes\n", t, nops,
			    MiB(live_last), MiB(allocated), MiB(act), MiB(res),
			    MiB(rss), ds.dumps, (uint64_t)scrapes);
		}
		if (sec >= opt_seconds) {
			break;
		}
	}
	double elapsed = (double)(mp_now_ns() - t0) / 1e9;

	/* Everything freed: back at the baseline.  Checked with the threads
	 * still alive, stopped: when a thread exits, glibc frees what it
	 * allocated for it (end_joined below). */
	size_t end_alloc = 0, end_joined = 0;
	if (!failed() && pause_all()) {
		mp_rng_t r = {42};
		for (unsigned i = 0; i < opt_threads; i++) {
			for (unsigned k = 0; k < opt_slots; k++) {
				void *p = workers[i].slots[k].p;
				if (p != NULL && !failed()) {
					obj_free(&workers[i], &r, p);
				}
			}
		}
		for (unsigned k = 0; k < NHANDOFF && !failed(); k++) {
			void *p = atomic_exchange(&handoff[k], NULL);
			if (p != NULL) {
				obj_free(&workers[0], &r, p);
			}
		}
		end_alloc = read_allocated();
		if (!failed() && (tracked_live() != 0 || end_alloc != baseline)) {
			soak_fail("after freeing everything: stats.allocated %zu, "
			    "baseline %zu (tracked %" PRId64 ")", end_alloc,
			    baseline, tracked_live());
		}
	}
	atomic_store(&stop, true);
	resume_all();
	for (unsigned i = 0; i < opt_threads; i++) {
		pthread_join(workers[i].thr, NULL);
	}
	pthread_join(poller, NULL);
	end_joined = read_allocated();
	uint64_t nops_end = total_ops();

	uint64_t ops[OP_NKINDS] = {0};
	for (unsigned i = 0; i < opt_threads; i++) {
		for (unsigned k = 0; k < OP_NKINDS; k++) {
			ops[k] += workers[i].ops[k];
		}
	}
	printf("soak: ran %.1f s, %u worker threads, %" PRIu64 " operations "
	    "(%.0f/s):", elapsed, opt_threads, nops_end,
	    (double)nops_end / elapsed);
	for (unsigned k = 0; k < OP_NKINDS; k++) {
		printf(" %s %" PRIu64 "%s", op_names[k], ops[k],
		    k + 1 < OP_NKINDS ? "," : "\n");
	}
	printf("soak: %" PRIu64 " checks at quiescent points: stats.allocated "
	    "== baseline %zu + tracked live bytes (exactly) at every one; "
	    "live bytes at most %.1f MiB, last %.1f MiB; after freeing all: "
	    "stats.allocated %zu (%zu once the %u threads exited)\n", checks,
	    baseline, MiB(live_max), MiB(live_last), end_alloc, end_joined,
	    opt_threads + 1);
	printf("soak: %" PRIu64 " dumps written and parsed (%" PRIu64 " while "
	    "stopped: estimate / stats.allocated %.3f..%.3f), up to %zu stacks "
	    "and %zu bytes; t* vs sum of stacks within %.4f%%\n", ds.dumps,
	    ds.quiescent, ds.quiescent ? ds.est_min : 0.0, ds.est_max,
	    ds.stacks_max, ds.bytes_max, 100 * ds.sum_err_max);
	printf("soak: %" PRIu64 " scrapes of /debug/pprof/heap, all 200 "
	    "(%" PRIu64 " pprof decoded, %" PRIu64 " heap_v2 parsed), largest "
	    "%" PRIu64 " bytes\n", scrapes, scrapes - scrapes_heap_v2,
	    scrapes_heap_v2, scrape_bytes_max);
	printf("soak: RSS at start %.1f MiB, at %.0f s (warm-up) %.1f MiB, max "
	    "after it %.1f MiB (bound %.1f MiB), max overall %.1f MiB, at the "
	    "end %.1f MiB\n", MiB(rss0), rss_warm_t, MiB(rss_warm),
	    MiB(rss_max_after), RSS_FACTOR * MiB(rss_warm), MiB(rss_max),
	    MiB(rss_last));
	if (opt_dir == tmp) {
		mp_tmpdir_remove(tmp);
	}
	if (failed()) {
		printf("soak: FAIL: %s\n", fail_reason);
		return 1;
	}
	printf("soak: PASS\n");
	return 0;
}
