/*
 * pprof_enc.c: the generic half of the pprof writer, shared by the
 * library (prof_pprof.c) and the malloc-prof tool (bin/mp_pprof.c):
 * growable byte buffers, protobuf field encoding, CRC-32, and a gzip
 * writer with its own deflate (LZ77 over a hash chain, one fixed-Huffman
 * block).
 *
 * It knows nothing of the allocator: buffers come from the caller's
 * allocate/free pair (pprof_mem_t) and output goes out with write(2)
 * through the buffered writer of buf.h, so it may run inside the
 * allocator (the library passes base_malloc) and in a plain program (the
 * tool passes malloc).  Only the C library's headers are included, and
 * buf.h, which includes no more.
 */
#include "malloc_prof/internal/pprof_enc.h"
#include "malloc_prof/internal/buf.h"

#include <errno.h>
#include <string.h>

/* Output buffer of the gzip writer: written to the file when full. */
#define PPROF_GZ_OUT_SIZE ((size_t)64 << 10)

/* ------------------------------------------------------------ buffers */

bool pprof_buf_reserve(pprof_buf_t *b, size_t more) {
	if (b->oom)
		return true;
	if (b->len + more <= b->cap)
		return false;
	size_t cap = b->cap < 4096 ? 4096 : b->cap;
	while (cap < b->len + more) {
		cap *= 2;
		if (cap > b->mem->max_bytes) {
			b->oom = true;
			return true;
		}
	}
	uint8_t *p = b->mem->alloc_fn(cap);
	if (p == NULL) {
		b->oom = true;
		return true;
	}
	if (b->len != 0)
		memcpy(p, b->p, b->len);
	if (b->p != NULL)
		b->mem->free_fn(b->p, b->cap);
	b->p = p;
	b->cap = cap;
	return false;
}

void pprof_buf_put(pprof_buf_t *b, const void *data, size_t len) {
	if (len == 0 || pprof_buf_reserve(b, len))
		return;
	memcpy(b->p + b->len, data, len);
	b->len += len;
}

void pprof_buf_release(pprof_buf_t *b) {
	if (b->p != NULL)
		b->mem->free_fn(b->p, b->cap);
	b->p = NULL;
	b->len = b->cap = 0;
	b->oom = false;
}

/* ------------------------------------------------------------ protobuf */

