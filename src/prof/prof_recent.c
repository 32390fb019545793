/*
 * prof_recent.c: the most recent sampled allocations, as jemalloc keeps
 * them (opt.prof_recent_alloc_max, experimental.prof_recent.alloc_max,
 * experimental.prof_recent.alloc_dump): for each, its size, when, by
 * which thread and from where it was allocated, and, once freed, when,
 * by which thread and from where.
 *
 * Each sample gets a record while the limit is not 0; once `max` records
 * are kept (-1: no limit) the oldest is reused.  A record and its sample
 * point at each other (prof_sample_t.recent, recent_t.sample) while the
 * object lives, so that the sampled object's free fills in the record's
 * free side; a record reused or dropped first unlinks itself.  Records
 * copy what they print (frames, thread names): they pin nothing of the
 * profiler's tables, and the free of an object whose record is gone
 * costs nothing more than before.
 *
 * A record is 64 bytes, its sides apart: each distinct side (the
 * thread, its name and the stack of an allocation or a free) is kept
 * once, counted by the records that print it (recent_bt_t), since the
 * last 1,000 samples of a program come from a few threads and sites.
 * Copied into each record, the stacks and names took about 250 KiB of
 * the 3 MB of bench's churn at prof_recent_alloc_max:1000 (+8%).
 *
 * recent_mtx (LOCK_RANK_PROF_RECENT, a lite lock; jemalloc's
 * stats.mutexes.prof_recent_alloc) guards the list, the count, the
 * links of both sides and the free side of records; it is taken with no
 * other profiler lock held, and nothing under it allocates but
 * base_malloc (a leaf).  A dump copies the records under the lock and
 * formats them after, with no lock held but recent_dump_mtx, which only
 * orders dumps: the program's write callback may allocate, be sampled
 * and add records meanwhile.  All memory is base_malloc's.
 */
#include "malloc_prof/internal/internal.h"

#include <inttypes.h>
#include <time.h>

ssize_t opt_prof_recent_alloc_max = 0;

/* One distinct side of records (an allocation's or a free's thread uid
 * and name, and its stack), shared by the records that print it: refs
 * of them (and of a dump's copies).  recent_mtx guards the table, the
 * chains and refs; the rest never changes. */
typedef struct recent_bt_s {
	struct recent_bt_s *next;        /* hash chain */
	uint64_t hash;
	uint64_t uid;
	uint32_t refs, n;
	bool known;                      /* uid and name are (a free by a
					  * thread without an identity:
					  * not) */
	char name[PROF_THREAD_NAME_MAX];
	void *frames[];
} recent_bt_t;
/* At most 2 stacks a record: chains of a few entries at 1,000 records;
 * 4 KiB of .bss, touched only once records are kept. */
#define RECENT_BT_BUCKETS 512
static recent_bt_t *recent_bts[RECENT_BT_BUCKETS];      /* recent_mtx */

/* One record.  The free side (dalloc_*) is filled once, by the free,
 * under recent_mtx.  The list is only ever cut at its head (the oldest)
 * and appended to: singly linked. */
typedef struct recent_s {
	struct recent_s *next;           /* oldest first */
	prof_sample_t *sample;           /* NULL once freed or unlinked */
	size_t usize;
	/* prof_time_ns's clock (the sample's time; the free's), shown as
	 * wall-clock time by the dump (its wall_offset): records take the
	 * times their sample and free have read already, where a
	 * CLOCK_REALTIME read at each was 7% of what records cost bench's
	 * midsize (doc/performance.md, "Every profile on").  A wall clock
	 * set since moves them with it. */
	uint64_t alloc_ns, dalloc_ns;
	recent_bt_t *alloc_bt, *dalloc_bt;       /* NULL: no memory */
	bool released;                   /* a dump's copy only: sample was
	                                  * NULL (recent_copy_locked) */
	uint32_t req_pad;                /* size = usize - req_pad: the
	                                  * sample's (prof_sample_req_pad) */
} recent_t;
_Static_assert(sizeof(recent_t) <= 64, "one base_malloc line");

/* A lite lock: every sample takes it twice while records are kept, and
 * glibc's mutex was 76 instructions a round trip against the lite lock's
 * 20 (doc/performance.md, "Per-sample cost, round 12"). */
