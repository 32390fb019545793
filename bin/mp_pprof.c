/*
 * bin/mp_pprof.c - pprof profiles (profile.proto) in malloc-prof: the
 * reader behind every command (our library's .pb.gz dumps, Go's heap
 * profiles, any pprof heap profile, gzipped or not) and the writer of the
 * `pprof` command.
 *
 * Reading needs a gzip inflater (stored, fixed and dynamic Huffman
 * blocks; CRC-32 and ISIZE checked) and a protobuf decoder.  Both are
 * bounds-checked at every step: a damaged file gives one line naming what
 * is wrong, never numbers.  A gzip bomb stops early: the inflater looks at
 * its first KiBs (a profile's fields?) and at how fast it grows.  The
 * sample types are taken by name (inuse_objects, inuse_space,
 * alloc_objects, alloc_space, as pprof and Go name them); their values
 * are already unbiased, and bounded as heap_v2 counts (MP_COUNT_MAX).
 * Frames are named by the profile's Functions (each Line of a Location is
 * a frame, inlined ones first), else from the address through the
 * Mapping table by the ELF symbolizer, as heap_v2 frames are (a
 * mapping's build ID, when the profile has one, is checked against the
 * file found).
 *
 * Writing reuses the library's encoder (src/pprof_enc.c: protobuf fields,
 * gzip) with malloc'd buffers; only the profile model is the tool's own.
 */
#include "malloc-prof.h"
#include "malloc_prof/internal/pprof_enc.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A larger profile is not one we can read: a gzip bomb or damage. */
#define MP_PPROF_MAX ((size_t)1 << 30)

/* A gzip bomb stops early, long before that: once MP_INF_PEEK bytes are
 * out, they must start like a profile (mp_pprof_prefix: a bomb of zeros
 * does not); past MP_INF_RATIO_FROM, the output may not be more than
 * MP_INF_RATIO times the input read.  Real profiles compress 5 to 20
 * times (the most repetitive we could make, 20,000 samples of a
 * 128-deep recursion, 34 times); deflate's limit is about 1032. */
#define MP_INF_PEEK ((size_t)4 << 10)
#define MP_INF_RATIO_FROM ((size_t)1 << 20)
#define MP_INF_RATIO 250
#define MP_INF_RATIO_EVERY ((size_t)64 << 10)

/* ------------------------------------------------------------ inflate */

/* Why inflating stopped: damage, or data refused before its end. */
typedef enum { MP_INF_DAMAGED, MP_INF_NOT_PROFILE, MP_INF_BOMB } mp_inf_stop_t;

typedef struct {
	const uint8_t *in;
	size_t inlen, pos;
	uint64_t bitbuf;
	unsigned bitcnt;
	uint8_t *out;
	size_t outlen, outcap;
	const char *err;	/* the first error; later reads give 0 */
	mp_inf_stop_t stop;	/* what err is */
	size_t check_at;	/* output size of the next mp_inf_check */
	bool peeked;		/* mp_pprof_prefix said yes */
	char why[512];		/* err, when formatted */
} mp_inf_t;

static bool mp_pprof_prefix(const uint8_t *data, size_t size, char *why,
    size_t whylen);

/* As the output passes check_at: first whether it starts like a
 * profile, then whether it grows too fast for one. */
static bool mp_inf_check(mp_inf_t *s) {
	if (!s->peeked) {
		if (!mp_pprof_prefix(s->out, s->outlen, s->why,
		    sizeof(s->why))) {
			s->err = s->why;
			s->stop = MP_INF_NOT_PROFILE;
			return false;
		}
		s->peeked = true;
		s->check_at = MP_INF_RATIO_FROM;
		return true;
	}
	if (s->outlen / MP_INF_RATIO > s->pos) {
		snprintf(s->why, sizeof(s->why), "it inflates more than %d "
		    "times (%zu bytes from %zu of the file): a gzip bomb? (real "
		    "profiles compress 5 to 20 times; if it is a real one, "
		    "gunzip it and give the raw protobuf)", MP_INF_RATIO,
		    s->outlen, s->pos);
		s->err = s->why;
		s->stop = MP_INF_BOMB;
		return false;
	}
	s->check_at = s->outlen + MP_INF_RATIO_EVERY;
	return true;
}

/* A canonical Huffman code: codes per length, symbols in code order. */
typedef struct {
	uint16_t count[16];
	uint16_t symbol[288];
} mp_huff_t;

static unsigned mp_inf_bits(mp_inf_t *s, unsigned need) {
	while (s->bitcnt < need) {
		if (s->pos == s->inlen) {
			if (s->err == NULL)
				s->err = "the compressed data ends early "
				    "(truncated file)";
			return 0;
		}
		s->bitbuf |= (uint64_t)s->in[s->pos++] << s->bitcnt;
		s->bitcnt += 8;
	}
	unsigned v = (unsigned)(s->bitbuf & ((1u << need) - 1));
	s->bitbuf >>= need;
	s->bitcnt -= need;
	return v;
}

static bool mp_inf_out(mp_inf_t *s, size_t more) {
	/* Before each write: what is out so far is looked at. */
	if (s->outlen >= s->check_at && !mp_inf_check(s))
		return false;
	if (s->outlen + more <= s->outcap)
		return true;
	if (s->outlen + more > MP_PPROF_MAX) {
		s->err = "it inflates to more than 1 GiB, the most malloc-prof "
		    "reads";
		s->stop = MP_INF_BOMB;
		return false;
	}
	size_t cap = s->outcap ? s->outcap : 65536;
	while (cap < s->outlen + more)
		cap *= 2;
	s->out = mp_xrealloc(s->out, cap);
	s->outcap = cap;
	return true;
}

/* Builds H from N code lengths: false if over-subscribed, or incomplete
 * with more than one code (a damaged block). */
static bool mp_huff_build(mp_huff_t *h, const uint8_t *len, unsigned n) {
	memset(h->count, 0, sizeof(h->count));
	for (unsigned i = 0; i < n; i++)
		h->count[len[i]]++;
	if (h->count[0] == n)
		return true;	/* no codes: fine until one is needed */
	int left = 1;
	for (unsigned l = 1; l < 16; l++) {
		left <<= 1;
		left -= h->count[l];
		if (left < 0)
			return false;
	}
	uint16_t offs[16];
	offs[1] = 0;
	for (unsigned l = 1; l < 15; l++)
		offs[l + 1] = offs[l] + h->count[l];
	for (unsigned i = 0; i < n; i++)
		if (len[i] != 0)
			h->symbol[offs[len[i]]++] = (uint16_t)i;
	return left == 0 || n - h->count[0] == 1;
}

static int mp_huff_decode(mp_inf_t *s, const mp_huff_t *h) {
	int code = 0, first = 0, index = 0;
	for (unsigned l = 1; l < 16; l++) {
		code |= (int)mp_inf_bits(s, 1);
		int count = h->count[l];
		if (code - count < first)
			return h->symbol[index + (code - first)];
		index += count;
		first = (first + count) << 1;
		code <<= 1;
	}
	if (s->err == NULL)
		s->err = "a Huffman code that the block does not define";
	return -1;
}

static const uint16_t mp_len_base[29] = {
	3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51,
	59, 67, 83, 99, 115, 131, 163, 195, 227, 258 };
