/*
 * buf.h: the buffered writer of util.c's output layer (heap_v2 dumps,
 * malloc_stats_print, the gzip writer of pprof profiles): bytes gather in
 * a buffer the caller provides and leave through a sink callback when it
 * fills and on mp_buf_flush.  The printf half, which needs util.c's
 * formatter, is util.c's (mp_buf_printf in sys.h).
 *
 * Why a header of inline functions: pprof_enc.c writes through it, and
 * pprof_enc.c is also compiled into the malloc-prof tool and the fuzzers,
 * which do not link the library (util.c drags in the allocator's headers,
 * its configuration and the malloc_message symbol).  So, like
 * pprof_enc.h, this includes only the C library's headers.
 *
 * A `bool` return means "true on error".
 */
#ifndef MP_INTERNAL_BUF_H
#define MP_INTERNAL_BUF_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

/* Takes p[0..n); p[n] is '\0', so p may be passed on as a C string.
 * true on error. */
typedef bool mp_buf_sink_t(void *ctx, const char *p, size_t n);

/*
 * Invariant: len < size (the last byte is kept for the '\0' the sink
 * gets).  `err` sticks: after the first failed sink call nothing more is
 * handed to the sink, and mp_buf_printf formats nothing.
 */
typedef struct mp_buf_s {
	char *p;                 /* the caller's buffer */
	size_t size;             /* its size (at least 2) */
	size_t len;              /* bytes waiting */
	mp_buf_sink_t *sink;
	void *ctx;
	bool err;
} mp_buf_t;

static inline void mp_buf_init(mp_buf_t *b, char *p, size_t size,
    mp_buf_sink_t *sink, void *ctx) {
	b->p = p;
	b->size = size;
	b->len = 0;
	b->sink = sink;
	b->ctx = ctx;
	b->err = false;
}

/* Hand what is waiting to the sink (nothing if empty); the buffer is
 * empty afterwards, also on error.  The sticky error. */
static inline bool mp_buf_flush(mp_buf_t *b) {
	if (b->len == 0)
		return b->err;
	b->p[b->len] = '\0';
	if (!b->err)
		b->err = b->sink(b->ctx, b->p, b->len);
	b->len = 0;
	return b->err;
}

static inline void mp_buf_putc(mp_buf_t *b, char c) {
	if (b->len + 1 >= b->size)
		mp_buf_flush(b);
	b->p[b->len++] = c;
}

static inline void mp_buf_put(mp_buf_t *b, const void *data, size_t n) {
	const char *s = data;
	while (n > 0) {
		if (b->len + 1 >= b->size)
			mp_buf_flush(b);
		size_t room = b->size - 1 - b->len;
		size_t k = n < room ? n : room;
		memcpy(b->p + b->len, s, k);
		b->len += k;
		s += k;
		n -= k;
	}
}

/* A sink writing to a file descriptor: every byte, again after EINTR and
 * short writes.  On failure err is the errno (EIO for a write of 0
 * bytes) and the rest is dropped. */
typedef struct mp_buf_fd_s {
	int fd;
	int err;
} mp_buf_fd_t;

static inline bool mp_buf_fd_sink(void *ctx, const char *p, size_t n) {
	mp_buf_fd_t *f = ctx;
	while (n > 0 && f->err == 0) {
		ssize_t w = write(f->fd, p, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			f->err = errno;
		} else if (w == 0) {
			f->err = EIO;
		} else {
			p += w;
			n -= (size_t)w;
		}
	}
	return f->err != 0;
}

#endif /* MP_INTERNAL_BUF_H */