static mp_mutex_t recent_mtx = MP_MUTEX_LITE_INITIALIZER(LOCK_RANK_PROF_RECENT);
static mp_mutex_t recent_dump_mtx =
    MP_MUTEX_INITIALIZER(LOCK_RANK_PROF_RECENT_DUMP);
static recent_t *recent_head, *recent_tail;      /* recent_mtx */
static ssize_t recent_count;                     /* recent_mtx */
/* Bytes of the linked records and of the stacks (as base_malloc rounds
 * them), stacks (recent_mtx). */
static size_t recent_bytes, recent_nbts;
/* experimental.prof_recent.alloc_max; written under recent_mtx, read
 * without it by the sampler's first check. */
MP_READ_MOSTLY _Atomic ssize_t prof_recent_max;

MP_WARM void prof_recent_boot(void) {
	/* stats.mutexes.prof_recent_alloc and prof_recent_dump, jemalloc's
	 * names for these two. */
	ctl_mutex_register("prof_recent_alloc", &recent_mtx);
	ctl_mutex_register("prof_recent_dump", &recent_dump_mtx);
	/* Stored only when it changes: a store of 0 made its page of .bss
	 * resident in every process. */
	if (atomic_load(&prof_recent_max) != opt_prof_recent_alloc_max)
		atomic_store(&prof_recent_max, opt_prof_recent_alloc_max);
}

/* The name of a thread without one (known false). */
static const char no_name[PROF_THREAD_NAME_MAX];

/* A side's hash: its thread's and its stack's (frames_hash,
 * prof_bt_hash's, which an allocation's sample has already made).  name
 * is zero-padded: hashed a word at a time. */
static uint64_t recent_bt_hash(bool known, uint64_t uid,
    const char name[PROF_THREAD_NAME_MAX], uint64_t frames_hash) {
	uint64_t h = 0x51ed27u ^ (uint64_t)known << 32;
	h = (h ^ uid) * 0x9e3779b97f4a7c15ULL;
	_Static_assert(PROF_THREAD_NAME_MAX == 2 * sizeof(uint64_t),
	    "a name is two words");
	uint64_t w[2];
	memcpy(w, name, sizeof(w));
	h = (h ^ w[0]) * 0x9e3779b97f4a7c15ULL;
	h = (h ^ (h >> 29) ^ w[1]) * 0x9e3779b97f4a7c15ULL;
	h = (h ^ (h >> 29) ^ frames_hash) * 0x9e3779b97f4a7c15ULL;
	return h ^ (h >> 29);
}

static size_t recent_bt_size(uint32_t n) {
	return sizeof(recent_bt_t) + n * sizeof(void *);
}

static recent_bt_t **recent_bt_bucket(uint64_t hash) {
	return &recent_bts[(hash >> 7) % RECENT_BT_BUCKETS];
}

/* recent_mtx held: a reference to the side (known, uid, name[]
 * zero-padded, frames[0..n)), hash recent_bt_hash's; made if new;
 * NULL on no memory. */
static recent_bt_t *recent_bt_get_locked(bool known, uint64_t uid,
    const char name[PROF_THREAD_NAME_MAX], void *const *frames, unsigned n,
    uint64_t hash) {
	recent_bt_t **bucket = recent_bt_bucket(hash);
	for (recent_bt_t *b = *bucket; b != NULL; b = b->next) {
		if (b->hash == hash && b->n == n && b->known == known &&
		    b->uid == uid && memcmp(b->name, name,
		    PROF_THREAD_NAME_MAX) == 0 && memcmp(b->frames, frames,
		    n * sizeof(void *)) == 0) {
			b->refs++;
			return b;
		}
	}
	recent_bt_t *b = base_malloc(recent_bt_size(n));
	if (b == NULL)
		return NULL;
	b->hash = hash;
	b->refs = 1;
	b->known = known;
	b->uid = uid;
	memcpy(b->name, name, PROF_THREAD_NAME_MAX);
	b->n = n;
	memcpy(b->frames, frames, n * sizeof(void *));
	b->next = *bucket;
	*bucket = b;
	recent_bytes += ALIGNMENT_CEILING(recent_bt_size(n), CACHELINE);
	recent_nbts++;
	return b;
}