static const uint8_t mp_len_extra[29] = {
	0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4,
	4, 5, 5, 5, 5, 0 };
static const uint16_t mp_dist_base[30] = {
	1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385,
	513, 769, 1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385,
	24577 };
static const uint8_t mp_dist_extra[30] = {
	0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10,
	10, 11, 11, 12, 12, 13, 13 };

/* The symbols of one Huffman block, up to end-of-block.  BASE is where
 * this gzip member's output starts (no distance reaches before it). */
static bool mp_inf_codes(mp_inf_t *s, const mp_huff_t *lc, const mp_huff_t *dc,
    size_t base) {
	for (;;) {
		int sym = mp_huff_decode(s, lc);
		if (s->err != NULL)
			return false;
		if (sym < 256) {
			if (!mp_inf_out(s, 1))
				return false;
			s->out[s->outlen++] = (uint8_t)sym;
			continue;
		}
		if (sym == 256)
			return true;
		sym -= 257;
		if (sym >= 29) {
			s->err = "an invalid length code";
			return false;
		}
		size_t len = mp_len_base[sym] + mp_inf_bits(s, mp_len_extra[sym]);
		int d = mp_huff_decode(s, dc);
		if (s->err != NULL)
			return false;
		if (d >= 30) {
			s->err = "an invalid distance code";
			return false;
		}
		size_t dist = mp_dist_base[d] + mp_inf_bits(s, mp_dist_extra[d]);
		if (s->err != NULL)
			return false;
		if (dist > s->outlen - base) {
			s->err = "a distance before the start of the data";
			return false;
		}
		if (!mp_inf_out(s, len))
			return false;
		/* Byte by byte: the copy may overlap its own output. */
		for (size_t i = 0; i < len; i++, s->outlen++)
			s->out[s->outlen] = s->out[s->outlen - dist];
	}
}

static bool mp_inf_stored(mp_inf_t *s) {
	s->bitbuf = 0;		/* to the byte boundary */
	s->bitcnt = 0;
	if (s->inlen - s->pos < 4) {
		s->err = "the compressed data ends early (truncated file)";
		return false;
	}
	const uint8_t *p = s->in + s->pos;
	unsigned len = p[0] | (unsigned)p[1] << 8;
	unsigned nlen = p[2] | (unsigned)p[3] << 8;
	s->pos += 4;
	if (len != (~nlen & 0xffff)) {
		s->err = "a stored block whose length check fails";
		return false;
	}
	if (s->inlen - s->pos < len) {
		s->err = "the compressed data ends early (truncated file)";
		return false;
	}
	if (len == 0)
		return true;	/* s->out may not exist yet */
	if (!mp_inf_out(s, len))
		return false;
	memcpy(s->out + s->outlen, s->in + s->pos, len);
	s->outlen += len;
	s->pos += len;
	return true;
}

static bool mp_inf_dynamic(mp_inf_t *s, mp_huff_t *lc, mp_huff_t *dc) {
	static const uint8_t order[19] = { 16, 17, 18, 0, 8, 7, 9, 6, 10, 5,
		11, 4, 12, 3, 13, 2, 14, 1, 15 };
	uint8_t len[320];
	unsigned nlen = mp_inf_bits(s, 5) + 257;
	unsigned ndist = mp_inf_bits(s, 5) + 1;
	unsigned ncode = mp_inf_bits(s, 4) + 4;
	if (s->err != NULL)
		return false;
	if (nlen > 286 || ndist > 30) {
		s->err = "a dynamic block with too many codes";
		return false;
	}
	memset(len, 0, 19);
	for (unsigned i = 0; i < ncode; i++)
		len[order[i]] = (uint8_t)mp_inf_bits(s, 3);
	mp_huff_t cl;
	if (s->err != NULL)
		return false;
	if (!mp_huff_build(&cl, len, 19)) {
		s->err = "a dynamic block with a bad code-length code";
		return false;
	}
	unsigned i = 0;
	while (i < nlen + ndist) {
		int sym = mp_huff_decode(s, &cl);
		if (s->err != NULL)
			return false;
		if (sym < 16) {
			len[i++] = (uint8_t)sym;
			continue;
		}
		uint8_t v = 0;
		unsigned rep;
		if (sym == 16) {
			if (i == 0) {
				s->err = "a dynamic block repeating no length";
				return false;
			}
			v = len[i - 1];
			rep = 3 + mp_inf_bits(s, 2);
		} else if (sym == 17) {
			rep = 3 + mp_inf_bits(s, 3);
		} else {
			rep = 11 + mp_inf_bits(s, 7);
		}
		if (i + rep > nlen + ndist) {
			s->err = "a dynamic block with too many lengths";
			return false;
		}
		while (rep-- > 0)
			len[i++] = v;
	}
	if (s->err != NULL)
		return false;
	if (len[256] == 0) {
		s->err = "a dynamic block without an end-of-block code";
		return false;
	}
	if (!mp_huff_build(lc, len, nlen) || !mp_huff_build(dc, len + nlen,
	    ndist)) {
		s->err = "a dynamic block with a bad Huffman code";
		return false;
	}
	return true;
}

/* One deflate stream (RFC 1951) from s->pos, appended to s->out. */
static bool mp_inflate(mp_inf_t *s) {
	static mp_huff_t fixed_lc, fixed_dc;
	static bool fixed_ready;
	if (!fixed_ready) {
		uint8_t len[288];
		unsigned i = 0;
		for (; i < 144; i++)
			len[i] = 8;
		for (; i < 256; i++)
			len[i] = 9;
		for (; i < 280; i++)
			len[i] = 7;
		for (; i < 288; i++)
			len[i] = 8;
		mp_huff_build(&fixed_lc, len, 288);
		memset(len, 5, 30);
		mp_huff_build(&fixed_dc, len, 30);
		fixed_ready = true;
	}
	size_t base = s->outlen;
	unsigned last;
	do {
		last = mp_inf_bits(s, 1);
		unsigned type = mp_inf_bits(s, 2);
		if (s->err != NULL)
			return false;
		mp_huff_t lc, dc;
		bool ok;
		if (type == 0) {
			ok = mp_inf_stored(s);
		} else if (type == 1) {
			ok = mp_inf_codes(s, &fixed_lc, &fixed_dc, base);
		} else if (type == 2) {
			ok = mp_inf_dynamic(s, &lc, &dc) &&
			    mp_inf_codes(s, &lc, &dc, base);
		} else {
			s->err = "a block of the reserved type 3";
			ok = false;
		}
		if (!ok)
			return false;
	} while (!last);
	s->bitbuf = 0;		/* the trailer starts at a byte */
	s->bitcnt = 0;
	return true;
}

/* Gunzips IN (one or more members) into S (out, outlen); false with
 * S's err and stop set. */