size_t pprof_pb_varint(uint8_t *out, uint64_t v) {
	size_t n = 0;
	while (v >= 0x80) {
		out[n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	out[n++] = (uint8_t)v;
	return n;
}

void pprof_pb_raw_varint(pprof_buf_t *b, uint64_t v) {
	uint8_t tmp[10];
	pprof_buf_put(b, tmp, pprof_pb_varint(tmp, v));
}

/* Wire types: 0 varint, 2 length-delimited. */
static void pprof_pb_tag(pprof_buf_t *b, unsigned field, unsigned wire) {
	pprof_pb_raw_varint(b, ((uint64_t)field << 3) | wire);
}

void pprof_pb_uint(pprof_buf_t *b, unsigned field, uint64_t v) {
	if (v == 0)
		return;
	pprof_pb_tag(b, field, 0);
	pprof_pb_raw_varint(b, v);
}

void pprof_pb_bytes(pprof_buf_t *b, unsigned field, const void *data,
    size_t len) {
	pprof_pb_tag(b, field, 2);
	pprof_pb_raw_varint(b, len);
	pprof_buf_put(b, data, len);
}

/* ----------------------------------------------------------------- gzip */

static uint32_t crc_table[256];
static bool crc_table_ready;

uint32_t pprof_crc32(uint32_t crc, const void *data, size_t len) {
	/* Racy first fill: every thread computes the same values. */
	if (!__atomic_load_n(&crc_table_ready, __ATOMIC_ACQUIRE)) {
		for (uint32_t i = 0; i < 256; i++) {
			uint32_t c = i;
			for (int k = 0; k < 8; k++)
				c = (c & 1) ? 0xedb88320u ^ (c >> 1) : c >> 1;
			crc_table[i] = c;
		}
		__atomic_store_n(&crc_table_ready, true, __ATOMIC_RELEASE);
	}
	const uint8_t *p = data;
	crc = ~crc;
	for (size_t i = 0; i < len; i++)
		crc = crc_table[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
	return ~crc;
}

#define DEFL_WBITS 15
#define DEFL_WSIZE ((size_t)1 << DEFL_WBITS)
#define DEFL_HBITS 15
#define DEFL_HSIZE ((size_t)1 << DEFL_HBITS)
#define DEFL_MIN_MATCH 3
#define DEFL_MAX_MATCH 258
/* Candidates tried per position: enough for profiles, whose repeats are
 * varint-encoded ids and addresses, and bounded for any input. */
#define DEFL_MAX_CHAIN 48

static const uint16_t defl_len_base[29] = {
	3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51,
	59, 67, 83, 99, 115, 131, 163, 195, 227, 258,
};
static const uint8_t defl_len_extra[29] = {
	0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4,
	4, 5, 5, 5, 5, 0,
};
static const uint16_t defl_dist_base[30] = {
	1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385,
	513, 769, 1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385,
	24577,
};
static const uint8_t defl_dist_extra[30] = {
	0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10,
	10, 11, 11, 12, 12, 13, 13,
};

/* Bits go out least significant first; whole bytes through the
 * buffered writer (buf.h) to the file. */
typedef struct defl_out_s {
	mp_buf_t buf;
	mp_buf_fd_t fd;
	uint64_t bits;
	unsigned nbits;
} defl_out_t;

static void defl_byte(defl_out_t *o, uint8_t b) {
	mp_buf_putc(&o->buf, (char)b);
}

static void defl_bits(defl_out_t *o, uint32_t v, unsigned n) {
	o->bits |= (uint64_t)v << o->nbits;
	o->nbits += n;
	while (o->nbits >= 8) {
		defl_byte(o, (uint8_t)o->bits);
		o->bits >>= 8;
		o->nbits -= 8;
	}
}

/* A Huffman code goes out most significant bit first. */
static void defl_code(defl_out_t *o, uint32_t code, unsigned len) {
	uint32_t r = 0;
	for (unsigned i = 0; i < len; i++)
		r |= ((code >> i) & 1) << (len - 1 - i);
	defl_bits(o, r, len);
}

/* A literal/length symbol in the fixed code of RFC 1951, 3.2.6. */
static void defl_sym(defl_out_t *o, unsigned sym) {
	if (sym < 144)
		defl_code(o, 0x30 + sym, 8);
	else if (sym < 256)
		defl_code(o, 0x190 + (sym - 144), 9);
	else if (sym < 280)
		defl_code(o, sym - 256, 7);
	else
		defl_code(o, 0xc0 + (sym - 280), 8);
}

static void defl_match(defl_out_t *o, unsigned len, unsigned dist) {
	unsigned i = 28;
	while (defl_len_base[i] > len)
		i--;
	defl_sym(o, 257 + i);
	defl_bits(o, len - defl_len_base[i], defl_len_extra[i]);
	unsigned d = 29;
	while (defl_dist_base[d] > dist)
		d--;
	defl_code(o, d, 5);
	defl_bits(o, dist - defl_dist_base[d], defl_dist_extra[d]);
}

static uint32_t defl_hash(const uint8_t *p) {
	uint32_t v = ((uint32_t)p[0] << 16) | ((uint32_t)p[1] << 8) | p[2];
	return (v * 2654435761u) >> (32 - DEFL_HBITS);
}

/*
 * One final fixed-Huffman block over the whole input.  Greedy LZ77: at
 * each position the longest match among the last DEFL_MAX_CHAIN earlier
 * positions with the same 3-byte hash, within the 32 KiB window.  head
 * and prev hold positions + 1 (0: none); a chain ends when it leaves the
 * window or stops going backwards (a slot reused by a newer position).
 */
static void defl_block(defl_out_t *o, const uint8_t *in, size_t n,
    uint32_t *head, uint32_t *prev) {
	memset(head, 0, DEFL_HSIZE * sizeof(uint32_t));
	defl_bits(o, 1, 1);             /* BFINAL */
	defl_bits(o, 1, 2);             /* BTYPE 01: fixed codes */
	size_t i = 0;
	while (i < n) {
		size_t best = 0, best_dist = 0;
		if (i + DEFL_MIN_MATCH <= n) {
			uint32_t h = defl_hash(in + i);
			size_t maxlen = n - i < DEFL_MAX_MATCH ? n - i :
			    DEFL_MAX_MATCH;
			uint32_t c = head[h];
			for (unsigned tries = 0; c != 0 &&
			    tries < DEFL_MAX_CHAIN; tries++) {
				size_t cand = c - 1;
				if (cand >= i || i - cand > DEFL_WSIZE)
					break;
				if (in[cand + best] == in[i + best]) {
					size_t l = 0;
					while (l < maxlen &&
					    in[cand + l] == in[i + l])
						l++;
					if (l > best) {
						best = l;
						best_dist = i - cand;
						if (l == maxlen)
							break;
					}
				}
				uint32_t nc = prev[cand & (DEFL_WSIZE - 1)];
				if (nc == 0 || nc - 1 >= cand)
					break;
				c = nc;
			}
		}
		size_t step = best >= DEFL_MIN_MATCH ? best : 1;
		if (best >= DEFL_MIN_MATCH)
			defl_match(o, (unsigned)best, (unsigned)best_dist);
		else
			defl_sym(o, in[i]);
		/* Insert every position the step covers. */
		for (size_t k = i; k < i + step; k++) {
			if (k + DEFL_MIN_MATCH > n)
				break;
			uint32_t h = defl_hash(in + k);
			prev[k & (DEFL_WSIZE - 1)] = head[h];
			head[h] = (uint32_t)(k + 1);
		}
		i += step;
	}
	defl_sym(o, 256);               /* end of block */
	if (o->nbits > 0)
		defl_bits(o, 0, 8 - o->nbits);
}

static void defl_le32(defl_out_t *o, uint32_t v) {
	for (int i = 0; i < 4; i++)
		defl_byte(o, (uint8_t)(v >> (8 * i)));
}

bool pprof_gzip_write(pprof_gzip_t *z, int fd, const void *data, size_t len,
    int *errp) {
	*errp = 0;
	/* The window tables and the output buffer are made once. */
	if (z->head == NULL)
		z->head = z->mem->alloc_fn(DEFL_HSIZE * sizeof(uint32_t));
	if (z->prev == NULL)
		z->prev = z->mem->alloc_fn(DEFL_WSIZE * sizeof(uint32_t));
	if (z->out == NULL)
		z->out = z->mem->alloc_fn(PPROF_GZ_OUT_SIZE);
	if (z->head == NULL || z->prev == NULL || z->out == NULL ||
	    len > UINT32_MAX) {
		*errp = ENOMEM;
		return true;
	}
	defl_out_t o = {.fd = {fd, 0}};
	mp_buf_init(&o.buf, (char *)z->out, PPROF_GZ_OUT_SIZE, mp_buf_fd_sink,
	    &o.fd);
	/* Header (RFC 1952): magic, CM 8 (deflate), no flags, no time,
	 * XFL 0, OS 3 (Unix). */
	static const uint8_t hdr[10] = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3};
	for (size_t i = 0; i < sizeof(hdr); i++)
		defl_byte(&o, hdr[i]);
	defl_block(&o, data, len, z->head, z->prev);
	defl_le32(&o, pprof_crc32(0, data, len));
	defl_le32(&o, (uint32_t)len);
	mp_buf_flush(&o.buf);
	*errp = o.fd.err;
	return o.fd.err != 0;
}

void pprof_gzip_release(pprof_gzip_t *z) {
	if (z->head != NULL)
		z->mem->free_fn(z->head, DEFL_HSIZE * sizeof(uint32_t));
	if (z->prev != NULL)
		z->mem->free_fn(z->prev, DEFL_WSIZE * sizeof(uint32_t));
	if (z->out != NULL)
		z->mem->free_fn(z->out, PPROF_GZ_OUT_SIZE);
	z->head = z->prev = NULL;
	z->out = NULL;
}