/* recent_mtx held: drop a reference (b may be NULL). */
static void recent_bt_put_locked(recent_bt_t *b) {
	if (b == NULL || --b->refs != 0)
		return;
	recent_bt_t **pp = recent_bt_bucket(b->hash);
	while (*pp != b)
		pp = &(*pp)->next;
	*pp = b->next;
	recent_bytes -= ALIGNMENT_CEILING(recent_bt_size(b->n), CACHELINE);
	recent_nbts--;
	base_free(b, recent_bt_size(b->n));
}

static void list_append(recent_t *r) {
	r->next = NULL;
	if (recent_tail != NULL)
		recent_tail->next = r;
	else
		recent_head = r;
	recent_tail = r;
}

/* recent_mtx held, at least one record kept: the oldest, unlinked from
 * the list, from its sample and from its sides (still counted). */
static recent_t *recent_pop_oldest_locked(void) {
	recent_t *r = recent_head;
	recent_head = r->next;
	if (recent_head == NULL)
		recent_tail = NULL;
	if (r->sample != NULL)
		atomic_store_explicit(&r->sample->recent, NULL,
		    memory_order_relaxed);
	r->sample = NULL;
	recent_bt_put_locked(r->alloc_bt);
	recent_bt_put_locked(r->dalloc_bt);
	r->alloc_bt = r->dalloc_bt = NULL;
	return r;
}

/* recent_mtx held: drop the oldest records until at most `max` are left,
 * with their stacks; the records are returned as a list (through ->next)
 * to free after unlocking. */
static recent_t *recent_trim_locked(ssize_t max) {
	recent_t *gone = NULL;
	while (max >= 0 && recent_count > max) {
		recent_t *r = recent_pop_oldest_locked();
		recent_count--;
		recent_bytes -= ALIGNMENT_CEILING(sizeof(*r), CACHELINE);
		r->next = gone;
		gone = r;
	}
	return gone;
}

static void recent_free_list(recent_t *r) {
	while (r != NULL) {
		recent_t *next = r->next;
		base_free(r, sizeof(*r));
		r = next;
	}
}

/*
 * Once `max` records are kept, each sample takes the oldest one over
 * instead of a new one: a base_malloc and a base_free a sample (two
 * trips through base_mtx, 80 instructions) for a record of the same
 * size.  Every field is set here: a reused record keeps nothing.
 */
void prof_recent_alloc(prof_sample_t *s, size_t usize, uint64_t uid,
    const char name[PROF_THREAD_NAME_MAX], void *const *frames,
    unsigned nframes, uint64_t frames_hash) {
	if (atomic_load_explicit(&prof_recent_max, memory_order_relaxed) == 0)
		return;
	uint64_t now = s->time_ns;
	uint64_t hash = recent_bt_hash(true, uid, name, frames_hash);
	mp_mutex_lite_lock(&recent_mtx);
	ssize_t max = atomic_load(&prof_recent_max);
	recent_t *r = NULL;
	if (max > 0 && recent_count >= max && recent_head != NULL) {
		r = recent_pop_oldest_locked();
	} else if (max != 0 && (r = base_malloc(sizeof(*r))) != NULL) {
		recent_count++;
		recent_bytes += ALIGNMENT_CEILING(sizeof(*r), CACHELINE);
	}
	recent_t *gone = NULL;
	if (r != NULL) {
		r->usize = usize;
		r->req_pad = s->req_pad;
		r->alloc_ns = now;
		r->dalloc_ns = 0;
		r->dalloc_bt = NULL;
		r->sample = s;
		r->alloc_bt = recent_bt_get_locked(true, uid, name, frames,
		    nframes, hash);
		atomic_store_explicit(&s->recent, r, memory_order_relaxed);
		list_append(r);
		/* Only if the limit fell since the count was read: it is
		 * lowered under this lock, which trims at once. */
		if (max >= 0 && recent_count > max)
			gone = recent_trim_locked(max);
	}
	/* else max 0 (switched off since the first check) or no memory:
	 * the sample stays; it has no record */
	mp_mutex_lite_unlock(&recent_mtx);
	recent_free_list(gone);
}

