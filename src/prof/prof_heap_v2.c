/*
 * prof_heap_v2.c: the heap_v2 writer, jemalloc's text format that jeprof
 * reads: the totals, one line per thread, one record per backtrace with
 * its per-thread counts, then /proc/self/maps.  It formats a snapshot
 * taken by prof_snap.c (counts unbiased there) into an mp_buf over a
 * base_malloc'd buffer: no malloc, no profiler lock (prof_dump.c holds
 * prof_dump_mtx around it).
 */
#include "malloc_prof/internal/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <unistd.h>

/* The output buffer. */
#define HEAP_V2_WBUF_SIZE ((size_t)64 << 10)

/*
 * What frame 0 of a record is.  The snapshot's frame 0 is the allocator
 * entry point the program called, its frames after it return addresses.
 * jeprof takes frame 0 as a PC and the others as return addresses (it
 * subtracts one from them only), and cuts each stack at the last frame
 * whose function is on its list of allocator entry points (malloc,
 * calloc, ..., mallocx, rallocx), so that the flat column names the
 * function that called the allocator.  The unprefixed names are on that
 * list: frame 0 stays the entry point, which says which one was called.  A
 * prefixed build's names (mp_malloc) never are, and jeprof would charge
 * every byte to the entry point: there frame 0 is the call instruction in
 * the program instead (the first return address minus one, a PC inside
 * the caller), and the entry point is left out, as the pprof writer
 * leaves it out in every build.  A stack of the entry point alone keeps
 * it.  Two stacks that differ only in the entry point (one call reaching
 * two entry points through a pointer) then print alike: readers add up
 * equal stacks.
 */
static const bool heap_v2_leaf_is_call = MP_PREFIX_STR[0] != '\0';

static void w_cnts(mp_buf_t *w, const prof_cnt_t *c, double R) {
	uint64_t cn, cs, an = 0, as = 0;
	prof_snap_printed(c, false, R, &cn, &cs);
	if (opt_prof_accum)
		prof_snap_printed(c, true, R, &an, &as);
	mp_buf_printf(w, "%" PRIu64 ": %" PRIu64 " [%" PRIu64 ": %" PRIu64 "]",
	    cn, cs, an, as);
}

static void heap_v2_cnt_add(prof_cnt_t *acc, const prof_cnt_t *c) {
	acc->curobjs += c->curobjs;
	acc->curbytes += c->curbytes;
	acc->curobjs_shifted_unbiased += c->curobjs_shifted_unbiased;
	acc->curbytes_unbiased += c->curbytes_unbiased;
	acc->accumobjs += c->accumobjs;
	acc->accumbytes += c->accumbytes;
	acc->accumobjs_shifted_unbiased += c->accumobjs_shifted_unbiased;
	acc->accumbytes_unbiased += c->accumbytes_unbiased;
}

/*
 * Append /proc/self/maps verbatim, then the executable segments of the
 * objects unloaded since (dlclose) that frames of s point into
 * (prof_sys_unloaded), after a comment line that marks them: maps
 * lines of their own, with device 00:00 and inode 0, which jeprof,
 * malloc-prof and pprof's legacy parser read as any other (and skip the
 * comment).  Nothing if neither is there.
 */