static bool mp_gunzip(mp_inf_t *s, const uint8_t *in, size_t n) {
	*s = (mp_inf_t){ .in = in, .inlen = n, .check_at = MP_INF_PEEK };
	do {
		const uint8_t *h = in + s->pos;
		size_t left = n - s->pos;
		if (left < 18 || h[0] != 0x1f || h[1] != 0x8b) {
			s->err = left < 18 ? "the gzip data ends early "
			    "(truncated file)" : "data after the end of the "
			    "gzip stream";
			break;
		}
		if (h[2] != 8 || (h[3] & 0xe0) != 0) {
			s->err = "a gzip header with an unknown method or flags";
			break;
		}
		unsigned flg = h[3];
		size_t p = s->pos + 10;
		if (flg & 4) {		/* FEXTRA */
			size_t xlen = p + 2 <= n ?
			    (size_t)(in[p] | in[p + 1] << 8) : n;
			p = p + 2 + xlen;
		}
		for (unsigned f = 8; f <= 16; f <<= 1) {	/* FNAME, FCOMMENT */
			if (!(flg & f))
				continue;
			while (p < n && in[p] != 0)
				p++;
			p++;
		}
		if (flg & 2)		/* FHCRC */
			p += 2;
		if (p >= n) {
			s->err = "the gzip header ends early (truncated file)";
			break;
		}
		s->pos = p;
		size_t start = s->outlen;
		if (!mp_inflate(s))
			break;
		if (n - s->pos < 8) {
			s->err = "the gzip trailer is missing (truncated file)";
			break;
		}
		const uint8_t *t = in + s->pos;
		uint32_t crc = t[0] | (uint32_t)t[1] << 8 |
		    (uint32_t)t[2] << 16 | (uint32_t)t[3] << 24;
		uint32_t isize = t[4] | (uint32_t)t[5] << 8 |
		    (uint32_t)t[6] << 16 | (uint32_t)t[7] << 24;
		s->pos += 8;
		/* An empty member has no output buffer yet (s->out NULL). */
		const uint8_t *member = s->outlen > start ? s->out + start :
		    (const uint8_t *)"";
		if (pprof_crc32(0, member, s->outlen - start) != crc) {
			s->err = "CRC-32 mismatch (the data is corrupt)";
			break;
		}
		if ((uint32_t)(s->outlen - start) != isize) {
			s->err = "length mismatch with the gzip trailer";
			break;
		}
	} while (s->pos < n);
	if (s->err != NULL) {
		free(s->out);
		s->out = NULL;
		return false;
	}
	return true;
}

/* ----------------------------------------------------------- protobuf */

typedef struct {
	const uint8_t *p, *end;
} mp_pb_t;

/* The decoder's error: one message, the first. */
typedef struct {
	char why[256];
	bool bad;
	bool cut;		/* it is a field cut short by the end of the
				 * data, where a prefix of a profile stops */
} mp_pberr_t;

/* Marks the error about to be recorded as a cut (or not). */
static void mp_pb_cut(mp_pberr_t *e, bool cut) {
	if (!e->bad)
		e->cut = cut;
}

static bool mp_pb_fail(mp_pberr_t *e, const char *fmt, ...) {
	if (!e->bad) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(e->why, sizeof(e->why), fmt, ap);
		va_end(ap);
		e->bad = true;
	}
	return false;
}

static bool mp_pb_varint(mp_pb_t *b, uint64_t *v) {
	uint64_t r = 0;
	for (unsigned shift = 0; shift < 64; shift += 7) {
		if (b->p == b->end)
			return false;
		uint8_t c = *b->p++;
		r |= (uint64_t)(c & 0x7f) << shift;
		if (!(c & 0x80)) {
			*v = r;
			return true;
		}
	}
	return false;		/* more than 10 bytes */
}

/* The next field of message B: its number and wire type, its value
 * (varint, fixed64 or fixed32) in *V, or its bytes in *SUB (wire 2).
 * false at the end of B (E untouched) or on damage (E set). */
static bool mp_pb_next(mp_pb_t *b, uint32_t *field, unsigned *wire, uint64_t *v,
    mp_pb_t *sub, mp_pberr_t *e, const char *what) {
	if (b->p == b->end)
		return false;
	uint64_t tag;
	if (!mp_pb_varint(b, &tag)) {
		mp_pb_cut(e, b->p == b->end);
		return mp_pb_fail(e, "a field tag of %s is cut short", what);
	}
	*field = (uint32_t)(tag >> 3);
	*wire = (unsigned)(tag & 7);
	if (tag >> 3 == 0 || tag >> 3 > UINT32_MAX)
		return mp_pb_fail(e, "%s has a field numbered %" PRIu64, what,
		    tag >> 3);
	size_t left = (size_t)(b->end - b->p);
	switch (*wire) {
	case 0:
		if (!mp_pb_varint(b, v)) {
			mp_pb_cut(e, b->p == b->end);
			return mp_pb_fail(e, "a number in %s is cut short",
			    what);
		}
		return true;
	case 1:
	case 5: {
		size_t k = *wire == 1 ? 8 : 4;
		if (left < k) {
			mp_pb_cut(e, true);
			return mp_pb_fail(e, "a fixed-size field of %s is cut "
			    "short", what);
		}
		*v = 0;
		for (size_t i = 0; i < k; i++)
			*v |= (uint64_t)b->p[i] << (8 * i);
		b->p += k;
		return true;
	}
	case 2: {
		uint64_t len;
		if (!mp_pb_varint(b, &len)) {
			mp_pb_cut(e, b->p == b->end);
			return mp_pb_fail(e, "a length in %s is cut short",
			    what);
		}
		if (len > (uint64_t)(b->end - b->p)) {
			mp_pb_cut(e, true);
			return mp_pb_fail(e, "field %u of %s is longer (%" PRIu64
			    " bytes) than what is left of it (%zu)", *field,
			    what, len, (size_t)(b->end - b->p));
		}
		sub->p = b->p;
		sub->end = b->p + len;
		b->p += len;
		return true;
	}
	default:
		return mp_pb_fail(e, "field %u of %s has wire type %u, which "
		    "profile.proto does not use", *field, what, *wire);
	}
}

/* A repeated integer field, packed (wire 2) or not (wire 0): calls
 * ADD for each value. */
typedef struct {
	uint64_t *v;
	size_t n, cap;
} mp_u64s_t;

static void mp_u64s_add(mp_u64s_t *a, uint64_t v) {
	if (a->n == a->cap) {
		a->cap = a->cap ? 2 * a->cap : 16;
		a->v = mp_xrealloc(a->v, a->cap * sizeof(*a->v));
	}
	a->v[a->n++] = v;
}

static bool mp_pb_repeated(unsigned wire, uint64_t v, mp_pb_t sub,
    mp_u64s_t *out, mp_pberr_t *e, const char *what) {
	if (wire == 0) {
		mp_u64s_add(out, v);
		return true;
	}
	if (wire != 2)
		return mp_pb_fail(e, "%s is not a list of numbers", what);
	while (sub.p < sub.end) {
		if (!mp_pb_varint(&sub, &v))
			return mp_pb_fail(e, "a number in %s is cut short",
			    what);
		mp_u64s_add(out, v);
	}
	return true;
}

/* Slices of the Profile message's repeated message fields. */
typedef struct {
	mp_pb_t *v;
	size_t n, cap;
} mp_slices_t;

static void mp_slices_add(mp_slices_t *a, mp_pb_t s) {
	if (a->n == a->cap) {
		a->cap = a->cap ? 2 * a->cap : 64;
		a->v = mp_xrealloc(a->v, a->cap * sizeof(*a->v));
	}
	a->v[a->n++] = s;
}

/* Fields of profile.proto's Profile (the ones read). */
enum {
	PB_SAMPLE_TYPE = 1, PB_SAMPLE = 2, PB_MAPPING = 3, PB_LOCATION = 4,
	PB_FUNCTION = 5, PB_STRING = 6, PB_PERIOD_TYPE = 11, PB_PERIOD = 12,
	PB_DEFAULT_TYPE = 14, PB_NFIELDS = 15
};