void prof_recent_dalloc(prof_sample_t *s, bool known, uint64_t uid,
    const char name[PROF_THREAD_NAME_MAX], uintptr_t fp, void **frames,
    uint64_t now) {
	if (!prof_recent_linked(s))
		return;
	/* The free's stack, from the exported function's frame when the
	 * caller knows it (the walk then reads no frame of the allocator:
	 * those words were half of a memo's compares), else from here: the
	 * allocator's frames on top are left out as the walk leaves them out
	 * of an allocation's. */
	unsigned n = prof_backtrace(frames, opt_prof_bt_max, fp != 0 ? fp :
	    (uintptr_t)__builtin_frame_address(0));
	unsigned self = prof_backtrace_self_frames(frames, n);
	n -= self;
	if (!known) {
		uid = 0;
		name = no_name;
	}
	uint64_t hash = recent_bt_hash(known, uid, name,
	    prof_bt_hash(frames + self, n));
	mp_mutex_lite_lock(&recent_mtx);
	recent_t *r = atomic_load_explicit(&s->recent, memory_order_relaxed);
	if (r != NULL) {
		atomic_store_explicit(&s->recent, NULL, memory_order_relaxed);
		r->sample = NULL;
		r->dalloc_ns = now;
		r->dalloc_bt = recent_bt_get_locked(known, uid, name,
		    frames + self, n, hash);
	}
	mp_mutex_lite_unlock(&recent_mtx);
}

ssize_t prof_recent_max_get(void) {
	return atomic_load(&prof_recent_max);
}

ssize_t prof_recent_max_set(ssize_t max) {
	mp_mutex_lite_lock(&recent_mtx);
	ssize_t old = atomic_exchange(&prof_recent_max, max);
	recent_t *gone = recent_trim_locked(max);
	mp_mutex_lite_unlock(&recent_mtx);
	recent_free_list(gone);
	return old;
}

size_t prof_recent_bytes(size_t *nstacks) {
	mp_mutex_lite_lock(&recent_mtx);
	size_t bytes = recent_bytes;
	if (nstacks != NULL)
		*nstacks = recent_nbts;
	mp_mutex_lite_unlock(&recent_mtx);
	return bytes;
}

/* ------------------------------------------------------------- the dump */

/* Output through the program's callback, in chunks of a buffer. */
typedef struct {
	void (*write_cb)(void *, const char *);
	void *cbopaque;
	char *buf;
	size_t len, cap;
} recent_out_t;

static void out_flush(recent_out_t *o) {
	if (o->len == 0)
		return;
	o->buf[o->len] = '\0';
	o->write_cb(o->cbopaque, o->buf);
	o->len = 0;
}

static void out_fmt(recent_out_t *o, const char *fmt, ...) {
	char tmp[256];
	va_list ap;
	va_start(ap, fmt);
	int n = mp_vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	size_t len = (size_t)n < sizeof(tmp) ? (size_t)n : sizeof(tmp) - 1;
	if (o->len + len + 1 > o->cap)
		out_flush(o);
	memcpy(o->buf + o->len, tmp, len);
	o->len += len;
}

/* A thread name as a JSON string's contents: names hold printable ASCII
 * only (thread.prof.name checks), but for '"' and '\\'. */
static void out_name(recent_out_t *o, const char *key, const char *name) {
	char esc[2 * PROF_THREAD_NAME_MAX];
	size_t k = 0;
	for (size_t i = 0; name[i] != '\0' && i < PROF_THREAD_NAME_MAX; i++) {
		if (name[i] == '"' || name[i] == '\\')
			esc[k++] = '\\';
		esc[k++] = (unsigned char)name[i] < 0x20 ? '?' : name[i];
	}
	esc[k] = '\0';
	out_fmt(o, ",\"%s\":\"%s\"", key, esc);
}

static void out_trace(recent_out_t *o, const char *key,
    const recent_bt_t *b) {
	out_fmt(o, ",\"%s\":[", key);
	for (uint32_t i = 0; b != NULL && i < b->n; i++)
		out_fmt(o, "%s\"%p\"", i == 0 ? "" : ",", b->frames[i]);
	out_fmt(o, "]");
}

/* A record copied for the dump, under recent_mtx: the struct, holding
 * references to its stacks (dropped by recent_copies_free). */