static void w_maps(mp_buf_t *w, const dump_snap_t *s) {
	prof_sys_unloaded_t u[PROF_SYS_UNLOADED_MAX];
	size_t nu = prof_sys_unloaded(s, u, PROF_SYS_UNLOADED_MAX);
	int fd;
	do {
		fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	} while (fd < 0 && errno == EINTR);
	if (fd < 0 && nu == 0)
		return;
	mp_buf_puts(w, "\nMAPPED_LIBRARIES:\n");
	if (fd < 0)
		goto unloaded;
	/* Read straight into the buffer's free room (its last byte is
	 * mp_buf's). */
	while (!w->err) {
		if (w->len + 1 >= w->size)
			mp_buf_flush(w);
		ssize_t n = read(fd, w->p + w->len, w->size - 1 - w->len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		w->len += (size_t)n;
	}
	close(fd);
unloaded:
	if (nu == 0)
		return;
	/* The file ends with a newline; a read cut short may not. */
	if (w->len > 0 && w->p[w->len - 1] != '\n')
		mp_buf_putc(w, '\n');
	mp_buf_puts(w, "# unloaded (dlclose): objects that frames of this "
	    "profile point into\n");
	for (size_t i = 0; i < nu; i++) {
		mp_buf_printf(w, "%lx-%lx r-xp %08lx 00:00 0 %s\n",
		    (unsigned long)u[i].lo, (unsigned long)u[i].hi,
		    (unsigned long)u[i].offset, u[i].name);
	}
}

static void w_profile(mp_buf_t *w, const dump_snap_t *s) {
	double R = (double)((uint64_t)1 << s->lg_sample);
	mp_buf_printf(w, "heap_v2/%" PRIu64 "\n", (uint64_t)1 << s->lg_sample);
	mp_buf_puts(w, "  t*: ");
	w_cnts(w, &s->total, R);
	mp_buf_putc(w, '\n');
	for (size_t i = 0; i < s->nthreads; i++) {
		const dump_thread_t *t = &s->threads[i];
		mp_buf_printf(w, "  t%" PRIu64 ": ", t->uid);
		w_cnts(w, &t->cnt, R);
		mp_buf_printf(w, "%s%s\n", t->name[0] != '\0' ? " " : "",
		    t->name);
	}
	const char *p = s->gbuf;
	for (size_t i = 0; i < s->ngctx && !w->err; i++) {
		const dump_gctx_t *g = (const dump_gctx_t *)p;
		p += sizeof(*g);
		void *const *frames = (void *const *)p;
		mp_buf_putc(w, '@');
		uint32_t f = 0;
		if (heap_v2_leaf_is_call && g->nframes >= 2) {
			mp_buf_printf(w, " 0x%lx",
			    (unsigned long)((uintptr_t)frames[1] - 1));
			f = 2;
		}
		for (; f < g->nframes; f++) {
			mp_buf_printf(w, " 0x%lx",
			    (unsigned long)(uintptr_t)frames[f]);
		}
		mp_buf_puts(w, "\n  t*: ");
		w_cnts(w, &g->cnt, R);
		mp_buf_putc(w, '\n');
		p += dump_frames_size(g->nframes);
		const dump_tctx_t *tr = (const dump_tctx_t *)p;
		for (uint32_t k = 0; k < g->ntctx; k++) {
			/* One line per thread: its pairs of different label
			 * sets (thread.prof.label) are adjacent (by uid) and
			 * summed; labels are written in pprof dumps only. */
			prof_cnt_t c = tr[k].cnt;
			while (k + 1 < g->ntctx && tr[k + 1].uid == tr[k].uid)
				heap_v2_cnt_add(&c, &tr[++k].cnt);
			mp_buf_printf(w, "  t%" PRIu64 ": ", tr[k].uid);
			w_cnts(w, &c, R);
			mp_buf_putc(w, '\n');
		}
		p += g->ntctx * sizeof(dump_tctx_t);
	}
	w_maps(w, s);
	mp_buf_flush(w);
}

int prof_heap_v2_write_buf(const dump_snap_t *s, int fd, char *buf,
    size_t size) {
	mp_buf_fd_t out = {fd, 0};
	mp_buf_t w;
	mp_buf_init(&w, buf, size, mp_buf_fd_sink, &out);
	w_profile(&w, s);
	return out.err;
}

int prof_heap_v2_write(const dump_snap_t *s, int fd, const char **whyp) {
	char *buf = base_malloc(HEAP_V2_WBUF_SIZE);
	if (buf == NULL) {
		*whyp = "out of memory for the dump buffer";
		return ENOMEM;
	}
	int err = prof_heap_v2_write_buf(s, fd, buf, HEAP_V2_WBUF_SIZE);
	base_free(buf, HEAP_V2_WBUF_SIZE);
	return err;
}