/* The wire type of each Profile field (-1: none such): messages and
 * strings 2, the int64s 0 (comment, a repeated int64, may be packed). */
static const int mp_pb_wire[PB_NFIELDS] = {
	-1, 2, 2, 2, 2, 2, 2, 0, 0, 0, 0, 2, 0, 0, 0 };

/* Whether top-level field FIELD may have wire type WIRE.  Fields after
 * 14 are newer than this reader (doc_url): any wire type mp_pb_next
 * accepts. */
static bool mp_pb_wire_ok(uint64_t field, unsigned wire) {
	return field >= PB_NFIELDS || mp_pb_wire[field] == (int)wire ||
	    (field == 13 && wire == 2);
}

typedef enum {
	MP_WALK_END,		/* every field well-formed */
	MP_WALK_CUT,		/* ... up to one cut short by the end */
	MP_WALK_DAMAGED,	/* a field that is not well-formed */
	MP_WALK_WIRE		/* a field of a wire type not its own */
} mp_walk_t;

/* Walks the top-level fields of the Profile at DATA: how the walk ends,
 * the number of whole fields before in *N, and what is wrong in E. */
static mp_walk_t mp_pb_walk(const uint8_t *data, size_t size, size_t *n,
    mp_pberr_t *e) {
	mp_pb_t b = { data, data + size }, sub;
	uint32_t field;
	unsigned wire;
	uint64_t v;
	*n = 0;
	while (mp_pb_next(&b, &field, &wire, &v, &sub, e, "the profile")) {
		if (!mp_pb_wire_ok(field, wire)) {
			mp_pb_fail(e, "field %u of the profile has wire type "
			    "%u, not its own", field, wire);
			return MP_WALK_WIRE;
		}
		(*n)++;
	}
	return !e->bad ? MP_WALK_END : e->cut ? MP_WALK_CUT : MP_WALK_DAMAGED;
}

bool mp_pprof_detect(const uint8_t *data, size_t size) {
	if (size >= 2 && data[0] == 0x1f && data[1] == 0x8b)
		return true;
	/* A whole walk over the top-level fields: text never gets through
	 * (a heap_v2 dump is recognised before this). */
	mp_pberr_t e = { .bad = false };
	size_t n;
	mp_walk_t w = mp_pb_walk(data, size, &n, &e);
	if (w == MP_WALK_WIRE)
		return false;
	if (w == MP_WALK_END && n > 0)
		return true;
	/* A damaged or cut-short one: its first field is a sample type
	 * (0x0a, then a length, then ValueType's type 0x08), as every
	 * writer orders it; the decoder then says what is wrong. */
	return size >= 3 && data[0] == 0x0a && data[1] < 0x80 &&
	    data[2] == 0x08;
}

static const char mp_gz_heap_v2[] = "it inflates to a heap_v2 dump: "
    "gunzip it first (malloc-prof reads heap_v2 dumps as written)";

/* Whether DATA, the first KiBs of a gzip stream's output, starts like a
 * profile: its fields well-formed up to the end, where one may be cut
 * short.  If not, WHY says what it is. */
static bool mp_pprof_prefix(const uint8_t *data, size_t size, char *why,
    size_t whylen) {
	if (size >= 8 && memcmp(data, "heap_v2/", 8) == 0) {
		snprintf(why, whylen, "%s", mp_gz_heap_v2);
		return false;
	}
	/* Every writer starts with a field of profile.proto's Profile. */
	mp_pb_t b = { data, data + size };
	uint64_t tag = 0;
	if (mp_pb_varint(&b, &tag) && tag >> 3 != 0 && tag >> 3 < PB_NFIELDS &&
	    mp_pb_wire_ok(tag >> 3, (unsigned)(tag & 7))) {
		mp_pberr_t e = { .bad = false };
		size_t n;
		mp_walk_t w = mp_pb_walk(data, size, &n, &e);
		if (w == MP_WALK_END || w == MP_WALK_CUT)
			return true;
		snprintf(why, whylen, "its first %zu bytes inflated are not a "
		    "profile (after %zu fields, %s): a gzip bomb or another "
		    "kind of file; give a pprof heap profile", size, n, e.why);
		return false;
	}
	snprintf(why, whylen, "its first %zu bytes inflated are not a profile "
	    "(it starts with field %" PRIu64 " of wire type %u, not a field of "
	    "profile.proto's Profile): a gzip bomb or another kind of file; "
	    "give a pprof heap profile", size, tag >> 3, (unsigned)(tag & 7));
	return false;
}

typedef struct {
	uint64_t id;
	uint64_t name, file;	/* string indexes */
} mp_pfunc_t;

typedef struct {
	uint64_t id;
	uint64_t addr;
	size_t line0, nlines;	/* in the fnames of the profile */
} mp_ploc_t;

static int mp_pfunc_cmp(const void *a, const void *b) {
	const mp_pfunc_t *x = a, *y = b;
	return x->id < y->id ? -1 : x->id > y->id;
}

static int mp_ploc_cmp(const void *a, const void *b) {
	const mp_ploc_t *x = a, *y = b;
	return x->id < y->id ? -1 : x->id > y->id;
}

static int mp_pmap_cmp(const void *a, const void *b) {
	const mp_mapping_t *x = a, *y = b;
	return x->start < y->start ? -1 : x->start > y->start;
}

/* The decoder's state: the string table and the id-sorted tables. */
typedef struct {
	mp_pberr_t e;
	const uint8_t **str;
	size_t *slen;
	size_t nstr;
	mp_pfunc_t *funcs;
	size_t nfuncs;
	mp_ploc_t *locs;
	size_t nlocs;
} mp_pdec_t;

static bool mp_pstr(mp_pdec_t *d, uint64_t idx, const char *what, char **out) {
	if (idx >= d->nstr)
		return mp_pb_fail(&d->e, "%s refers to string %" PRIu64 " of "
		    "%zu", what, idx, d->nstr);
	*out = mp_xstrndup((const char *)d->str[idx], d->slen[idx]);
	/* Names, paths and types are shown in lines of reports and in
	 * one-line messages: no control characters from the file. */
	mp_printable(*out);
	return true;
}

/* A sample's labels (Label: key = 1, str = 2, num = 3, as string table
 * indexes but num), for --tag and --thread; a label without a key is
 * skipped, a number label's value written in decimal. */
static bool mp_plabels(mp_pdec_t *d, const mp_slices_t *labs, mp_stack_t *s) {
	s->labels = mp_xcalloc(labs->n, sizeof(*s->labels));
	for (size_t i = 0; i < labs->n; i++) {
		mp_pb_t m = labs->v[i], sub;
		uint32_t field;
		unsigned wire;
		uint64_t v, key = 0, str = 0, num = 0;
		bool have_str = false;
		while (mp_pb_next(&m, &field, &wire, &v, &sub, &d->e,
		    "a sample's label")) {
			if (wire != 0)
				continue;
			if (field == 1)
				key = v;
			else if (field == 2) {
				str = v;
				have_str = true;
			} else if (field == 3)
				num = v;
		}
		if (d->e.bad)
			return false;
		if (key == 0)
			continue;
		mp_label_t *l = &s->labels[s->nlabels];
		if (!mp_pstr(d, key, "a sample's label", &l->key))
			return false;
		if (have_str) {
			if (!mp_pstr(d, str, "a sample's label", &l->value)) {
				free(l->key);
				return false;
			}
		} else {
			char buf[24];
			snprintf(buf, sizeof(buf), "%" PRId64, (int64_t)num);
			l->value = mp_xstrdup(buf);
		}
		s->nlabels++;
	}
	return true;
}