static recent_t *recent_copy_locked(const recent_t *r) {
	recent_t *c = base_malloc(sizeof(*c));
	if (c == NULL)
		return NULL;
	memcpy(c, r, sizeof(*c));
	c->next = NULL;
	c->sample = NULL;
	c->released = r->sample == NULL;
	if (c->alloc_bt != NULL)
		c->alloc_bt->refs++;
	if (c->dalloc_bt != NULL)
		c->dalloc_bt->refs++;
	return c;
}

/* The dump's copies and their references, freed. */
static void recent_copies_free(recent_t *first) {
	mp_mutex_lite_lock(&recent_mtx);
	for (recent_t *c = first; c != NULL; c = c->next) {
		recent_bt_put_locked(c->alloc_bt);
		recent_bt_put_locked(c->dalloc_bt);
	}
	mp_mutex_lite_unlock(&recent_mtx);
	recent_free_list(first);
}

bool prof_recent_dump(void (*write_cb)(void *, const char *),
    void *cbopaque, uint64_t sample_interval, uint64_t wall) {
	mp_mutex_lock(&recent_dump_mtx);
	recent_out_t o = {write_cb, cbopaque, NULL, 0, 64 << 10};
	o.buf = base_malloc(o.cap);
	if (o.buf == NULL) {
		mp_mutex_unlock(&recent_dump_mtx);
		return true;
	}
	/* Copy the list, oldest first (a record that cannot be copied is
	 * left out: the dump says what it could). */
	recent_t *first = NULL, *last = NULL;
	mp_mutex_lite_lock(&recent_mtx);
	ssize_t max = atomic_load(&prof_recent_max);
	for (const recent_t *r = recent_head; r != NULL; r = r->next) {
		recent_t *c = recent_copy_locked(r);
		if (c == NULL)
			continue;
		if (last != NULL)
			last->next = c;
		else
			first = c;
		last = c;
	}
	mp_mutex_lite_unlock(&recent_mtx);

	out_fmt(&o, "{\"sample_interval\":%" PRIu64 ",\"recent_alloc_max\":"
	    "%zd,\"recent_alloc\":[", sample_interval, max);
	for (recent_t *c = first; c != NULL; c = c->next) {
		const recent_bt_t *a = c->alloc_bt, *d = c->dalloc_bt;
		out_fmt(&o, "%s{\"size\":%zu,\"usize\":%zu,\"released\":%s,"
		    "\"alloc_thread_uid\":%" PRIu64, c == first ? "" : ",",
		    c->usize - c->req_pad, c->usize,
		    c->released ? "true" : "false",
		    a != NULL ? a->uid : 0);
		if (a != NULL && a->name[0] != '\0')
			out_name(&o, "alloc_thread_name", a->name);
		out_fmt(&o, ",\"alloc_time\":%" PRIu64, c->alloc_ns + wall);
		out_trace(&o, "alloc_trace", c->alloc_bt);
		if (c->released && c->dalloc_ns != 0) {
			if (d != NULL && d->known)
				out_fmt(&o, ",\"dalloc_thread_uid\":%" PRIu64,
				    d->uid);
			if (d != NULL && d->known && d->name[0] != '\0')
				out_name(&o, "dalloc_thread_name", d->name);
			out_fmt(&o, ",\"dalloc_time\":%" PRIu64, c->dalloc_ns +
			    wall);
			out_trace(&o, "dalloc_trace", c->dalloc_bt);
		}
		out_fmt(&o, "}");
	}
	out_fmt(&o, "]}");
	out_flush(&o);
	recent_copies_free(first);
	base_free(o.buf, o.cap);
	mp_mutex_unlock(&recent_dump_mtx);
	return false;
}

/* ----------------------------------------------------------------- fork */

void prof_recent_dump_prefork(void) {
	pthread_mutex_lock(&recent_dump_mtx.lock);
}

void prof_recent_dump_postfork_parent(void) {
	pthread_mutex_unlock(&recent_dump_mtx.lock);
}

void prof_recent_dump_postfork_child(void) {
	mp_mutex_postfork_child(&recent_dump_mtx);
}

void prof_recent_prefork(void) {
	mp_mutex_lock_quiet(&recent_mtx);
}

void prof_recent_postfork_parent(void) {
	mp_mutex_unlock_quiet(&recent_mtx);
}

void prof_recent_postfork_child(void) {
	mp_mutex_postfork_child(&recent_mtx);
}
