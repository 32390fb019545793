/*
 * bench/workloads.c: mpbench, the allocation workloads that bench/run.py
 * times under each allocator (ours and its peers, swapped in with
 * LD_PRELOAD).  `mpbench WORKLOAD [SCALE]` runs one workload and prints one
 * line, "WORKLOAD checksum=HEX" plus a few key=value fields for some;
 * `mpbench list` names them.  SCALE multiplies iteration counts, never
 * working-set sizes, so that a run measures the same heap shape for longer
 * or shorter.  micro, micro_empty and micro_batch take an iteration count
 * instead, because callgrind runs them twice and divides by the difference.
 *
 * Every object is written when allocated and read before it is freed, and
 * the bytes read feed the checksum: the compiler cannot drop an allocation
 * whose contents are used, the workload touches the memory it asks for, and
 * a checksum that changes from one allocator to another means an allocator
 * lost or mixed up data.  The checksums depend on values only, never on
 * addresses or on thread scheduling, so they are equal under every
 * allocator.
 *
 * Built as a plain program (`cc -O2 -pthread ... -lm`): it calls malloc,
 * free, calloc and realloc by their ordinary names so that a preloaded
 * allocator serves them, and it uses nothing from malloc_prof.
 */
#define _DEFAULT_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdalign.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define WL_PREFIX "<malloc_prof>: mpbench: "
#define WL_CACHELINE 64
#define WL_KIB ((size_t)1 << 10)
#define WL_MIB ((size_t)1 << 20)

/* ---- utilities ---- */

static void wl_die(int status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3), noreturn));