static bool mp_pdecode(mp_pdec_t *d, const uint8_t *data, size_t size,
    mp_profile_t *prof) {
	mp_pberr_t *e = &d->e;
	mp_slices_t sl[PB_NFIELDS];
	memset(sl, 0, sizeof(sl));
	mp_pb_t b = { data, data + size }, sub;
	uint32_t field;
	unsigned wire;
	uint64_t v;
	bool ok = false;
	mp_u64s_t ids = { 0 }, vals = { 0 };
	mp_slices_t labs = { 0 };	/* a sample's Label messages */
	int which[MP_NVALUES];	/* value index of each sample type, or -1 */
	uint64_t total[MP_NVALUES] = { 0 };	/* sum of absolute values */
	size_t ntypes = 0;
	char *s1 = NULL, *s2 = NULL;

	while (mp_pb_next(&b, &field, &wire, &v, &sub, e, "the profile")) {
		if (field < PB_NFIELDS && mp_pb_wire[field] == (int)wire &&
		    wire == 2)
			mp_slices_add(&sl[field], sub);
		else if (field == PB_PERIOD && wire == 0)
			prof->period = v;
	}
	if (e->bad)
		goto out;

	/* Strings: index 0 must be "". */
	d->nstr = sl[PB_STRING].n;
	d->str = mp_xcalloc(d->nstr, sizeof(*d->str));
	d->slen = mp_xcalloc(d->nstr, sizeof(*d->slen));
	for (size_t i = 0; i < d->nstr; i++) {
		d->str[i] = sl[PB_STRING].v[i].p;
		d->slen[i] = (size_t)(sl[PB_STRING].v[i].end -
		    sl[PB_STRING].v[i].p);
	}
	if (d->nstr == 0 || d->slen[0] != 0) {
		mp_pb_fail(e, "its string table %s", d->nstr == 0 ?
		    "is missing" : "does not start with \"\"");
		goto out;
	}

	/* Sample types, by name. */
	for (int k = 0; k < MP_NVALUES; k++)
		which[k] = -1;
	static const char *const names[MP_NVALUES] = {
		[MP_INUSE_OBJECTS] = "inuse_objects",
		[MP_INUSE_SPACE] = "inuse_space",
		[MP_ALLOC_OBJECTS] = "alloc_objects",
		[MP_ALLOC_SPACE] = "alloc_space" };
	size_t tlen = 0;
	ntypes = sl[PB_SAMPLE_TYPE].n;
	for (size_t i = 0; i < ntypes; i++) {
		mp_pb_t m = sl[PB_SAMPLE_TYPE].v[i];
		uint64_t type = 0, unit = 0;
		while (mp_pb_next(&m, &field, &wire, &v, &sub, e,
		    "a sample type")) {
			if (field == 1 && wire == 0)
				type = v;
			else if (field == 2 && wire == 0)
				unit = v;
		}
		if (e->bad || !mp_pstr(d, type, "a sample type", &s1) ||
		    !mp_pstr(d, unit, "a sample type", &s2))
			goto out;
		for (int k = 0; k < MP_NVALUES; k++)
			if (which[k] < 0 && strcmp(s1, names[k]) == 0)
				which[k] = (int)i;
		/* The library's fragmentation profile: its pair is read as
		 * the inuse pair (--sample fragmentation_space). */
		if (which[MP_INUSE_OBJECTS] < 0 &&
		    strcmp(s1, "fragmentation_objects") == 0)
			which[MP_INUSE_OBJECTS] = (int)i;
		if (which[MP_INUSE_SPACE] < 0 &&
		    strcmp(s1, "fragmentation_space") == 0)
			which[MP_INUSE_SPACE] = (int)i;
		size_t add = strlen(s1) + strlen(s2) + 2;
		prof->sample_types = mp_xrealloc(prof->sample_types,
		    tlen + add + 1);
		tlen += (size_t)sprintf(prof->sample_types + tlen, "%s%s/%s",
		    tlen ? " " : "", s1, s2);
		free(s1);
		free(s2);
		s1 = s2 = NULL;
	}
	bool heap = false;
	for (int k = 0; k < MP_NVALUES; k++)
		heap |= which[k] >= 0;
	if (!heap) {
		mp_err("\"%s\" is a pprof profile without heap sample types "
		    "(it has: %s): malloc-prof reads heap profiles "
		    "(inuse_space, inuse_objects, alloc_space, alloc_objects)",
		    prof->file, prof->sample_types ? prof->sample_types :
		    "none");
		e->bad = true;
		e->why[0] = '\0';	/* said already */
		goto out;
	}

	/* Functions. */
	d->nfuncs = sl[PB_FUNCTION].n;
	d->funcs = mp_xcalloc(d->nfuncs, sizeof(*d->funcs));
	for (size_t i = 0; i < d->nfuncs; i++) {
		mp_pb_t m = sl[PB_FUNCTION].v[i];
		mp_pfunc_t *f = &d->funcs[i];
		uint64_t sys = 0;
		while (mp_pb_next(&m, &field, &wire, &v, &sub, e,
		    "a function")) {
			if (wire != 0)
				continue;
			if (field == 1)
				f->id = v;
			else if (field == 2)
				f->name = v;
			else if (field == 3)
				sys = v;
			else if (field == 4)
				f->file = v;
		}
		if (e->bad)
			goto out;
		if (f->name == 0)
			f->name = sys;
		if (f->id == 0 || f->name >= d->nstr || f->file >= d->nstr) {
			mp_pb_fail(e, "function %zu has %s", i, f->id == 0 ?
			    "no id" : "a name or file past the string table");
			goto out;
		}
	}
	qsort(d->funcs, d->nfuncs, sizeof(*d->funcs), mp_pfunc_cmp);
	for (size_t i = 1; i < d->nfuncs; i++)
		if (d->funcs[i].id == d->funcs[i - 1].id) {
			mp_pb_fail(e, "two functions have id %" PRIu64,
			    d->funcs[i].id);
			goto out;
		}

	/* Mappings: the memory map frames without names are read through. */
	prof->nmaps = sl[PB_MAPPING].n;
	prof->maps = mp_xcalloc(prof->nmaps, sizeof(*prof->maps));
	for (size_t i = 0; i < prof->nmaps; i++) {
		mp_pb_t m = sl[PB_MAPPING].v[i];
		mp_mapping_t *mp = &prof->maps[i];
		uint64_t file = 0, build = 0;
		while (mp_pb_next(&m, &field, &wire, &v, &sub, e,
		    "a mapping")) {
			if (wire != 0)
				continue;
			if (field == 2)
				mp->start = v;
			else if (field == 3)
				mp->end = v;
			else if (field == 4)
				mp->offset = v;
			else if (field == 5)
				file = v;
			else if (field == 6)
				build = v;
		}
		if (e->bad || !mp_pstr(d, file, "a mapping", &mp->path) ||
		    !mp_pstr(d, build, "a mapping", &mp->build_id))
			goto out;
		memcpy(mp->perms, "r-xp", 5);
		size_t pl = strlen(mp->path);
		if (pl > 10 && strcmp(mp->path + pl - 10, " (deleted)") == 0) {
			mp->path[pl - 10] = '\0';
			mp->deleted = true;
		}
	}
	qsort(prof->maps, prof->nmaps, sizeof(*prof->maps), mp_pmap_cmp);
	prof->have_maps = prof->nmaps > 0;

	/* Locations: each Line is a frame named by its function. */
	d->nlocs = sl[PB_LOCATION].n;
	d->locs = mp_xcalloc(d->nlocs, sizeof(*d->locs));
	size_t capf = 0;
	for (size_t i = 0; i < d->nlocs; i++) {
		mp_pb_t m = sl[PB_LOCATION].v[i];
		mp_ploc_t *l = &d->locs[i];
		l->line0 = prof->nfnames;
		while (mp_pb_next(&m, &field, &wire, &v, &sub, e,
		    "a location")) {
			if (field == 1 && wire == 0)
				l->id = v;
			else if (field == 3 && wire == 0)
				l->addr = v;
			if (field != 4 || wire != 2)
				continue;
			uint64_t fid = 0, line = 0;
			mp_pb_t lsub;
			while (mp_pb_next(&sub, &field, &wire, &v, &lsub, e,
			    "a line")) {
				if (field == 1 && wire == 0)
					fid = v;
				else if (field == 2 && wire == 0)
					line = v;
			}
			if (e->bad)
				goto out;
			mp_pfunc_t key = { .id = fid };
			const mp_pfunc_t *f = bsearch(&key, d->funcs,
			    d->nfuncs, sizeof(*d->funcs), mp_pfunc_cmp);
			if (f == NULL) {
				mp_pb_fail(e, "location %" PRIu64 " refers to "
				    "function %" PRIu64 ", which it does not "
				    "define", l->id, fid);
				goto out;
			}
			/* Unnamed (or a name starting with a NUL byte, which
			 * would print as ""): use the address. */
			if (strnlen((const char *)d->str[f->name],
			    d->slen[f->name]) == 0)
				continue;
			if (prof->nfnames == capf) {
				capf = capf ? 2 * capf : 256;
				prof->fnames = mp_xrealloc(prof->fnames,
				    capf * sizeof(*prof->fnames));
			}
			mp_fname_t *fn = &prof->fnames[prof->nfnames++];
			mp_pstr(d, f->name, "", &fn->name);
			mp_pstr(d, f->file, "", &fn->file);
			fn->line = (int64_t)line;
		}
		if (e->bad)
			goto out;
		l->nlines = prof->nfnames - l->line0;
		if (l->id == 0) {
			mp_pb_fail(e, "location %zu has no id", i);
			goto out;
		}
	}
	qsort(d->locs, d->nlocs, sizeof(*d->locs), mp_ploc_cmp);
	for (size_t i = 1; i < d->nlocs; i++)
		if (d->locs[i].id == d->locs[i - 1].id) {
			mp_pb_fail(e, "two locations have id %" PRIu64,
			    d->locs[i].id);
			goto out;
		}

	/* Samples. */
	prof->stacks = mp_xcalloc(sl[PB_SAMPLE].n, sizeof(*prof->stacks));
	for (size_t i = 0; i < sl[PB_SAMPLE].n; i++) {
		mp_pb_t m = sl[PB_SAMPLE].v[i];
		ids.n = vals.n = labs.n = 0;
		while (mp_pb_next(&m, &field, &wire, &v, &sub, e, "a sample")) {
			if (field == 1 && !mp_pb_repeated(wire, v, sub, &ids,
			    e, "a sample's locations"))
				goto out;
			if (field == 2 && !mp_pb_repeated(wire, v, sub, &vals,
			    e, "a sample's values"))
				goto out;
			if (field == 3 && wire == 2)
				mp_slices_add(&labs, sub);
		}
		if (e->bad)
			goto out;
		if (vals.n != ntypes) {
			mp_pb_fail(e, "sample %zu has %zu values for %zu sample "
			    "types", i, vals.n, ntypes);
			goto out;
		}
		size_t nf = 0;
		for (size_t k = 0; k < ids.n; k++) {
			mp_ploc_t key = { .id = ids.v[k] };
			const mp_ploc_t *l = bsearch(&key, d->locs, d->nlocs,
			    sizeof(*d->locs), mp_ploc_cmp);
			if (l == NULL) {
				mp_pb_fail(e, "sample %zu refers to location %"
				    PRIu64 ", which it does not define", i,
				    ids.v[k]);
				goto out;
			}
			nf += l->nlines ? l->nlines : 1;
		}
		if (nf == 0 || nf > UINT32_MAX)
			continue;	/* nothing to charge it to */
		/* int64 values, negative in a diff: bounded as heap_v2's
		 * (MP_COUNT_MAX), so that sums cannot overflow. */
		for (int k = 0; k < MP_NVALUES; k++) {
			if (which[k] < 0)
				continue;
			uint64_t x = vals.v[which[k]];
			uint64_t mag = (int64_t)x < 0 ? -x : x;
			if (mag > MP_COUNT_MAX) {
				mp_pb_fail(e, "sample %zu has %s %" PRId64 ", "
				    "which cannot be real (more than 2^62)", i,
				    names[k], (int64_t)x);
				goto out;
			}
			total[k] += mag;
			if (total[k] > MP_COUNT_MAX) {
				mp_pb_fail(e, "its samples up to sample %zu add "
				    "up to more than 2^62 %s, which cannot be "
				    "real", i, names[k]);
				goto out;
			}
		}
		mp_stack_t *s = &prof->stacks[prof->nstacks++];
		s->pcs = mp_xmalloc(nf * sizeof(*s->pcs));
		s->fn = mp_xmalloc(nf * sizeof(*s->fn));
		s->npcs = (uint32_t)nf;
		nf = 0;
		for (size_t k = 0; k < ids.n; k++) {
			mp_ploc_t key = { .id = ids.v[k] };
			const mp_ploc_t *l = bsearch(&key, d->locs, d->nlocs,
			    sizeof(*d->locs), mp_ploc_cmp);
			for (size_t j = 0; j < (l->nlines ? l->nlines : 1);
			    j++, nf++) {
				s->pcs[nf] = l->addr;
				s->fn[nf] = l->nlines ? (uint32_t)(l->line0 + j) :
				    UINT32_MAX;
			}
		}
		for (int k = 0; k < MP_NVALUES; k++) {
			int64_t x = which[k] >= 0 ?
			    (int64_t)vals.v[which[k]] : 0;
			s->val[k] = (double)x;
			s->raw.v[k] = x > 0 ? (uint64_t)x : 0;
		}
		if (labs.n > 0 && !mp_plabels(d, &labs, s))
			goto out;
	}
	ok = true;
out:
	for (int f = 0; f < PB_NFIELDS; f++)
		free(sl[f].v);
	free(ids.v);
	free(vals.v);
	free(labs.v);
	free(s1);
	free(s2);
	return ok;
}

