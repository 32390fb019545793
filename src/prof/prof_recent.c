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
 * recent_mtx (LOCK_RANK_PROF_RECENT) guards the list, the count, the
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

/* One record.  The free side (dalloc_*) is filled once, by the free,
 * under recent_mtx; alloc_frames follow the struct. */
typedef struct recent_s {
	struct recent_s *prev, *next;    /* oldest first */
	prof_sample_t *sample;           /* NULL once freed or unlinked */
	size_t size, usize;
	uint64_t alloc_ns, dalloc_ns;
	uint64_t alloc_uid, dalloc_uid;
	bool released;
	bool dalloc_known;               /* dalloc_uid, dalloc_name are */
	char alloc_name[PROF_THREAD_NAME_MAX];
	char dalloc_name[PROF_THREAD_NAME_MAX];
	void **dalloc_frames;            /* base_malloc'd, or NULL */
	uint32_t alloc_nframes, dalloc_nframes;
	void *alloc_frames[];
} recent_t;

static mp_mutex_t recent_mtx = MP_MUTEX_INITIALIZER(LOCK_RANK_PROF_RECENT);
static mp_mutex_t recent_dump_mtx =
    MP_MUTEX_INITIALIZER(LOCK_RANK_PROF_RECENT_DUMP);
static recent_t *recent_head, *recent_tail;      /* recent_mtx */
static ssize_t recent_count;                     /* recent_mtx */
/* experimental.prof_recent.alloc_max; written under recent_mtx, read
 * without it by the sampler's first check. */
static _Atomic ssize_t recent_max;

void prof_recent_boot(void) {
	atomic_store(&recent_max, opt_prof_recent_alloc_max);
}