static void wl_die(int status, const char *fmt, ...) {
	char buf[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	fprintf(stderr, WL_PREFIX "%s\n", buf);
	exit(status);
}

static void wl_oom(void) __attribute__((noreturn, cold));

static void wl_oom(void) {
	wl_die(1, "out of memory");
}

/*
 * The compiler may pair a malloc with its free and drop both when it can
 * see the object is never used; an asm that might read the pointer (and
 * any memory) forbids that without costing an instruction.
 */
static inline void wl_sink(const void *p) {
	__asm__ volatile("" : : "r"(p) : "memory");
}

static inline void *wl_malloc(size_t size) {
	void *p = malloc(size);
	if (p == NULL)
		wl_oom();
	return p;
}

/* xorshift64*: cheap next to malloc, and the same sequence everywhere.
 * Ranges are taken by modulo; the bias is far below anything measured. */
typedef struct {
	uint64_t s;
} wl_rng_t;

static uint64_t wl_hash_str(const char *s) {
	uint64_t h = 0xcbf29ce484222325ULL;
	for (; *s != '\0'; s++) {
		h ^= (unsigned char)*s;
		h *= 0x100000001b3ULL;
	}
	return h;
}

/*
 * Seeds come from the workload name and a thread index so that each
 * thread has its own stream and a workload's streams do not depend on
 * which workloads exist.  splitmix64 spreads nearby indices apart; xorshift
 * needs a nonzero state.
 */
static void wl_rng_seed(wl_rng_t *r, const char *name, uint64_t index) {
	uint64_t z = wl_hash_str(name) + (index + 1) * 0x9e3779b97f4a7c15ULL;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	z ^= z >> 31;
	r->s = z != 0 ? z : 0x2545f4914f6cdd1dULL;
}

static inline uint64_t wl_rng_next(wl_rng_t *r) {
	uint64_t x = r->s;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	r->s = x;
	return x * 0x2545f4914f6cdd1dULL;
}

/* Order-sensitive, so a value read from the wrong object shows up. */
static inline uint64_t wl_mix(uint64_t cs, uint64_t v) {
	return (cs ^ v) * 0x100000001b3ULL + 0x9e37;
}

static inline void wl_put64(unsigned char *p, uint64_t v) {
	memcpy(p, &v, sizeof(v));
}

static inline uint64_t wl_get64(const unsigned char *p) {
	uint64_t v;
	memcpy(&v, p, sizeof(v));
	return v;
}

/* SCALE stretches the run; a tiny one still does one step. */
static uint64_t wl_scaled(double scale, uint64_t base) {
	double n = floor((double)base * scale + 0.5);
	if (n < 1.0)
		return 1;
	if (n > 1e12)           /* days; keeps products of counts in range */
		return (uint64_t)1e12;
	return (uint64_t)n;
}

/* The process's peak RSS in KiB (VmHWM), or 0 if unknown.  Read here
 * rather than from the runner's wait4: a child started by vfork+exec
 * inherits the runner's own high-water mark in ru_maxrss. */
static unsigned long wl_vmhwm_kb(void) {
	FILE *f = fopen("/proc/self/status", "r");
	if (f == NULL)
		return 0;
	char line[256];
	unsigned long kb = 0;
	while (fgets(line, sizeof(line), f) != NULL) {
		if (sscanf(line, "VmHWM: %lu kB", &kb) == 1)
			break;
	}
	fclose(f);
	return kb;
}

/* The process's file-backed and shared resident memory now (RssFile +
 * RssShmem), KiB, or 0 if unknown: pages of the program's and its
 * libraries' files, which the page cache shares with every process that
 * maps them.  Subtracted from VmHWM it bounds the peak of the memory the
 * process allocated itself from below (file-backed pages are rarely
 * dropped once mapped, so at the peak there were at most this many). */
static unsigned long wl_rss_file_kb(void) {
	FILE *f = fopen("/proc/self/status", "r");
	if (f == NULL)
		return 0;
	char line[256];
	unsigned long kb = 0, v;
	while (fgets(line, sizeof(line), f) != NULL) {
		if (sscanf(line, "RssFile: %lu kB", &v) == 1 ||
		    sscanf(line, "RssShmem: %lu kB", &v) == 1)
			kb += v;
	}
	fclose(f);
	return kb;
}

static void wl_print(const char *name, uint64_t cs) {
	printf("%s checksum=%016" PRIx64 " vmhwm_kb=%lu\n", name, cs,
	    wl_vmhwm_kb());
}

/* Thread start and join, dying on failure: a half-run benchmark is
 * worse than none. */
static void wl_spawn(pthread_t *t, void *(*fn)(void *), void *arg) {
	int err = pthread_create(t, NULL, fn, arg);
	if (err != 0)
		wl_die(1, "pthread_create: %s", strerror(err));
}

static void wl_join(pthread_t t) {
	int err = pthread_join(t, NULL);
	if (err != 0)
		wl_die(1, "pthread_join: %s", strerror(err));
}

static void wl_sleep_ms(unsigned ms) {
	struct timespec ts = {
		.tv_sec = ms / 1000,
		.tv_nsec = (long)(ms % 1000) * 1000000L,
	};
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/*
 * VmRSS in KiB, read with open/read into a stack buffer: stdio would
 * allocate, and the measurement should not move the heap it measures.
 */
static long wl_rss_kib(void) {
	char buf[4096];
	int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	size_t len = 0;
	for (;;) {
		ssize_t n = read(fd, buf + len, sizeof(buf) - 1 - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
		if (len == sizeof(buf) - 1)
			break;
	}
	close(fd);
	buf[len] = '\0';
	const char *line = strstr(buf, "\nVmRSS:");
	if (line == NULL)
		return -1;
	return strtol(line + strlen("\nVmRSS:"), NULL, 10);
}

/* ---- churn, scale: small objects replaced at random in a fixed set ---- */

#define WL_CHURN_SLOTS 1024
#define WL_CHURN_STEPS 60000000

/*
 * One step frees a random slot and refills it, so the live set stays at
 * 1024 objects while sizes keep changing: the allocator sees frees in no
 * particular order, which is what free lists and slabs must cope with.
 */
static uint64_t wl_churn_run(wl_rng_t *r, uint64_t steps) {
	unsigned char *slot[WL_CHURN_SLOTS] = { 0 };
	uint32_t size[WL_CHURN_SLOTS] = { 0 };
	uint64_t cs = 0;
	for (uint64_t i = 0; i < steps; i++) {
		uint64_t x = wl_rng_next(r);
		unsigned k = (unsigned)(x & (WL_CHURN_SLOTS - 1));
		unsigned char *p = slot[k];
		if (p != NULL) {
			cs = wl_mix(cs, wl_get64(p) ^
			    wl_get64(p + size[k] - 8));
			free(p);
		}
		/* The high bits of the same draw pick the size: a second
		 * draw would be the costliest thing in the loop after
		 * malloc and free. */
		uint32_t sz = 16 + (uint32_t)((x >> 32) % (512 - 16 + 1));
		p = wl_malloc(sz);
		wl_put64(p, x);
		wl_put64(p + sz - 8, i);
		slot[k] = p;
		size[k] = sz;
	}
	for (unsigned k = 0; k < WL_CHURN_SLOTS; k++) {
		if (slot[k] != NULL) {
			cs = wl_mix(cs, wl_get64(slot[k]) ^
			    wl_get64(slot[k] + size[k] - 8));
			free(slot[k]);
		}
	}
	return cs;
}

static void wl_churn(double scale) {
	wl_rng_t r;
	wl_rng_seed(&r, "churn", 0);
	wl_print("churn", wl_churn_run(&r, wl_scaled(scale,
	    WL_CHURN_STEPS)));
}

#define WL_SCALE_THREADS 4
/* Per thread; four threads share two cores. */
#define WL_SCALE_STEPS 25000000

struct wl_scale_arg {
	unsigned index;
	uint64_t steps;
	uint64_t cs;
};

static void *wl_scale_thread(void *p) {
	struct wl_scale_arg *a = p;
	wl_rng_t r;
	wl_rng_seed(&r, "scale", a->index);
	a->cs = wl_churn_run(&r, a->steps);
	return NULL;
}

static void wl_scale(double scale) {
	pthread_t t[WL_SCALE_THREADS];
	struct wl_scale_arg a[WL_SCALE_THREADS];
	for (unsigned i = 0; i < WL_SCALE_THREADS; i++) {
		a[i] = (struct wl_scale_arg){
			.index = i,
			.steps = wl_scaled(scale, WL_SCALE_STEPS),
		};
		wl_spawn(&t[i], wl_scale_thread, &a[i]);
	}
	uint64_t cs = 0;
	for (unsigned i = 0; i < WL_SCALE_THREADS; i++) {
		wl_join(t[i]);
		cs = wl_mix(cs, a[i].cs);
	}
	wl_print("scale", cs);
}

/* ---- logsizes: every size class from tiny to large ---- */

#define WL_LOG_SLOTS 4096
#define WL_LOG_STEPS 3500000

/*
 * Exponent first, then uniform within the power of two: each octave from
 * 8 B to 64 KiB gets the same share of allocations, so small, medium and
 * large classes are all exercised instead of the big sizes dominating.
 */
static void wl_logsizes(double scale) {
	unsigned char **slot = calloc(WL_LOG_SLOTS, sizeof(*slot));
	uint32_t *size = calloc(WL_LOG_SLOTS, sizeof(*size));
	if (slot == NULL || size == NULL)
		wl_oom();
	wl_rng_t r;
	wl_rng_seed(&r, "logsizes", 0);
	uint64_t steps = wl_scaled(scale, WL_LOG_STEPS);
	uint64_t cs = 0;
	for (uint64_t i = 0; i < steps; i++) {
		uint64_t x = wl_rng_next(&r);
		unsigned k = (unsigned)(x % WL_LOG_SLOTS);
		unsigned char *p = slot[k];
		if (p != NULL) {
			cs = wl_mix(cs, p[(x >> 16) % size[k]]);
			free(p);
		}
		unsigned e = 3 + (unsigned)((x >> 40) % 13);   /* 8 .. 32Ki */
		uint32_t sz = ((uint32_t)1 << e) +
		    (uint32_t)(wl_rng_next(&r) % (((uint32_t)1 << e) + 1));
		p = wl_malloc(sz);
		memset(p, (int)(i & 0xff), sz);
		slot[k] = p;
		size[k] = sz;
	}
	for (unsigned k = 0; k < WL_LOG_SLOTS; k++) {
		if (slot[k] != NULL) {
			cs = wl_mix(cs, slot[k][size[k] - 1]);
			free(slot[k]);
		}
	}
	free(slot);
	free(size);
	wl_print("logsizes", cs);
}

/* ---- prodcons: every free is remote ---- */

#define WL_PC_OBJECTS 16000000
#define WL_PC_RING 4096         /* pointers; a power of two */
#define WL_PC_BATCH 64          /* pointers published at once */
#define WL_PC_SPINS 128         /* polls before giving the core away */

/*
 * Single producer, single consumer.  Each side publishes its index once
 * per batch, not once per pointer, so the ring costs little next to
 * malloc and free.  The indices live on their own cache lines; each side
 * keeps a stale copy of the other's index and reloads it only when the
 * copy says the ring looks full (or empty).
 */
struct wl_pc_ring {
	alignas(WL_CACHELINE) _Atomic size_t head;      /* consumer's */
	alignas(WL_CACHELINE) _Atomic size_t tail;      /* producer's */
	alignas(WL_CACHELINE) unsigned char *slot[WL_PC_RING];
	uint64_t count;
	uint64_t cs_prod;
	uint64_t cs_cons;
};

/* Both threads may share one core with others (and valgrind runs one
 * thread at a time): poll a little, then yield rather than burn the
 * slice the other side needs. */
static void wl_pc_wait(unsigned *spins) {
	if (++*spins >= WL_PC_SPINS) {
		*spins = 0;
		sched_yield();
	}
}

static void *wl_pc_producer(void *arg) {
	struct wl_pc_ring *ring = arg;
	wl_rng_t r;
	wl_rng_seed(&r, "prodcons", 0);
	unsigned char *batch[WL_PC_BATCH];
	unsigned nbatch = 0;
	size_t tail = 0;
	size_t head_seen = 0;
	uint64_t cs = 0;
	for (uint64_t i = 0; i < ring->count; i++) {
		uint64_t x = wl_rng_next(&r);
		uint32_t sz = 16 + (uint32_t)(x % (256 - 16 + 1));
		unsigned char *p = wl_malloc(sz);
		/* The size travels in the object: the consumer needs it to
		 * find the tail word, and reading it proves the bytes made
		 * it across. */
		wl_put64(p, (i << 16) | sz);
		memset(p + 8, (int)(x >> 56), sz - 16);
		wl_put64(p + sz - 8, x);
		cs = wl_mix(cs, x);
		batch[nbatch++] = p;
		if (nbatch < WL_PC_BATCH && i + 1 < ring->count)
			continue;
		unsigned spins = 0;
		while (tail + nbatch - head_seen > WL_PC_RING) {
			head_seen = atomic_load_explicit(&ring->head,
			    memory_order_acquire);
			if (tail + nbatch - head_seen > WL_PC_RING)
				wl_pc_wait(&spins);
		}
		for (unsigned j = 0; j < nbatch; j++)
			ring->slot[(tail + j) & (WL_PC_RING - 1)] = batch[j];
		tail += nbatch;
		atomic_store_explicit(&ring->tail, tail, memory_order_release);
		nbatch = 0;
	}
	ring->cs_prod = cs;
	return NULL;
}

static void *wl_pc_consumer(void *arg) {
	struct wl_pc_ring *ring = arg;
	size_t head = 0;
	uint64_t cs = 0;
	unsigned spins = 0;
	while (head < ring->count) {
		size_t tail = atomic_load_explicit(&ring->tail,
		    memory_order_acquire);
		if (tail == head) {
			wl_pc_wait(&spins);
			continue;
		}
		spins = 0;
		for (; head != tail; head++) {
			unsigned char *p = ring->slot[head & (WL_PC_RING - 1)];
			uint64_t h = wl_get64(p);
			uint32_t sz = (uint32_t)(h & 0xffff);
			cs = wl_mix(cs, h ^ p[sz / 2] ^ wl_get64(p + sz - 8));
			free(p);
		}
		/* Freed already: the slots are the producer's again. */
		atomic_store_explicit(&ring->head, head, memory_order_release);
	}
	ring->cs_cons = cs;
	return NULL;
}

static void wl_prodcons(double scale) {
	struct wl_pc_ring *ring = aligned_alloc(WL_CACHELINE, sizeof(*ring));
	if (ring == NULL)
		wl_oom();
	memset(ring, 0, sizeof(*ring));
	atomic_init(&ring->head, 0);
	atomic_init(&ring->tail, 0);
	ring->count = wl_scaled(scale, WL_PC_OBJECTS);
	pthread_t prod, cons;
	wl_spawn(&cons, wl_pc_consumer, ring);
	wl_spawn(&prod, wl_pc_producer, ring);
	wl_join(prod);
	wl_join(cons);
	wl_print("prodcons", wl_mix(ring->cs_prod, ring->cs_cons));
	free(ring);
}

/* ---- larson: objects bleed from thread to thread ---- */

#define WL_LARSON_THREADS 4
#define WL_LARSON_SLOTS 1000
#define WL_LARSON_PER_ROUND 10000       /* replacements per thread */
#define WL_LARSON_ROUNDS 1000

struct wl_larson_set {
	unsigned char *p[WL_LARSON_SLOTS];
	uint32_t size[WL_LARSON_SLOTS];
};

struct wl_larson {
	pthread_barrier_t barrier;
	uint64_t rounds;
	struct wl_larson_set set[WL_LARSON_THREADS];
};

struct wl_larson_arg {
	struct wl_larson *l;
	unsigned index;
	uint64_t cs;
};

static unsigned char *wl_larson_new(wl_rng_t *r, uint32_t *sizep) {
	uint64_t x = wl_rng_next(r);
	uint32_t sz = 8 + (uint32_t)(x % (1000 - 8 + 1));
	unsigned char *p = wl_malloc(sz);
	wl_put64(p, x);
	p[sz - 1] = (unsigned char)(x >> 56);
	*sizep = sz;
	return p;
}

static uint64_t wl_larson_read(const unsigned char *p, uint32_t sz) {
	return wl_get64(p) ^ ((uint64_t)p[sz - 1] << 8) ^ sz;
}

/*
 * In round n thread t works on set (t + n) mod 4, which is the set its
 * neighbour worked on in round n - 1: handing whole sets along a ring at
 * each barrier means most frees hit objects another thread allocated, as
 * in a server whose requests migrate between workers.  Each set sees one
 * thread at a time and each thread draws from its own stream, so the
 * checksum does not depend on the schedule.
 */
static void *wl_larson_thread(void *arg) {
	struct wl_larson_arg *a = arg;
	struct wl_larson *l = a->l;
	wl_rng_t r;
	wl_rng_seed(&r, "larson", a->index);
	uint64_t cs = 0;
	struct wl_larson_set *s = &l->set[a->index];
	for (unsigned k = 0; k < WL_LARSON_SLOTS; k++)
		s->p[k] = wl_larson_new(&r, &s->size[k]);
	pthread_barrier_wait(&l->barrier);
	for (uint64_t n = 0; n < l->rounds; n++) {
		s = &l->set[(a->index + n) % WL_LARSON_THREADS];
		for (unsigned i = 0; i < WL_LARSON_PER_ROUND; i++) {
			unsigned k = (unsigned)(wl_rng_next(&r) %
			    WL_LARSON_SLOTS);
			cs = wl_mix(cs, wl_larson_read(s->p[k], s->size[k]));
			free(s->p[k]);
			s->p[k] = wl_larson_new(&r, &s->size[k]);
		}
		pthread_barrier_wait(&l->barrier);
	}
	s = &l->set[(a->index + l->rounds) % WL_LARSON_THREADS];
	for (unsigned k = 0; k < WL_LARSON_SLOTS; k++) {
		cs = wl_mix(cs, wl_larson_read(s->p[k], s->size[k]));
		free(s->p[k]);
	}
	a->cs = cs;
	return NULL;
}

static void wl_larson(double scale) {
	struct wl_larson *l = wl_malloc(sizeof(*l));
	l->rounds = wl_scaled(scale, WL_LARSON_ROUNDS);
	int err = pthread_barrier_init(&l->barrier, NULL, WL_LARSON_THREADS);
	if (err != 0)
		wl_die(1, "pthread_barrier_init: %s", strerror(err));
	pthread_t t[WL_LARSON_THREADS];
	struct wl_larson_arg a[WL_LARSON_THREADS];
	for (unsigned i = 0; i < WL_LARSON_THREADS; i++) {
		a[i] = (struct wl_larson_arg){ .l = l, .index = i };
		wl_spawn(&t[i], wl_larson_thread, &a[i]);
	}
	uint64_t cs = 0;
	for (unsigned i = 0; i < WL_LARSON_THREADS; i++) {
		wl_join(t[i]);
		cs = wl_mix(cs, a[i].cs);
	}
	pthread_barrier_destroy(&l->barrier);
	free(l);
	wl_print("larson", cs);
}

/* ---- falseshare: passive false sharing (cache-scratch) ---- */

#define WL_FS_THREADS 4
#define WL_FS_SIZE 8
#define WL_FS_ITERS 300000      /* per thread */
/* Read-modify-write, not plain stores: the store buffer merges
 * repeated stores to a line and hides the sharing (a 1.3x effect on the
 * 2-core test machine against 6x for increments). */
#define WL_FS_WRITES 1000

struct wl_fs_arg {
	unsigned char *given;
	uint64_t iters;
	uint64_t cs;
};

/*
 * The main thread allocated the first object of every worker back to
 * back, so they share cache lines.  An allocator that lets a worker's
 * free put that object into the worker's own cache hands the same block
 * back at the next malloc, and from then on the workers' stores fight over
 * one line: nobody shares data, the allocator made them share lines.
 */
static void *wl_fs_thread(void *arg) {
	struct wl_fs_arg *a = arg;
	uint64_t cs = wl_get64(a->given);
	free(a->given);
	for (uint64_t i = 0; i < a->iters; i++) {
		volatile unsigned char *p = wl_malloc(WL_FS_SIZE);
		for (unsigned k = 0; k < WL_FS_SIZE; k++)
			p[k] = (unsigned char)(i + k);
		for (unsigned j = 0; j < WL_FS_WRITES; j++)
			p[j % WL_FS_SIZE]++;
		cs = wl_mix(cs, p[0] ^ ((uint64_t)p[WL_FS_SIZE - 1] << 8));
		free((void *)p);
	}
	a->cs = cs;
	return NULL;
}

static void wl_falseshare(double scale) {
	pthread_t t[WL_FS_THREADS];
	struct wl_fs_arg a[WL_FS_THREADS];
	for (unsigned i = 0; i < WL_FS_THREADS; i++) {
		a[i] = (struct wl_fs_arg){
			.given = wl_malloc(WL_FS_SIZE),
			.iters = wl_scaled(scale, WL_FS_ITERS),
		};
		wl_put64(a[i].given, 0x5a5a5a5a00000000ULL | i);
	}
	for (unsigned i = 0; i < WL_FS_THREADS; i++)
		wl_spawn(&t[i], wl_fs_thread, &a[i]);
	uint64_t cs = 0;
	for (unsigned i = 0; i < WL_FS_THREADS; i++) {
		wl_join(t[i]);
		cs = wl_mix(cs, a[i].cs);
	}
	wl_print("falseshare", cs);
}

/* ---- threadchurn: short-lived threads that leave an object behind ---- */

#define WL_TC_THREADS 4
#define WL_TC_ROUNDS 1500
#define WL_TC_OBJECTS 4000      /* per thread and round */
#define WL_TC_KEEP_SIZE 128

struct wl_tc_arg {
	unsigned char **keep;   /* where to leave the survivor */
	uint64_t index;
	uint64_t cs;
};

/*
 * The survivor is allocated halfway through, among the objects that are
 * freed, so it pins memory of the exiting thread's cache: the allocator
 * must recycle what a dead thread owned while one object of it is still
 * live, and take that object back from another thread at the end.
 */
static void *wl_tc_thread(void *arg) {
	struct wl_tc_arg *a = arg;
	unsigned char *obj[WL_TC_OBJECTS];
	uint32_t size[WL_TC_OBJECTS];
	wl_rng_t r;
	wl_rng_seed(&r, "threadchurn", a->index);
	uint64_t cs = 0;
	for (unsigned i = 0; i < WL_TC_OBJECTS; i++) {
		if (i == WL_TC_OBJECTS / 2) {
			unsigned char *k = wl_malloc(WL_TC_KEEP_SIZE);
			memset(k, (int)(a->index & 0xff), WL_TC_KEEP_SIZE);
			wl_put64(k, a->index);
			*a->keep = k;
		}
		uint64_t x = wl_rng_next(&r);
		uint32_t sz = 16 + (uint32_t)(x % (256 - 16 + 1));
		obj[i] = wl_malloc(sz);
		wl_put64(obj[i], x);
		wl_put64(obj[i] + sz - 8, i);
		size[i] = sz;
	}
	for (unsigned i = 0; i < WL_TC_OBJECTS; i++) {
		cs = wl_mix(cs, wl_get64(obj[i]) ^
		    wl_get64(obj[i] + size[i] - 8));
		free(obj[i]);
	}
	a->cs = cs;
	return NULL;
}

static void wl_threadchurn(double scale) {
	uint64_t rounds = wl_scaled(scale, WL_TC_ROUNDS);
	unsigned char **keep = calloc(rounds * WL_TC_THREADS, sizeof(*keep));
	if (keep == NULL)
		wl_oom();
	uint64_t cs = 0;
	for (uint64_t n = 0; n < rounds; n++) {
		pthread_t t[WL_TC_THREADS];
		struct wl_tc_arg a[WL_TC_THREADS];
		for (unsigned i = 0; i < WL_TC_THREADS; i++) {
			uint64_t idx = n * WL_TC_THREADS + i;
			a[i] = (struct wl_tc_arg){
				.keep = &keep[idx],
				.index = idx,
			};
			wl_spawn(&t[i], wl_tc_thread, &a[i]);
		}
		for (unsigned i = 0; i < WL_TC_THREADS; i++) {
			wl_join(t[i]);
			cs = wl_mix(cs, a[i].cs);
		}
	}
	for (uint64_t i = 0; i < rounds * WL_TC_THREADS; i++) {
		cs = wl_mix(cs, wl_get64(keep[i]) ^
		    keep[i][WL_TC_KEEP_SIZE - 1]);
		free(keep[i]);
	}
	free(keep);
	wl_print("threadchurn", cs);
}

/* ---- realloc: buffers that grow a little at a time ---- */

#define WL_RA_BUFS 256
#define WL_RA_STEPS 5000000

struct wl_ra_buf {
	unsigned char *p;
	uint32_t size;
	uint32_t cap;
};

/*
 * Caps are log-uniform from 1 KiB to 256 KiB, like the strings and arrays
 * real programs grow: most stay small, a few get big.  Small steps test
 * in-place growth within a size class; the occasional doubling jumps
 * classes and, for big buffers, tests whether the allocator can grow
 * without copying.  256 buffers grown in random order keep neighbours in
 * each other's way.
 */
static void wl_realloc(double scale) {
	struct wl_ra_buf *b = calloc(WL_RA_BUFS, sizeof(*b));
	if (b == NULL)
		wl_oom();
	wl_rng_t r;
	wl_rng_seed(&r, "realloc", 0);
	uint64_t steps = wl_scaled(scale, WL_RA_STEPS);
	uint64_t cs = 0;
	for (uint64_t i = 0; i < steps; i++) {
		uint64_t x = wl_rng_next(&r);
		struct wl_ra_buf *bf = &b[x % WL_RA_BUFS];
		if (bf->p == NULL) {
			unsigned e = 10 + (unsigned)((x >> 32) % 8);
			bf->cap = ((uint32_t)1 << e) + (uint32_t)((x >> 40) %
			    (((uint32_t)1 << e) + 1));
			if (bf->cap > 256 * WL_KIB)
				bf->cap = 256 * WL_KIB;
			bf->size = 8;
			bf->p = wl_malloc(bf->size);
			wl_put64(bf->p, x);
			continue;
		}
		if (bf->size >= bf->cap) {
			cs = wl_mix(cs, wl_get64(bf->p) ^
			    bf->p[bf->size / 2] ^
			    ((uint64_t)bf->p[bf->size - 1] << 8));
			free(bf->p);
			bf->p = NULL;
			continue;
		}
		uint32_t old = bf->size;
		uint32_t sz;
		if ((x >> 24) % 64 == 0)
			sz = old * 2;
		else
			sz = old + 1 + (uint32_t)((x >> 32) % 64);
		if (sz > bf->cap)
			sz = bf->cap;
		unsigned char *p = realloc(bf->p, sz);
		if (p == NULL)
			wl_oom();
		/* The last old byte must have come along. */
		cs = wl_mix(cs, p[old - 1]);
		memset(p + old, (int)(x >> 56), sz - old);
		bf->p = p;
		bf->size = sz;
	}
	for (unsigned k = 0; k < WL_RA_BUFS; k++) {
		if (b[k].p != NULL) {
			cs = wl_mix(cs, wl_get64(b[k].p) ^
			    b[k].p[b[k].size - 1]);
			free(b[k].p);
		}
	}
	free(b);
	wl_print("realloc", cs);
}

/* ---- reallocgrow: vectors grown by doubling, then freed at random ---- */

#define WL_RG_VECS 5000
#define WL_RG_ROUNDS 24
#define WL_RG_FIRST 16
#define WL_RG_LG_MIN 8          /* final sizes 256 B .. */
#define WL_RG_LG_MAX 15         /* .. 32 KiB */
#define WL_RG_STRIDE 256        /* bytes between writes */

/*
 * What a vector's push_back does to the heap: start at 16 bytes, double
 * the capacity with realloc whenever it is full, then write the new
 * bytes, one every 256 as in midsize (and the last one), so that the
 * pages are the program's but the allocator's share of the time shows.
 * Final sizes are log-uniform from 256 B to 32 KiB, so each realloc
 * crosses size classes, small and large, and the copy it makes is all of
 * what the vector holds.  5,000 vectors are built one after another and
 * live together, then freed in random order (a Fisher-Yates shuffle), so
 * that each round's vectors find the heap the last round left behind.
 */
static void wl_reallocgrow(double scale) {
	unsigned char **v = calloc(WL_RG_VECS, sizeof(*v));
	uint32_t *size = calloc(WL_RG_VECS, sizeof(*size));
	uint32_t *order = calloc(WL_RG_VECS, sizeof(*order));
	if (v == NULL || size == NULL || order == NULL)
		wl_oom();
	wl_rng_t r;
	wl_rng_seed(&r, "reallocgrow", 0);
	uint64_t rounds = wl_scaled(scale, WL_RG_ROUNDS);
	uint64_t cs = 0;
	for (uint64_t n = 0; n < rounds; n++) {
		for (unsigned k = 0; k < WL_RG_VECS; k++) {
			uint64_t x = wl_rng_next(&r);
			double lg = WL_RG_LG_MIN + (double)(x >> 11) *
			    0x1.0p-53 * (WL_RG_LG_MAX - WL_RG_LG_MIN);
			uint32_t final = (uint32_t)exp2(lg);
			uint32_t cap = WL_RG_FIRST, len = 0;
			unsigned char *p = wl_malloc(cap);
			while (len < final) {
				if (len == cap) {
					cap *= 2;
					p = realloc(p, cap);
					if (p == NULL)
						wl_oom();
					/* The last byte written must have
					 * come along. */
					cs = wl_mix(cs, p[len - 1]);
				}
				uint32_t end = cap < final ? cap : final;
				for (uint32_t off = len; off < end;
				    off += WL_RG_STRIDE)
					p[off] = (unsigned char)((x >> 56) +
					    off / WL_RG_STRIDE);
				p[end - 1] = (unsigned char)(x >> 48);
				len = end;
			}
			v[k] = p;
			size[k] = final;
			order[k] = k;
		}
		for (unsigned k = WL_RG_VECS - 1; k > 0; k--) {
			unsigned j = (unsigned)(wl_rng_next(&r) % (k + 1));
			uint32_t t = order[k];
			order[k] = order[j];
			order[j] = t;
		}
		for (unsigned k = 0; k < WL_RG_VECS; k++) {
			unsigned i = order[k];
			cs = wl_mix(cs, v[i][0] ^ ((uint64_t)v[i][size[i] -
			    1] << 8));
			free(v[i]);
		}
	}
	free(v);
	free(size);
	free(order);
	wl_print("reallocgrow", cs);
}

/* ---- midsize: log-uniform sizes up to 64 KiB, a large live set ---- */

#define WL_MID_SLOTS 20000
#define WL_MID_STEPS 6000000
#define WL_MID_LG_MIN 3         /* 8 B .. */
#define WL_MID_LG_MAX 16        /* .. 64 KiB */
#define WL_MID_STRIDE 256

/*
 * Sizes log-uniform from 8 B to 64 KiB, 20,000 live (about 150 MiB), a
 * random one replaced at each step.  Half the allocations are of 1 KiB or
 * more and a quarter of 8 KiB or more: the classes at and past the end of
 * the small ones, which a thread cache may not hold, get as many calls as
 * the tiny ones.  Each block is written every 256 bytes, as a program
 * filling a buffer would touch its pages and lines, and read back at
 * random before it is freed.
 */
static void wl_midsize(double scale) {
	unsigned char **slot = calloc(WL_MID_SLOTS, sizeof(*slot));
	uint32_t *size = calloc(WL_MID_SLOTS, sizeof(*size));
	if (slot == NULL || size == NULL)
		wl_oom();
	wl_rng_t r;
	wl_rng_seed(&r, "midsize", 0);
	uint64_t steps = wl_scaled(scale, WL_MID_STEPS);
	uint64_t cs = 0;
	for (uint64_t i = 0; i < steps; i++) {
		uint64_t x = wl_rng_next(&r);
		unsigned k = (unsigned)(x % WL_MID_SLOTS);
		unsigned char *p = slot[k];
		if (p != NULL) {
			uint32_t off = (uint32_t)(x >> 24) % size[k];
			cs = wl_mix(cs, p[off - off % WL_MID_STRIDE] ^
			    ((uint64_t)p[size[k] - 1] << 8));
			free(p);
		}
		double lg = WL_MID_LG_MIN + (double)(wl_rng_next(&r) >> 11) *
		    0x1.0p-53 * (WL_MID_LG_MAX - WL_MID_LG_MIN);
		uint32_t sz = (uint32_t)exp2(lg);
		p = wl_malloc(sz);
		for (uint32_t off = 0; off < sz; off += WL_MID_STRIDE)
			p[off] = (unsigned char)(i + off / WL_MID_STRIDE);
		p[sz - 1] = (unsigned char)(x >> 56);
		slot[k] = p;
		size[k] = sz;
	}
	for (unsigned k = 0; k < WL_MID_SLOTS; k++) {
		if (slot[k] != NULL) {
			cs = wl_mix(cs, slot[k][0] ^ slot[k][size[k] - 1]);
			free(slot[k]);
		}
	}
	free(slot);
	free(size);
	wl_print("midsize", cs);
}

/* ---- large: blocks of megabytes ---- */

#define WL_LARGE_RING 8
#define WL_LARGE_ALLOCS 550
#define WL_PAGE 4096

/*
 * Touching one byte per page makes the kernel supply every page, so the
 * cost of fresh (faulting) memory against reused memory shows, which is
 * what separates allocators at these sizes: whether they keep freed blocks
 * mapped, and for how long.
 */
static void wl_large(double scale) {
	unsigned char *ring[WL_LARGE_RING] = { 0 };
	size_t size[WL_LARGE_RING] = { 0 };
	wl_rng_t r;
	wl_rng_seed(&r, "large", 0);
	uint64_t allocs = wl_scaled(scale, WL_LARGE_ALLOCS);
	uint64_t cs = 0;
	for (uint64_t i = 0; i < allocs + WL_LARGE_RING; i++) {
		unsigned k = (unsigned)(i % WL_LARGE_RING);
		unsigned char *p = ring[k];
		if (p != NULL) {
			uint64_t sum = 0;
			for (size_t off = 0; off < size[k]; off += WL_PAGE)
				sum += p[off];
			cs = wl_mix(cs, sum ^ ((uint64_t)p[size[k] - 1] << 32));
			free(p);
			ring[k] = NULL;
		}
		if (i >= allocs)
			continue;       /* draining the ring */
		uint64_t x = wl_rng_next(&r);
		size_t sz = WL_MIB + (size_t)(x % (31 * WL_MIB + 1));
		p = wl_malloc(sz);
		for (size_t off = 0; off < sz; off += WL_PAGE)
			p[off] = (unsigned char)(off / WL_PAGE + i);
		p[sz - 1] = (unsigned char)(x >> 56);
		ring[k] = p;
		size[k] = sz;
	}
	wl_print("large", cs);
}

/* ---- largezero: zeroed blocks of megabytes, a few at a time ---- */

#define WL_LZ_SLOTS 20
#define WL_LZ_ALLOCS 2000
#define WL_LZ_MIN ((size_t)5 * WL_MIB)
#define WL_LZ_SPAN ((size_t)20 * WL_MIB)

/*
 * calloc'd blocks of 5-25 MiB, at most 20 live, a random one freed before
 * each new one: the live set wanders around 300 MiB while the sizes keep
 * changing.  One byte per page is written, as in large, so every page is
 * resident while its block lives; the byte after it is read back as the
 * zero calloc promised (it feeds the checksum).  What separates
 * allocators here is what happens to a freed block: kept resident, it
 * serves the next calloc with a memset instead of a page fault per page,
 * but every block kept adds to the peak RSS.  live_peak_kb is the most the
 * program held at once, the floor for vmhwm_kb.
 */
static void wl_largezero(double scale) {
	unsigned char *slot[WL_LZ_SLOTS] = { 0 };
	size_t size[WL_LZ_SLOTS] = { 0 };
	wl_rng_t r;
	wl_rng_seed(&r, "largezero", 0);
	uint64_t allocs = wl_scaled(scale, WL_LZ_ALLOCS);
	uint64_t cs = 0;
	size_t live = 0, live_peak = 0;
	for (uint64_t i = 0; i < allocs + WL_LZ_SLOTS; i++) {
		uint64_t x = wl_rng_next(&r);
		/* Fill the slots in order, then replace at random; the
		 * last WL_LZ_SLOTS steps free what is left. */
		unsigned k = i < WL_LZ_SLOTS ? (unsigned)i :
		    (unsigned)(x % WL_LZ_SLOTS);
		if (i >= allocs)
			k = (unsigned)(i - allocs);
		unsigned char *p = slot[k];
		if (p != NULL) {
			uint64_t sum = 0;
			for (size_t off = 0; off + 1 < size[k]; off += WL_PAGE)
				sum += p[off] + ((uint64_t)p[off + 1] << 8);
			cs = wl_mix(cs, sum);
			free(p);
			live -= size[k];
			slot[k] = NULL;
		}
		if (i >= allocs)
			continue;       /* draining the slots */
		size_t sz = WL_LZ_MIN + (size_t)((x >> 8) % (WL_LZ_SPAN + 1));
		p = calloc(1, sz);
		if (p == NULL)
			wl_oom();
		uint64_t nonzero = 0;
		for (size_t off = 0; off + 1 < sz; off += WL_PAGE) {
			p[off] = (unsigned char)(off / WL_PAGE + i) | 1;
			nonzero |= p[off + 1];
		}
		cs = wl_mix(cs, nonzero ^ p[sz - 1]);
		slot[k] = p;
		size[k] = sz;
		live += sz;
		if (live > live_peak)
			live_peak = live;
	}
	printf("largezero checksum=%016" PRIx64 " vmhwm_kb=%lu "
	    "live_peak_kb=%zu\n", cs, wl_vmhwm_kb(), live_peak / 1024);
}

/* ---- simple: glibc's single-thread malloc/free benchmark ---- */

#define WL_SIMPLE_MAX 1600
#define WL_SIMPLE_PAIRS 1000000        /* per size and batch length */

/*
 * The shape of glibc's bench-malloc-simple: a tight loop allocating a batch
 * of blocks of one small size and freeing them in the same order, for
 * batches of 25, 100, 400 and 1600 blocks of 16, 64 and 256 bytes.  Each
 * (size, batch) pair gets the same number of malloc+free pairs.  Nothing
 * but the allocator runs between the calls: the per-call cost of the fast
 * paths, and how the bins handle a batch longer than they hold, is all
 * there is to measure.
 */
static void wl_simple(double scale) {
	static const uint32_t sizes[] = { 16, 64, 256 };
	static const unsigned batches[] = { 25, 100, 400, WL_SIMPLE_MAX };
	static unsigned char *a[WL_SIMPLE_MAX];
	uint64_t pairs = wl_scaled(scale, WL_SIMPLE_PAIRS);
	uint64_t cs = 0;
	for (unsigned s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		uint32_t sz = sizes[s];
		for (unsigned b = 0; b < sizeof(batches) / sizeof(batches[0]);
		    b++) {
			unsigned n = batches[b];
			uint64_t rounds = (pairs + n - 1) / n;
			for (uint64_t i = 0; i < rounds; i++) {
				for (unsigned j = 0; j < n; j++) {
					a[j] = wl_malloc(sz);
					a[j][0] = (unsigned char)(i + j);
				}
				for (unsigned j = 0; j < n; j++) {
					cs += a[j][0];
					free(a[j]);
				}
			}
			cs = wl_mix(cs, sz * 4096 + n);
		}
	}
	wl_print("simple", cs);
}

/* ---- alloctest: many threads, random small sizes, freed where made ---- */

#define WL_AT_THREADS 8
#define WL_AT_SLOTS 4096
#define WL_AT_STEPS 4000000     /* per thread */

struct wl_at_arg {
	unsigned index;
	uint64_t steps;
	uint64_t cs;
};

/*
 * The shape of alloc-test: every thread keeps its own working set and
 * replaces a random member at each step, so every free is local.  Sizes
 * are skewed towards the small end as in programs (8-64 B in 56 draws of
 * 64, 8 B-1 KiB in 7, 8 B-4 KiB in 1).  Eight threads on two cores: the
 * caches of the threads not running sit idle, which per-thread caches pay
 * for in memory.
 */
static void *wl_at_thread(void *arg) {
	struct wl_at_arg *a = arg;
	wl_rng_t r;
	wl_rng_seed(&r, "alloctest", a->index);
	unsigned char **slot = calloc(WL_AT_SLOTS, sizeof(*slot));
	uint32_t *size = calloc(WL_AT_SLOTS, sizeof(*size));
	if (slot == NULL || size == NULL)
		wl_oom();
	uint64_t cs = 0;
	for (uint64_t i = 0; i < a->steps; i++) {
		uint64_t x = wl_rng_next(&r);
		unsigned k = (unsigned)(x % WL_AT_SLOTS);
		if (slot[k] != NULL) {
			cs = wl_mix(cs, wl_get64(slot[k]) ^ slot[k][size[k] - 1]);
			free(slot[k]);
		}
		unsigned pick = (unsigned)(x >> 58);    /* 0..63 */
		uint64_t y = x >> 20;
		uint32_t sz = pick == 0 ? 8 + (uint32_t)(y % (4096 - 8 + 1)) :
		    pick < 8 ? 8 + (uint32_t)(y % (1024 - 8 + 1)) :
		    8 + (uint32_t)(y % (64 - 8 + 1));
		unsigned char *p = wl_malloc(sz);
		wl_put64(p, x);
		p[sz - 1] = (unsigned char)i;
		slot[k] = p;
		size[k] = sz;
	}
	for (unsigned k = 0; k < WL_AT_SLOTS; k++) {
		if (slot[k] != NULL) {
			cs = wl_mix(cs, wl_get64(slot[k]) ^ slot[k][size[k] - 1]);
			free(slot[k]);
		}
	}
	free(slot);
	free(size);
	a->cs = cs;
	return NULL;
}

static void wl_alloctest(double scale) {
	pthread_t t[WL_AT_THREADS];
	struct wl_at_arg a[WL_AT_THREADS];
	for (unsigned i = 0; i < WL_AT_THREADS; i++) {
		a[i] = (struct wl_at_arg){
			.index = i,
			.steps = wl_scaled(scale, WL_AT_STEPS),
		};
		wl_spawn(&t[i], wl_at_thread, &a[i]);
	}
	uint64_t cs = 0;
	for (unsigned i = 0; i < WL_AT_THREADS; i++) {
		wl_join(t[i]);
		cs = wl_mix(cs, a[i].cs);
	}
	wl_print("alloctest", cs);
}

/* ---- xthread: rpmalloc's cross-thread test ---- */

#define WL_XT_SLOTS 1000
#define WL_XT_OPS 100
#define WL_XT_CROSS_RATE 2
#define WL_XT_LOOPS 5000
#define WL_XT_MIN 8
#define WL_XT_MAX 16000

struct wl_xt {
	_Atomic unsigned arrived;
	_Atomic unsigned generation;
	uint64_t loops;
	/* out[t][n & 1]: the blocks thread t allocated in loop n for the
	 * other thread to free. */
	unsigned char *out[2][2][WL_XT_OPS];
	uint32_t size[2][2][WL_XT_OPS];
};

struct wl_xt_arg {
	struct wl_xt *x;
	unsigned index;
	uint64_t cs;
};

/* Sizes with a linear falloff (rpmalloc-benchmark's distribution 1): the
 * density falls from its highest at 8 B to nothing at 16,000 B, a mean
 * near 5.3 KB. */
static unsigned char *wl_xt_new(wl_rng_t *r, uint32_t *sizep) {
	uint64_t v = wl_rng_next(r);
	double u = (double)(v >> 11) * (1.0 / 9007199254740992.0);
	uint32_t sz = WL_XT_MIN + (uint32_t)((WL_XT_MAX - WL_XT_MIN) *
	    (1.0 - sqrt(u)));
	unsigned char *p = wl_malloc(sz);
	wl_put64(p, v);
	p[sz - 1] = (unsigned char)(v >> 56);
	*sizep = sz;
	return p;
}

static uint64_t wl_xt_read(const unsigned char *p, uint32_t sz) {
	return wl_get64(p) ^ ((uint64_t)p[sz - 1] << 8) ^ sz;
}

/* The two threads meet once a loop: polling, then yielding (as prodcons
 * waits), because a futex sleep and wake-up per loop would cost more than
 * the loop's allocations and make the time the scheduler's. */
static void wl_xt_meet(struct wl_xt *x) {
	unsigned gen = atomic_load_explicit(&x->generation,
	    memory_order_acquire);
	if (atomic_fetch_add_explicit(&x->arrived, 1,
	    memory_order_acq_rel) == 1) {
		atomic_store_explicit(&x->arrived, 0, memory_order_relaxed);
		atomic_store_explicit(&x->generation, gen + 1,
		    memory_order_release);
		return;
	}
	unsigned spins = 0;
	while (atomic_load_explicit(&x->generation,
	    memory_order_acquire) == gen)
		wl_pc_wait(&spins);
}

/*
 * The shape of rpmalloc-benchmark with 2 threads, random sizes from 8 to
 * 16,000 B, 1,000 blocks, 100 operations and a cross-thread rate of 2
 * (mimalloc-bench's rptest): each thread keeps a set of 1,000 blocks and
 * in every loop frees 100 of them at random and allocates 100 in their
 * place; every second loop it also allocates 100 blocks for the other
 * thread, which frees them after the two have met at the loop's end.  The
 * foreign batch of loop n is refilled at loop n + 2, after a meeting the
 * freeing thread reached only once done with it.  The freeing thread reads what
 * the allocating thread wrote, so the checksum depends on values only.
 */
static void *wl_xt_thread(void *arg) {
	struct wl_xt_arg *a = arg;
	struct wl_xt *x = a->x;
	unsigned me = a->index, other = 1 - a->index;
	wl_rng_t r;
	wl_rng_seed(&r, "xthread", me);
	unsigned char **set = calloc(WL_XT_SLOTS, sizeof(*set));
	uint32_t *ssize = calloc(WL_XT_SLOTS, sizeof(*ssize));
	if (set == NULL || ssize == NULL)
		wl_oom();
	for (unsigned k = 0; k < WL_XT_SLOTS; k++)
		set[k] = wl_xt_new(&r, &ssize[k]);
	uint64_t cs = 0;
	for (uint64_t n = 0; n < x->loops; n++) {
		unsigned k[WL_XT_OPS];
		for (unsigned i = 0; i < WL_XT_OPS; i++) {
			k[i] = (unsigned)(wl_rng_next(&r) % WL_XT_SLOTS);
			if (set[k[i]] != NULL) {
				cs = wl_mix(cs, wl_xt_read(set[k[i]],
				    ssize[k[i]]));
				free(set[k[i]]);
				set[k[i]] = NULL;
			}
		}
		for (unsigned i = 0; i < WL_XT_OPS; i++) {
			if (set[k[i]] == NULL)
				set[k[i]] = wl_xt_new(&r, &ssize[k[i]]);
		}
		bool cross = n % WL_XT_CROSS_RATE == 0;
		if (cross) {
			unsigned char **out = x->out[me][n & 1];
			uint32_t *size = x->size[me][n & 1];
			for (unsigned i = 0; i < WL_XT_OPS; i++)
				out[i] = wl_xt_new(&r, &size[i]);
		}
		wl_xt_meet(x);
		if (cross) {
			unsigned char **in = x->out[other][n & 1];
			uint32_t *isize = x->size[other][n & 1];
			for (unsigned i = 0; i < WL_XT_OPS; i++) {
				cs = wl_mix(cs, wl_xt_read(in[i], isize[i]));
				free(in[i]);
			}
		}
	}
	for (unsigned k = 0; k < WL_XT_SLOTS; k++) {
		if (set[k] == NULL)
			continue;
		cs = wl_mix(cs, wl_xt_read(set[k], ssize[k]));
		free(set[k]);
	}
	free(set);
	free(ssize);
	a->cs = cs;
	return NULL;
}

static void wl_xthread(double scale) {
	struct wl_xt *x = wl_malloc(sizeof(*x));
	x->loops = wl_scaled(scale, WL_XT_LOOPS);
	atomic_init(&x->arrived, 0);
	atomic_init(&x->generation, 0);
	pthread_t t[2];
	struct wl_xt_arg a[2];
	for (unsigned i = 0; i < 2; i++) {
		a[i] = (struct wl_xt_arg){ .x = x, .index = i };
		wl_spawn(&t[i], wl_xt_thread, &a[i]);
	}
	wl_join(t[0]);
	wl_join(t[1]);
	free(x);
	wl_print("xthread", wl_mix(a[0].cs, a[1].cs));
}

/* ---- frag: how much memory comes back after a mass free ---- */

#define WL_FRAG_FILL ((size_t)200 * WL_MIB)
#define WL_FRAG_LARGE ((size_t)64 * WL_MIB)
#define WL_FRAG_DECAY_MS 1500
#define WL_FRAG_TICK_MS 50

static void *wl_map(size_t len) {
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
	    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		wl_oom();
	return p;
}

static unsigned wl_decay_ms(void) {
	const char *s = getenv("MPBENCH_DECAY_MS");
	if (s == NULL || *s == '\0')
		return WL_FRAG_DECAY_MS;
	char *end;
	errno = 0;
	unsigned long v = strtoul(s, &end, 10);
	if (errno != 0 || *end != '\0' || *s == '-' || v > 3600000)
		wl_die(2, "invalid MPBENCH_DECAY_MS \"%s\"", s);
	return (unsigned)v;
}

/*
 * Fill the heap with small objects, free a random 90% of them and see
 * what the allocator gives back: the survivors are scattered over every
 * page, so only an allocator that purges free runs inside partly used
 * slabs, or decays them, shrinks.  The large blocks in between ask whether
 * the freed small-object memory can serve other sizes.  The sleep with a
 * trickle of allocations lets time-based decay run; many allocators only
 * look at the clock when called.  SCALE does not apply: the sizes are the
 * point and the sleep is set from the environment.
 */
static void wl_frag(double scale) {
	(void)scale;
	size_t max = WL_FRAG_FILL / 16;
	/* mmap, not malloc: the bookkeeping should not be part of the heap
	 * being measured (its RSS is the same under every allocator). */
	unsigned char **obj = wl_map(max * sizeof(*obj));
	uint16_t *size = wl_map(max * sizeof(*size));
	wl_rng_t r;
	wl_rng_seed(&r, "frag", 0);
	uint64_t cs = 0;
	size_t n = 0;
	for (size_t total = 0; total < WL_FRAG_FILL; n++) {
		uint64_t x = wl_rng_next(&r);
		uint16_t sz = (uint16_t)(16 + x % (256 - 16 + 1));
		unsigned char *p = wl_malloc(sz);
		wl_put64(p, x);
		wl_put64(p + sz - 8, n);
		obj[n] = p;
		size[n] = sz;
		total += sz;
	}
	long rss_fill = wl_rss_kib();

	uint64_t live = 0;
	for (size_t i = 0; i < n; i++) {
		if (wl_rng_next(&r) % 10 == 0) {
			live += size[i];
			continue;
		}
		cs = wl_mix(cs, wl_get64(obj[i]) ^
		    wl_get64(obj[i] + size[i] - 8));
		free(obj[i]);
		obj[i] = NULL;
	}
	long rss_free = wl_rss_kib();

	enum { NBIG = WL_FRAG_LARGE / (256 * 1024) };
	unsigned char *big[NBIG];
	size_t bigsz[NBIG];
	unsigned nbig = 0;
	for (size_t total = 0; total < WL_FRAG_LARGE && nbig < NBIG;
	    nbig++) {
		uint64_t x = wl_rng_next(&r);
		size_t sz = 256 * WL_KIB + (size_t)(x % (768 * WL_KIB + 1));
		unsigned char *p = wl_malloc(sz);
		for (size_t off = 0; off < sz; off += WL_PAGE)
			p[off] = (unsigned char)(x >> (off / WL_PAGE % 8 * 8));
		big[nbig] = p;
		bigsz[nbig] = sz;
		total += sz;
	}
	for (unsigned i = 0; i < nbig; i++) {
		size_t last = (bigsz[i] - 1) / WL_PAGE * WL_PAGE;
		cs = wl_mix(cs, big[i][0] ^ ((uint64_t)big[i][last] << 8));
		free(big[i]);
	}

	unsigned decay = wl_decay_ms();
	for (unsigned t = 0; t < decay; t += WL_FRAG_TICK_MS) {
		wl_sleep_ms(decay - t < WL_FRAG_TICK_MS ? decay - t :
		    WL_FRAG_TICK_MS);
		void *p = wl_malloc(1);
		wl_sink(p);
		free(p);
	}
	long rss_decay = wl_rss_kib();

	for (size_t i = 0; i < n; i++) {
		if (obj[i] != NULL) {
			cs = wl_mix(cs, wl_get64(obj[i]) ^
			    wl_get64(obj[i] + size[i] - 8));
			free(obj[i]);
		}
	}
	munmap(obj, max * sizeof(*obj));
	munmap(size, max * sizeof(*size));
	printf("frag checksum=%016" PRIx64 " vmhwm_kb=%lu live_kb=%" PRIu64
	    " rss_after_fill=%ld rss_after_free=%ld rss_after_decay=%ld\n",
	    cs, wl_vmhwm_kb(), live / 1024, rss_fill, rss_free, rss_decay);
}

/* ---- micro, micro_empty, micro_batch: hot paths for callgrind ---- */

#define WL_MICRO_ITERS 10000000
#define WL_MICRO_WARMUP 1000
#define WL_MICRO_SIZE 64
#define WL_BATCH 1000

static unsigned char wl_micro_buf[WL_MICRO_SIZE];

/*
 * micro and micro_empty share this loop so that their instruction counts
 * differ by malloc and free alone: the runner subtracts the empty loop.
 * The empty variant launders the buffer's address through an asm, so the
 * compiler cannot fold the NULL check or the store away and the two loop
 * bodies compile to the same instructions around the calls.
 */
static inline __attribute__((always_inline)) uint64_t wl_micro_loop(
    uint64_t iters, bool empty) {
	uint64_t cs = 0;
	for (uint64_t i = 0; i < iters; i++) {
		unsigned char *p;
		if (empty) {
			p = wl_micro_buf;
			__asm__ volatile("" : "+r"(p));
		} else {
			p = malloc(WL_MICRO_SIZE);
		}
		if (p == NULL)
			wl_oom();
		p[0] = (unsigned char)i;
		wl_sink(p);
		cs += p[0];
		if (!empty)
			free(p);
	}
	return cs;
}

static void wl_micro_run(const char *name, uint64_t iters, bool empty) {
	/* Warm up in both variants: the first calls set up thread caches
	 * and slabs, which is not the cost being measured (the runner's
	 * difference cancels it, but the empty variant should not look
	 * different from outside). */
	for (unsigned i = 0; i < WL_MICRO_WARMUP; i++) {
		void *p = wl_malloc(WL_MICRO_SIZE);
		wl_sink(p);
		free(p);
	}
	uint64_t cs = empty ? wl_micro_loop(iters, true) :
	    wl_micro_loop(iters, false);
	printf("%s checksum=%016" PRIx64 " iters=%" PRIu64 "\n", name, cs,
	    iters);
}

static void wl_micro(uint64_t iters) {
	wl_micro_run("micro", iters, false);
}

static void wl_micro_empty(uint64_t iters) {
	wl_micro_run("micro_empty", iters, true);
}

/*
 * A thousand live objects of 32 sizes, freed oldest first: each pair now
 * hits a size class whose cache last saw another size, and frees run in
 * FIFO order, unlike micro's malloc-free of one hot block.
 */
static void wl_micro_batch(uint64_t iters) {
	unsigned char *obj[WL_BATCH];
	for (unsigned i = 0; i < WL_MICRO_WARMUP; i++) {
		void *p = wl_malloc(16 * (i % 32 + 1));
		wl_sink(p);
		free(p);
	}
	uint64_t cs = 0;
	for (uint64_t done = 0; done < iters;) {
		unsigned n = iters - done < WL_BATCH ?
		    (unsigned)(iters - done) : WL_BATCH;
		for (unsigned k = 0; k < n; k++) {
			unsigned char *p = malloc(16 * (k % 32 + 1));
			if (p == NULL)
				wl_oom();
			p[0] = (unsigned char)(k + done);
			obj[k] = p;
		}
		for (unsigned k = 0; k < n; k++) {
			cs += obj[k][0];
			free(obj[k]);
		}
		done += n;
	}
	printf("micro_batch checksum=%016" PRIx64 " iters=%" PRIu64 "\n", cs,
	    iters);
}

/* ---- command line ---- */

struct wl_workload {
	const char *name;
	void (*scaled)(double scale);   /* takes SCALE */
	void (*counted)(uint64_t iters);        /* takes an iteration count */
};

static const struct wl_workload wl_workloads[] = {
	{ "churn", wl_churn, NULL },
	{ "logsizes", wl_logsizes, NULL },
	{ "prodcons", wl_prodcons, NULL },
	{ "scale", wl_scale, NULL },
	{ "larson", wl_larson, NULL },
	{ "falseshare", wl_falseshare, NULL },
	{ "threadchurn", wl_threadchurn, NULL },
	{ "realloc", wl_realloc, NULL },
	{ "reallocgrow", wl_reallocgrow, NULL },
	{ "midsize", wl_midsize, NULL },
	{ "large", wl_large, NULL },
	{ "largezero", wl_largezero, NULL },
	{ "simple", wl_simple, NULL },
	{ "alloctest", wl_alloctest, NULL },
	{ "xthread", wl_xthread, NULL },
	{ "frag", wl_frag, NULL },
	{ "micro", NULL, wl_micro },
	{ "micro_empty", NULL, wl_micro_empty },
	{ "micro_batch", NULL, wl_micro_batch },
};

#define WL_NWORKLOADS (sizeof(wl_workloads) / sizeof(wl_workloads[0]))

static void wl_usage(void) {
	fprintf(stderr, "usage: mpbench WORKLOAD [SCALE]\n"
	    "       mpbench micro|micro_empty|micro_batch [ITERATIONS]\n"
	    "       mpbench list\n");
	exit(2);
}

int main(int argc, char **argv) {
	if (argc < 2 || argc > 3)
		wl_usage();
	const char *name = argv[1];
	if (strcmp(name, "list") == 0) {
		if (argc != 2)
			wl_usage();
		for (size_t i = 0; i < WL_NWORKLOADS; i++)
			printf("%s\n", wl_workloads[i].name);
		return 0;
	}
	const struct wl_workload *w = NULL;
	for (size_t i = 0; i < WL_NWORKLOADS; i++) {
		if (strcmp(name, wl_workloads[i].name) == 0)
			w = &wl_workloads[i];
	}
	if (w == NULL)
		wl_die(2, "unknown workload \"%s\"", name);
	const char *arg = argc == 3 ? argv[2] : NULL;
	char *end;
	if (w->counted != NULL) {
		uint64_t iters = WL_MICRO_ITERS;
		if (arg != NULL) {
			errno = 0;
			unsigned long long v = strtoull(arg, &end, 10);
			if (errno != 0 || *arg < '0' || *arg > '9' ||
			    *end != '\0' || v == 0)
				wl_die(2, "invalid iteration count \"%s\"",
				    arg);
			iters = v;
		}
		w->counted(iters);
	} else {
		double scale = 1.0;
		if (arg != NULL) {
			errno = 0;
			scale = strtod(arg, &end);
			if (errno != 0 || end == arg || *end != '\0' ||
			    !isfinite(scale) || !(scale > 0.0))
				wl_die(2, "invalid scale \"%s\"", arg);
		}
		w->scaled(scale);
		printf("rss_file_kb=%lu\n", wl_rss_file_kb());
	}
	if (fflush(stdout) != 0)
		wl_die(1, "writing stdout: %s", strerror(errno));
	return 0;
}