bool mp_pprof_read(const char *file, const uint8_t *data, size_t size,
    mp_profile_t *prof) {
	uint8_t *raw = NULL;
	size_t rawlen = size;
	bool gz = size >= 2 && data[0] == 0x1f && data[1] == 0x8b;
	if (gz) {
		mp_inf_t s;
		bool ok = mp_gunzip(&s, data, size);
		/* Smaller than MP_INF_PEEK, not looked at yet. */
		if (ok && s.outlen >= 8 && memcmp(s.out, "heap_v2/", 8) == 0) {
			free(s.out);
			ok = false;
			s.err = mp_gz_heap_v2;
			s.stop = MP_INF_NOT_PROFILE;
		}
		if (!ok) {
			if (s.stop == MP_INF_NOT_PROFILE)
				mp_err("\"%s\" is gzip data but not a pprof "
				    "profile: %s", file, s.err);
			else if (s.stop == MP_INF_BOMB)
				mp_err("\"%s\": refused: %s", file, s.err);
			else
				mp_err("\"%s\": damaged gzip data: %s; take the "
				    "profile again", file, s.err);
			return false;
		}
		raw = s.out;
		rawlen = s.outlen;
		/* Empty gzip members inflate to nothing (raw NULL). */
		data = raw != NULL ? raw : (const uint8_t *)"";
	}
	prof->format = gz ? "pprof (gzip)" : "pprof";
	prof->exact_pcs = true;
	mp_pdec_t d;
	memset(&d, 0, sizeof(d));
	bool ok = mp_pdecode(&d, data, rawlen, prof);
	if (!ok && d.e.why[0] != '\0')
		mp_err("\"%s\": damaged pprof profile: %s; take the profile "
		    "again", file, d.e.why);
	free(d.str);
	free(d.slen);
	free(d.funcs);
	free(d.locs);
	free(raw);
	return ok;
}