static uint64_t recent_now_ns(void) {
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static size_t recent_size(uint32_t nframes) {
	return sizeof(recent_t) + nframes * sizeof(void *);
}

static void recent_free(recent_t *r) {
	if (r->dalloc_frames != NULL)
		base_free(r->dalloc_frames, r->dalloc_nframes *
		    sizeof(void *));
	base_free(r, recent_size(r->alloc_nframes));
}

static void list_unlink(recent_t *r) {
	if (r->prev != NULL)
		r->prev->next = r->next;
	else
		recent_head = r->next;
	if (r->next != NULL)
		r->next->prev = r->prev;
	else
		recent_tail = r->prev;
	r->prev = r->next = NULL;
}

static void list_append(recent_t *r) {
	r->prev = recent_tail;
	r->next = NULL;
	if (recent_tail != NULL)
		recent_tail->next = r;
	else
		recent_head = r;
	recent_tail = r;
}

/* recent_mtx held: drop the oldest records until at most `max` are left;
 * they are returned as a list (through ->next) to free after unlocking. */
static recent_t *recent_trim_locked(ssize_t max) {
	recent_t *gone = NULL;
	while (max >= 0 && recent_count > max) {
		recent_t *r = recent_head;
		list_unlink(r);
		if (r->sample != NULL)
			atomic_store_explicit(&r->sample->recent, NULL,
			    memory_order_relaxed);
		r->sample = NULL;
		recent_count--;
		r->next = gone;
		gone = r;
	}
	return gone;
}

static void recent_free_list(recent_t *r) {
	while (r != NULL) {
		recent_t *next = r->next;
		recent_free(r);
		r = next;
	}
}

void prof_recent_alloc(prof_sample_t *s, size_t size, size_t usize,
    prof_tdata_t *td, void *const *frames, unsigned nframes) {
	if (atomic_load_explicit(&recent_max, memory_order_relaxed) == 0)
		return;
	recent_t *r = base_malloc(recent_size(nframes));
	if (r == NULL)
		return;         /* the sample stays; it has no record */
	r->size = size;
	r->usize = usize;
	r->alloc_ns = recent_now_ns();
	r->alloc_uid = td->uid;
	prof_tdatas_lock();
	memcpy(r->alloc_name, td->name, sizeof(r->alloc_name));
	prof_tdatas_unlock();
	r->alloc_name[sizeof(r->alloc_name) - 1] = '\0';
	r->alloc_nframes = nframes;
	memcpy(r->alloc_frames, frames, nframes * sizeof(void *));
	r->sample = s;
	mp_mutex_lock(&recent_mtx);
	ssize_t max = atomic_load(&recent_max);
	recent_t *gone = NULL;
	if (max == 0) {
		gone = r;
		r->next = NULL;
		r->sample = NULL;
	} else {
		atomic_store_explicit(&s->recent, r, memory_order_relaxed);
		list_append(r);
		recent_count++;
		gone = recent_trim_locked(max);
	}
	mp_mutex_unlock(&recent_mtx);
	recent_free_list(gone);
}

void prof_recent_dalloc(prof_sample_t *s) {
	/* A peek: only this free and a trim change the link, and a trim
	 * leaves nothing to fill in. */
	if (atomic_load_explicit(&s->recent, memory_order_relaxed) == NULL)
		return;
	/* The free's stack, from here: the allocator's frames on top are
	 * left out as the walk leaves them out of an allocation's. */
	void *frames[PROF_BT_MAX_LIMIT];
	unsigned n = prof_backtrace(frames, opt_prof_bt_max,
	    (uintptr_t)__builtin_frame_address(0));
	unsigned self = prof_backtrace_self_frames(frames, n);
	n -= self;
	void **copy = n > 0 ? base_malloc(n * sizeof(void *)) : NULL;
	if (copy != NULL)
		memcpy(copy, frames + self, n * sizeof(void *));
	/* The freeing thread, if it has a profiling identity or may get one
	 * (not while it exits: its identity is gone for good). */
	tsd_t *tsd = &mp_tsd;
	prof_tdata_t *td = tsd->prof_tdata;
	if (td == NULL && tsd->state == TSD_NOMINAL)
		td = prof_tdata_get(tsd);
	char name[PROF_THREAD_NAME_MAX] = "";
	uint64_t uid = 0;
	if (td != NULL) {
		prof_tdatas_lock();
		memcpy(name, td->name, sizeof(name));
		prof_tdatas_unlock();
		name[sizeof(name) - 1] = '\0';
		uid = td->uid;
	}
	uint64_t now = recent_now_ns();
	mp_mutex_lock(&recent_mtx);
	recent_t *r = atomic_load_explicit(&s->recent, memory_order_relaxed);
	if (r != NULL) {
		atomic_store_explicit(&s->recent, NULL, memory_order_relaxed);
		r->sample = NULL;
		r->released = true;
		r->dalloc_ns = now;
		r->dalloc_known = td != NULL;
		r->dalloc_uid = uid;
		memcpy(r->dalloc_name, name, sizeof(name));
		r->dalloc_frames = copy;
		r->dalloc_nframes = copy != NULL ? n : 0;
		copy = NULL;
	}
	mp_mutex_unlock(&recent_mtx);
	if (copy != NULL)
		base_free(copy, n * sizeof(void *));
}

ssize_t prof_recent_max_get(void) {
	return atomic_load(&recent_max);
}

ssize_t prof_recent_max_set(ssize_t max) {
	mp_mutex_lock(&recent_mtx);
	ssize_t old = atomic_exchange(&recent_max, max);
	recent_t *gone = recent_trim_locked(max);
	mp_mutex_unlock(&recent_mtx);
	recent_free_list(gone);
	return old;
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

static void out_trace(recent_out_t *o, const char *key, void *const *f,
    uint32_t n) {
	out_fmt(o, ",\"%s\":[", key);
	for (uint32_t i = 0; i < n; i++)
		out_fmt(o, "%s\"%p\"", i == 0 ? "" : ",", f[i]);
	out_fmt(o, "]");
}

/* A record copied for the dump: the struct and its frames, in one
 * base_malloc'd block each (dalloc frames copied too). */
static recent_t *recent_copy(const recent_t *r) {
	recent_t *c = base_malloc(recent_size(r->alloc_nframes));
	if (c == NULL)
		return NULL;
	memcpy(c, r, recent_size(r->alloc_nframes));
	c->prev = c->next = NULL;
	c->sample = NULL;
	c->released = r->sample == NULL;
	c->dalloc_frames = NULL;
	c->dalloc_nframes = 0;
	if (r->dalloc_frames != NULL) {
		c->dalloc_frames = base_malloc(r->dalloc_nframes *
		    sizeof(void *));
		if (c->dalloc_frames != NULL) {
			memcpy(c->dalloc_frames, r->dalloc_frames,
			    r->dalloc_nframes * sizeof(void *));
			c->dalloc_nframes = r->dalloc_nframes;
		}
	}
	return c;
}

bool prof_recent_dump(void (*write_cb)(void *, const char *),
    void *cbopaque) {
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
	mp_mutex_lock(&recent_mtx);
	ssize_t max = atomic_load(&recent_max);
	for (const recent_t *r = recent_head; r != NULL; r = r->next) {
		recent_t *c = recent_copy(r);
		if (c == NULL)
			continue;
		if (last != NULL)
			last->next = c;
		else
			first = c;
		last = c;
	}
	mp_mutex_unlock(&recent_mtx);

	out_fmt(&o, "{\"sample_interval\":%" PRIu64 ",\"recent_alloc_max\":"
	    "%zd,\"recent_alloc\":[", (uint64_t)1 << atomic_load(
	    &prof_lg_sample), max);
	for (recent_t *c = first; c != NULL; c = c->next) {
		out_fmt(&o, "%s{\"size\":%zu,\"usize\":%zu,\"released\":%s,"
		    "\"alloc_thread_uid\":%" PRIu64, c == first ? "" : ",",
		    c->size, c->usize, c->released ? "true" : "false",
		    c->alloc_uid);
		if (c->alloc_name[0] != '\0')
			out_name(&o, "alloc_thread_name", c->alloc_name);
		out_fmt(&o, ",\"alloc_time\":%" PRIu64, c->alloc_ns);
		out_trace(&o, "alloc_trace", c->alloc_frames,
		    c->alloc_nframes);
		if (c->released && c->dalloc_ns != 0) {
			if (c->dalloc_known)
				out_fmt(&o, ",\"dalloc_thread_uid\":%" PRIu64,
				    c->dalloc_uid);
			if (c->dalloc_known && c->dalloc_name[0] != '\0')
				out_name(&o, "dalloc_thread_name",
				    c->dalloc_name);
			out_fmt(&o, ",\"dalloc_time\":%" PRIu64, c->dalloc_ns);
			out_trace(&o, "dalloc_trace", c->dalloc_frames,
			    c->dalloc_nframes);
		}
		out_fmt(&o, "}");
	}
	out_fmt(&o, "]}");
	out_flush(&o);
	while (first != NULL) {
		recent_t *next = first->next;
		recent_free(first);
		first = next;
	}
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
	pthread_mutex_lock(&recent_mtx.lock);
}

void prof_recent_postfork_parent(void) {
	pthread_mutex_unlock(&recent_mtx.lock);
}

void prof_recent_postfork_child(void) {
	mp_mutex_postfork_child(&recent_mtx);
}