/* ------------------------------------------------------------- writer */

static void *mp_enc_alloc(size_t n) {
	return malloc(n);
}

static void mp_enc_free(void *p, size_t n) {
	(void)n;
	free(p);
}

static const pprof_mem_t mp_enc_mem = { mp_enc_alloc, mp_enc_free,
	MP_PPROF_MAX };

/* One location of the profile being converted: its address (the call
 * site itself) and, for a frame named by a pprof input, its fname. */
typedef struct {
	uint64_t addr;
	uint32_t fn;
	uint64_t id;		/* 0: empty slot */
} mp_lslot_t;

struct mp_pprof_out {
	mp_symbolizer_t *sym;
	mp_report_t *strs;	/* the string table: interned, dense ids */
	pprof_buf_t samples, maps, locs, funcs;	/* encoded fields */
	pprof_buf_t msg, sub, packed;		/* one message being built */
	uint64_t *func_of;	/* string id of a name -> function id */
	size_t nfunc_of;
	uint64_t nfuncs, nlocs, nmapids;
	/* Per input profile: addresses differ from run to run. */
	const mp_profile_t *cur;
	uint64_t *map_id;	/* cur->maps index -> mapping id (0: none) */
	mp_lslot_t *lslot;
	size_t lcap, ln;
};

mp_pprof_out_t *mp_pprof_out_new(mp_symbolizer_t *sym) {
	mp_pprof_out_t *pp = mp_xcalloc(1, sizeof(*pp));
	pp->sym = sym;
	pp->strs = mp_report_new();
	mp_report_intern(pp->strs, "");	/* string 0 */
	pprof_buf_t *bufs[] = { &pp->samples, &pp->maps, &pp->locs,
		&pp->funcs, &pp->msg, &pp->sub, &pp->packed };
	for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++)
		bufs[i]->mem = &mp_enc_mem;
	return pp;
}

void mp_pprof_out_free(mp_pprof_out_t *pp) {
	pprof_buf_t *bufs[] = { &pp->samples, &pp->maps, &pp->locs,
		&pp->funcs, &pp->msg, &pp->sub, &pp->packed };
	for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++)
		pprof_buf_release(bufs[i]);
	mp_report_free(pp->strs);
	free(pp->func_of);
	free(pp->map_id);
	free(pp->lslot);
	free(pp);
}

static uint64_t mp_pp_str(mp_pprof_out_t *pp, const char *s) {
	return mp_report_intern(pp->strs, s);
}

/* The mapping id of M (of pp->cur), its Mapping written the first time. */
static uint64_t mp_pp_mapping(mp_pprof_out_t *pp, const mp_mapping_t *m) {
	size_t i = (size_t)(m - pp->cur->maps);
	if (pp->map_id[i] != 0)
		return pp->map_id[i];
	const char *why, *build = "";
	if (m->path[0] == '/') {
		const mp_elf_t *e = mp_sym_file(pp->sym, m, &why);
		if (e != NULL)
			build = mp_elf_build_id(e);
	}
	uint64_t id = pp->map_id[i] = ++pp->nmapids;
	pprof_buf_t *b = &pp->msg;
	b->len = 0;
	pprof_pb_uint(b, 1, id);
	pprof_pb_uint(b, 2, m->start);
	pprof_pb_uint(b, 3, m->end);
	pprof_pb_uint(b, 4, m->offset);
	pprof_pb_uint(b, 5, mp_pp_str(pp, m->path));
	pprof_pb_uint(b, 6, mp_pp_str(pp, build));
	/* Frames are named here: pprof must not symbolize them again. */
	pprof_pb_uint(b, 7, 1);
	pprof_pb_uint(b, 8, 1);
	pprof_pb_uint(b, 9, 1);
	pprof_pb_bytes(&pp->maps, 3, b->p, b->len);
	return id;
}

static uint64_t mp_pp_function(mp_pprof_out_t *pp, const char *name,
    const char *file) {
	uint64_t sid = mp_pp_str(pp, name);
	if (sid >= pp->nfunc_of) {
		size_t n = pp->nfunc_of ? pp->nfunc_of : 1024;
		while (n <= sid)
			n *= 2;
		pp->func_of = mp_xrealloc(pp->func_of, n * sizeof(uint64_t));
		memset(pp->func_of + pp->nfunc_of, 0,
		    (n - pp->nfunc_of) * sizeof(uint64_t));
		pp->nfunc_of = n;
	}
	if (pp->func_of[sid] != 0)
		return pp->func_of[sid];
	uint64_t id = pp->func_of[sid] = ++pp->nfuncs;
	pprof_buf_t *b = &pp->msg;
	b->len = 0;
	pprof_pb_uint(b, 1, id);
	pprof_pb_uint(b, 2, sid);
	pprof_pb_uint(b, 3, sid);
	pprof_pb_uint(b, 4, mp_pp_str(pp, file != NULL ? file : ""));
	pprof_pb_bytes(&pp->funcs, 5, b->p, b->len);
	return id;
}

static void mp_pp_switch(mp_pprof_out_t *pp, const mp_profile_t *prof) {
	pp->cur = prof;
	free(pp->map_id);
	pp->map_id = mp_xcalloc(prof->nmaps, sizeof(*pp->map_id));
	free(pp->lslot);
	pp->lslot = NULL;
	pp->lcap = pp->ln = 0;
}

/* The location id of frame K of S, written the first time. */
static uint64_t mp_pp_location(mp_pprof_out_t *pp, const mp_stack_t *s,
    uint32_t k) {
	const mp_profile_t *prof = pp->cur;
	uint64_t addr = s->pcs[k];
	if (k > 0 && !prof->exact_pcs && addr != 0)
		addr--;		/* a return address: the call is before */
	uint32_t fn = s->fn != NULL ? s->fn[k] : UINT32_MAX;
	if (2 * (pp->ln + 1) > pp->lcap) {
		size_t cap = pp->lcap ? 2 * pp->lcap : 4096;
		mp_lslot_t *t = mp_xcalloc(cap, sizeof(*t));
		for (size_t i = 0; i < pp->lcap; i++) {
			if (pp->lslot[i].id == 0)
				continue;
			uint64_t h = (pp->lslot[i].addr ^
			    (uint64_t)pp->lslot[i].fn << 32) *
			    0x9e3779b97f4a7c15ull;
			size_t j = (size_t)(h >> 20) & (cap - 1);
			while (t[j].id != 0)
				j = (j + 1) & (cap - 1);
			t[j] = pp->lslot[i];
		}
		free(pp->lslot);
		pp->lslot = t;
		pp->lcap = cap;
	}
	uint64_t h = (addr ^ (uint64_t)fn << 32) * 0x9e3779b97f4a7c15ull;
	size_t j = (size_t)(h >> 20) & (pp->lcap - 1);
	for (; pp->lslot[j].id != 0; j = (j + 1) & (pp->lcap - 1))
		if (pp->lslot[j].addr == addr && pp->lslot[j].fn == fn)
			return pp->lslot[j].id;

	const char *name, *file;
	unsigned line;
	char *copy = NULL;
	if (fn != UINT32_MAX) {
		name = prof->fnames[fn].name;
		file = prof->fnames[fn].file;
		line = prof->fnames[fn].line > 0 &&
		    prof->fnames[fn].line <= UINT32_MAX ?
		    (unsigned)prof->fnames[fn].line : 0;
	} else {
		/* The symbolizer's buffer is reused: keep a copy. */
		name = copy = mp_xstrdup(mp_sym_frame_line(pp->sym, prof, addr,
		    true, &file, &line));
	}
	uint64_t fid = mp_pp_function(pp, name, file);
	const mp_mapping_t *m = mp_profile_mapping(prof, addr);
	uint64_t mid = m != NULL && m->path[0] != '\0' ?
	    mp_pp_mapping(pp, m) : 0;
	free(copy);

	uint64_t id = ++pp->nlocs;
	pp->lslot[j].addr = addr;
	pp->lslot[j].fn = fn;
	pp->lslot[j].id = id;
	pp->ln++;
	pprof_buf_t *b = &pp->msg;
	b->len = 0;
	pprof_pb_uint(b, 1, id);
	pprof_pb_uint(b, 2, mid);
	pprof_pb_uint(b, 3, addr);
	pp->sub.len = 0;
	pprof_pb_uint(&pp->sub, 1, fid);
	pprof_pb_uint(&pp->sub, 2, line);
	pprof_pb_bytes(b, 4, pp->sub.p, pp->sub.len);
	pprof_pb_bytes(&pp->locs, 4, b->p, b->len);
	return id;
}

void mp_pprof_out_sample(mp_pprof_out_t *pp, const mp_profile_t *prof,
    const mp_stack_t *s, uint32_t first, const double *val, int sign) {
	if (prof != pp->cur)
		mp_pp_switch(pp, prof);
	/* Location ids leaf first, as pprof orders them. */
	uint64_t *ids = mp_xmalloc((s->npcs - first + 1) * sizeof(*ids));
	for (uint32_t k = first; k < s->npcs; k++)
		ids[k - first] = mp_pp_location(pp, s, k);
	pprof_buf_t *b = &pp->sub;
	b->len = 0;
	pp->packed.len = 0;
	for (uint32_t k = first; k < s->npcs; k++)
		pprof_pb_raw_varint(&pp->packed, ids[k - first]);
	free(ids);
	pprof_pb_bytes(b, 1, pp->packed.p, pp->packed.len);
	pp->packed.len = 0;
	for (int k = 0; k < MP_NVALUES; k++)
		pprof_pb_raw_varint(&pp->packed,
		    (uint64_t)(sign * (int64_t)llround(val[k])));
	pprof_pb_bytes(b, 2, pp->packed.p, pp->packed.len);
	/* Its labels, kept (as strings: a number label's too). */
	for (uint32_t k = 0; k < s->nlabels; k++) {
		uint8_t lab[24];
		size_t n = 0;
		lab[n++] = (1 << 3) | 0;
		n += pprof_pb_varint(lab + n, mp_pp_str(pp, s->labels[k].key));
		lab[n++] = (2 << 3) | 0;
		n += pprof_pb_varint(lab + n,
		    mp_pp_str(pp, s->labels[k].value));
		pprof_pb_bytes(b, 3, lab, n);
	}
	pprof_pb_bytes(&pp->samples, 2, b->p, b->len);
}

static void mp_pp_value_type(mp_pprof_out_t *pp, pprof_buf_t *out,
    unsigned field, const char *type, const char *unit) {
	pprof_buf_t *b = &pp->msg;
	b->len = 0;
	pprof_pb_uint(b, 1, mp_pp_str(pp, type));
	pprof_pb_uint(b, 2, mp_pp_str(pp, unit));
	pprof_pb_bytes(out, field, b->p, b->len);
}

bool mp_pprof_out_write(mp_pprof_out_t *pp, uint64_t period, int fd,
    const char *path) {
	pprof_buf_t prof = { .mem = &mp_enc_mem };
	/* The four heap types, in the order of the library's dumps. */
	mp_pp_value_type(pp, &prof, 1, "inuse_objects", "count");
	mp_pp_value_type(pp, &prof, 1, "inuse_space", "bytes");
	mp_pp_value_type(pp, &prof, 1, "alloc_objects", "count");
	mp_pp_value_type(pp, &prof, 1, "alloc_space", "bytes");
	pprof_buf_put(&prof, pp->samples.p, pp->samples.len);
	pprof_buf_put(&prof, pp->maps.p, pp->maps.len);
	pprof_buf_put(&prof, pp->locs.p, pp->locs.len);
	pprof_buf_put(&prof, pp->funcs.p, pp->funcs.len);
	mp_pp_value_type(pp, &prof, 11, "space", "bytes");
	pprof_pb_uint(&prof, 12, period);
	pprof_pb_uint(&prof, 14, mp_pp_str(pp, "inuse_space"));
	/* The string table last: every index above is assigned by now. */
	size_t n = mp_report_nnames(pp->strs);
	for (size_t i = 0; i < n; i++) {
		const char *s = mp_report_name(pp->strs, (uint32_t)i);
		pprof_pb_bytes(&prof, 6, s, strlen(s));
	}
	bool oom = prof.oom || pp->samples.oom || pp->maps.oom ||
	    pp->locs.oom || pp->funcs.oom || pp->msg.oom || pp->sub.oom ||
	    pp->packed.oom;
	bool ok = false;
	if (oom) {
		mp_err("cannot write \"%s\": the profile is larger than 1 GiB "
		    "or memory ran out", path);
	} else {
		pprof_gzip_t z = { .mem = &mp_enc_mem };
		int err;
		if (pprof_gzip_write(&z, fd, prof.p, prof.len, &err))
			mp_err("cannot write \"%s\": %s", path, strerror(err));
		else
			ok = true;
		pprof_gzip_release(&z);
	}
	pprof_buf_release(&prof);
	return ok;
}
