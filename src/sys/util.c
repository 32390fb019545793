/*
 * util.c: output that never allocates.  A small printf subset formats into
 * caller buffers (the C library's printf family may call malloc, and we
 * are malloc), and messages leave through write(2) or the public
 * malloc_message hook.  Error reporting, aborts and failed assertions are
 * built on top, so every file can report problems from any lock context.
 * The buffered writer of dumps, statistics and pprof output is buf.h
 * (inline, for pprof_enc.c's sake) plus its printf here.
 */
#include "malloc_prof/internal/internal.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

/*
 * Where messages go instead of stderr when set (jemalloc's hook of the
 * same name).  Called with a NULL cbopaque and one whole message.
 */
MP_EXPORT void (*MP_PUBLIC(malloc_message))(void *cbopaque, const char *s)
    = NULL;

/* ------------------------------------------------------------ formatter */

/*
 * The output of one mp_vsnprintf call.  `len` counts every character the
 * format produces, stored or not, because the return value is the length
 * the full output would have had (C99 snprintf semantics).
 */
typedef struct mp_fmt_out_s {
	char *buf;
	size_t size;
	size_t len;
} mp_fmt_out_t;

static void mp_fmt_putc(mp_fmt_out_t *out, char c) {
	/* Keep the last byte for the terminating NUL. */
	if (out->len + 1 < out->size)
		out->buf[out->len] = c;
	out->len++;
}

static void mp_fmt_pad(mp_fmt_out_t *out, char c, size_t n) {
	while (n-- > 0)
		mp_fmt_putc(out, c);
}

static void mp_fmt_putn(mp_fmt_out_t *out, const char *s, size_t n) {
	for (size_t i = 0; i < n; i++)
		mp_fmt_putc(out, s[i]);
}

/* One conversion's flags, width and precision. */
typedef struct mp_fmt_spec_s {
	bool left;          /* '-': pad on the right */
	bool zero;          /* '0': pad numbers with zeros */
	size_t width;
	bool has_prec;
	size_t prec;
} mp_fmt_spec_t;

/* Emit `len` bytes of s padded to the field width with spaces. */
static void mp_fmt_field(mp_fmt_out_t *out, const mp_fmt_spec_t *spec,
    const char *s, size_t len) {
	size_t pad = spec->width > len ? spec->width - len : 0;
	if (!spec->left)
		mp_fmt_pad(out, ' ', pad);
	mp_fmt_putn(out, s, len);
	if (spec->left)
		mp_fmt_pad(out, ' ', pad);
}

/*
 * Emit an integer: `prefix` ("-", "0x" or "") then at least `prec` digits
 * of v in `base`, padded as C specifies: zeros go between the prefix and
 * the digits, and the '0' flag is ignored when a precision is given.
 */
static void mp_fmt_uint(mp_fmt_out_t *out, const mp_fmt_spec_t *spec,
    const char *prefix, uintmax_t v, unsigned base) {
	char digits[sizeof(uintmax_t) * CHAR_BIT];
	size_t nd = 0;
	size_t prec = spec->has_prec ? spec->prec : 1;
	while (v != 0) {
		digits[nd++] = "0123456789abcdef"[v % base];
		v /= base;
	}
	/* Precision 0 with value 0 prints no digits at all (C rule). */
	size_t nzero = prec > nd ? prec - nd : 0;
	size_t plen = strlen(prefix);
	size_t total = plen + nzero + nd;
	size_t pad = spec->width > total ? spec->width - total : 0;
	if (!spec->left && spec->zero && !spec->has_prec) {
		nzero += pad;
		pad = 0;
	}
	if (!spec->left)
		mp_fmt_pad(out, ' ', pad);
	mp_fmt_putn(out, prefix, plen);
	mp_fmt_pad(out, '0', nzero);
	while (nd > 0)
		mp_fmt_putc(out, digits[--nd]);
	if (spec->left)
		mp_fmt_pad(out, ' ', pad);
}

/* A run of decimal digits (a width or precision); advances *f. */
static size_t mp_fmt_number(const char **f) {
	size_t n = 0;
	while (**f >= '0' && **f <= '9')
		n = n * 10 + (size_t)(*(*f)++ - '0');
	return n;
}

/* Length modifiers we understand. */
typedef enum {
	MP_LEN_NONE, MP_LEN_HH, MP_LEN_H, MP_LEN_L, MP_LEN_LL, MP_LEN_Z,
	MP_LEN_J, MP_LEN_T,
} mp_fmt_len_t;

static intmax_t mp_fmt_arg_signed(va_list *ap, mp_fmt_len_t len) {
	switch (len) {
	case MP_LEN_HH: return (signed char)va_arg(*ap, int);
	case MP_LEN_H: return (short)va_arg(*ap, int);
	case MP_LEN_L: return va_arg(*ap, long);
	case MP_LEN_LL: return va_arg(*ap, long long);
	case MP_LEN_Z: return va_arg(*ap, ssize_t);
	case MP_LEN_J: return va_arg(*ap, intmax_t);
	case MP_LEN_T: return va_arg(*ap, ptrdiff_t);
	default: return va_arg(*ap, int);
	}
}

static uintmax_t mp_fmt_arg_unsigned(va_list *ap, mp_fmt_len_t len) {
	switch (len) {
	case MP_LEN_HH: return (unsigned char)va_arg(*ap, unsigned);
	case MP_LEN_H: return (unsigned short)va_arg(*ap, unsigned);
	case MP_LEN_L: return va_arg(*ap, unsigned long);
	case MP_LEN_LL: return va_arg(*ap, unsigned long long);
	case MP_LEN_Z: return va_arg(*ap, size_t);
	case MP_LEN_J: return va_arg(*ap, uintmax_t);
	case MP_LEN_T: return (uintmax_t)va_arg(*ap, ptrdiff_t);
	default: return va_arg(*ap, unsigned);
	}
}

/*
 * A printf subset with C semantics: %s %c %d %i %u %x %X %p %% with the
 * length modifiers hh h l ll z j t, flags '-' and '0', a field width
 * (digits or '*') and a precision (digits or '*'; for %s the maximum
 * length, for integers the minimum digit count).  Output is always
 * NUL-terminated when size > 0; the return value is the length of the
 * untruncated output.  %p and a NULL %s print like glibc ("(nil)",
 * "(null)").  An unknown conversion is copied through verbatim.
 */
int mp_vsnprintf(char *buf, size_t size, const char *fmt, va_list ap) {
	mp_fmt_out_t out = {buf, size, 0};
	va_list args;
	/* va_list may be an array type: work on a copy we can point to. */
	va_copy(args, ap);
	const char *f = fmt;
	while (*f != '\0') {
		if (*f != '%') {
			mp_fmt_putc(&out, *f++);
			continue;
		}
		const char *conv_start = f++;
		mp_fmt_spec_t spec = {false, false, 0, false, 0};
		for (;; f++) {
			if (*f == '-')
				spec.left = true;
			else if (*f == '0')
				spec.zero = true;
			else
				break;
		}
		if (*f == '*') {
			int w = va_arg(args, int);
			/* A negative width is a '-' flag and a width. */
			if (w < 0) {
				spec.left = true;
				spec.width = -(size_t)w;
			} else {
				spec.width = (size_t)w;
			}
			f++;
		} else {
			spec.width = mp_fmt_number(&f);
		}
		if (*f == '.') {
			f++;
			spec.has_prec = true;
			if (*f == '*') {
				int p = va_arg(args, int);
				/* A negative precision is taken as omitted. */
				spec.has_prec = p >= 0;
				spec.prec = p >= 0 ? (size_t)p : 0;
				f++;
			} else {
				spec.prec = mp_fmt_number(&f);
			}
		}
		mp_fmt_len_t len = MP_LEN_NONE;
		switch (*f) {
		case 'h':
			f++;
			len = MP_LEN_H;
			if (*f == 'h') {
				f++;
				len = MP_LEN_HH;
			}
			break;
		case 'l':
			f++;
			len = MP_LEN_L;
			if (*f == 'l') {
				f++;
				len = MP_LEN_LL;
			}
			break;
		case 'z': f++; len = MP_LEN_Z; break;
		case 'j': f++; len = MP_LEN_J; break;
		case 't': f++; len = MP_LEN_T; break;
		default: break;
		}
		switch (*f) {
		case '%':
			mp_fmt_putc(&out, '%');
			break;
		case 'c': {
			char c = (char)va_arg(args, int);
			mp_fmt_field(&out, &spec, &c, 1);
			break;
		}
		case 's': {
			const char *s = va_arg(args, const char *);
			if (s == NULL)
				s = "(null)";
			/* Never read past the precision: s need not be
			 * NUL-terminated then. */
			size_t n = 0;
			while ((!spec.has_prec || n < spec.prec) &&
			    s[n] != '\0')
				n++;
			mp_fmt_field(&out, &spec, s, n);
			break;
		}
		case 'd':
		case 'i': {
			intmax_t v = mp_fmt_arg_signed(&args, len);
			uintmax_t mag = v < 0 ? -(uintmax_t)v : (uintmax_t)v;
			mp_fmt_uint(&out, &spec, v < 0 ? "-" : "", mag, 10);
			break;
		}
		case 'u':
			mp_fmt_uint(&out, &spec, "",
			    mp_fmt_arg_unsigned(&args, len), 10);
			break;
		case 'x':
			mp_fmt_uint(&out, &spec, "",
			    mp_fmt_arg_unsigned(&args, len), 16);
			break;
		case 'X': {
			/* Rare: format lower case, then raise the letters we
			 * just emitted (they are still in the buffer, or
			 * were cut off and do not matter). */
			size_t start = out.len;
			mp_fmt_uint(&out, &spec, "",
			    mp_fmt_arg_unsigned(&args, len), 16);
			for (size_t i = start; i < out.len && i + 1 < size;
			    i++) {
				if (buf[i] >= 'a' && buf[i] <= 'f')
					buf[i] = (char)(buf[i] - 'a' + 'A');
			}
			break;
		}
		case 'p': {
			void *p = va_arg(args, void *);
			if (p == NULL) {
				mp_fmt_field(&out, &spec, "(nil)", 5);
				break;
			}
			mp_fmt_uint(&out, &spec, "0x", (uintptr_t)p, 16);
			break;
		}
		case '\0':
			/* A lone '%' at the end: print what we saw. */
			mp_fmt_putn(&out, conv_start, (size_t)(f - conv_start));
			continue;
		default:
			mp_fmt_putn(&out, conv_start,
			    (size_t)(f - conv_start) + 1);
			break;
		}
		f++;
	}
	va_end(args);
	if (size > 0)
		buf[out.len < size ? out.len : size - 1] = '\0';
	return out.len > INT_MAX ? INT_MAX : (int)out.len;
}

int mp_snprintf(char *buf, size_t size, const char *fmt, ...) {
	va_list ap;
	va_start(ap, fmt);
	int ret = mp_vsnprintf(buf, size, fmt, ap);
	va_end(ap);
	return ret;
}

/* ------------------------------------------------------ buffered writer */

/*
 * Format into the buffer's free room; a piece that does not fit is
 * formatted again into the buffer just flushed, and a piece longer than
 * the whole buffer is cut (the callers' pieces are short lines).
 */
void mp_buf_vprintf(mp_buf_t *b, const char *fmt, va_list ap) {
	if (b->err)
		return;
	va_list again;
	va_copy(again, ap);
	size_t room = b->size - b->len;
	int n = mp_vsnprintf(b->p + b->len, room, fmt, ap);
	if ((size_t)n >= room) {
		mp_buf_flush(b);
		n = mp_vsnprintf(b->p, b->size, fmt, again);
		if ((size_t)n >= b->size)
			n = (int)(b->size - 1);
	}
	va_end(again);
	b->len += (size_t)n;
}

void mp_buf_printf(mp_buf_t *b, const char *fmt, ...) {
	va_list ap;
	va_start(ap, fmt);
	mp_buf_vprintf(b, fmt, ap);
	va_end(ap);
}

void mp_buf_puts(mp_buf_t *b, const char *s) {
	mp_buf_put(b, s, strlen(s));
}

/* --------------------------------------------------------------- output */

/* Write all of s to stderr, retrying interrupted and partial writes;
 * a failure is dropped (there is nowhere else to report it). */
static void mp_write_stderr(const char *s) {
	mp_buf_fd_t f = {STDERR_FILENO, 0};
	(void)mp_buf_fd_sink(&f, s, strlen(s));
}

void mp_write(const char *s) {
	void (*hook)(void *, const char *) = MP_PUBLIC(malloc_message);
	if (hook != NULL)
		hook(NULL, s);
	else
		mp_write_stderr(s);
}

#define MP_MSG_PREFIX "<malloc_prof>: "
#define MP_MSG_MAX 1024

/*
 * Format "<malloc_prof>: " + message + "\n" and hand it to mp_write in one
 * call, so that lines from different threads do not interleave and a hook
 * sees whole lines.  A long message is cut, but keeps its newline.  errno
 * is preserved: callers report errors between a failing call and their
 * own use of errno.
 */
static void mp_verror(const char *fmt, va_list ap) {
	int saved_errno = errno;
	char buf[MP_MSG_MAX];
	size_t plen = sizeof(MP_MSG_PREFIX) - 1;
	memcpy(buf, MP_MSG_PREFIX, plen);
	/* Leave room for "\n" and the NUL. */
	int n = mp_vsnprintf(buf + plen, sizeof(buf) - plen - 1, fmt, ap);
	size_t end = plen + (size_t)n;
	if (end > sizeof(buf) - 2)
		end = sizeof(buf) - 2;
	buf[end] = '\n';
	buf[end + 1] = '\0';
	mp_write(buf);
	errno = saved_errno;
}

void mp_error(const char *fmt, ...) {
	va_list ap;
	va_start(ap, fmt);
	mp_verror(fmt, ap);
	va_end(ap);
}

void mp_misuse(const char *func, const char *what, void *p,
    const char *detail) {
	mp_error("%s(): %s %p%s", func, what, p, detail);
	if (opt_abort || config_debug)
		abort();
}

void mp_abort(const char *fmt, ...) {
	va_list ap;
	va_start(ap, fmt);
	mp_verror(fmt, ap);
	va_end(ap);
	abort();
}

void mp_assert_fail(const char *file, int line, const char *expr) {
	mp_error("assertion failed: %s (%s:%d)", expr, file, line);
	abort();
}

/* -------------------------------------------------------------- numbers */

/*
 * exp, log1p and the two roundings the profiler's estimates use, so that
 * the library needs no libm: a process that calls them from libm maps its
 * pages (and the 64 KiB fault-around windows beside each), 180-330 KiB of
 * resident set for four small functions.  Accuracy is what the estimates
 * need to come out as they did with glibc's (test/unit/util_math compares
 * the two at every point the profiler uses and at random ones):
 * util_exp within an ulp, and about half an ulp near 1, where 1 - e^-x
 * (the chance a sample hits x bytes) takes the difference of two close
 * numbers; util_log1p within an ulp.  No FMA: x86-64's baseline has none,
 * and __builtin_fma would call libm.
 */

/* ln 2 = HI + LO, HI with 33 significant bits, so k * HI is exact for
 * every k exp can meet (|k| <= 1075). */
#define UTIL_LN2_HI 0x1.62e42fefp-1
#define UTIL_LN2_LO 0x1.473de6af278edp-34
#define UTIL_INV_LN2 1.4426950408889634

/* 2^k as a double, for -1022 <= k <= 1023. */
static double util_pow2(int k) {
	union {
		uint64_t u;
		double d;
	} v = {.u = (uint64_t)(k + 1023) << 52};
	return v.d;
}

double util_exp(double x) {
	if (x != x)
		return x;
	if (x > 709.782712893384)               /* past DBL_MAX */
		return __builtin_inf();
	if (x < -745.1332191019412)             /* below half the least subnormal */
		return 0.0;
	/* x = k ln 2 + r with |r| <= ln 2 / 2; x - k * HI is exact (Sterbenz:
	 * x and k * HI are within a factor of 2), r + rr is it less k * LO
	 * to twice the precision of a double. */
	double kd = x * UTIL_INV_LN2;
	int k = (int)(kd < 0 ? kd - 0.5 : kd + 0.5);
	double hi = x - k * UTIL_LN2_HI, lo = k * UTIL_LN2_LO;
	double r = hi - lo;
	double rr = (hi - r) - lo;
	/* e^r - 1 - r by Taylor's series: |r| <= 0.347, so the terms past
	 * r^15 / 15! are below 2^-64 of the result. */
	double q = 1.0 / 2 + r * (1.0 / 6 + r * (1.0 / 24 + r * (1.0 / 120 +
	    r * (1.0 / 720 + r * (1.0 / 5040 + r * (1.0 / 40320 +
	    r * (1.0 / 362880 + r * (1.0 / 3628800 + r * (1.0 / 39916800 +
	    r * (1.0 / 479001600 + r * (1.0 / 6227020800 +
	    r * (1.0 / 87178291200 + r * (1.0 / 1307674368000)))))))))))));
	/* 1 + r with its rounding error kept (|r| < 1), then the small
	 * terms: one rounding at the end, so near 1 (k = 0, rr = 0) the
	 * result is e^r rounded unless it lies within 2^-60 of a tie. */
	double s = 1.0 + r;
	double e = (1.0 - s) + r;
	double y = s + (e + (rr + r * r * q + rr * r));
	if (k > 1023)
		return y * 2.0 * util_pow2(k - 1);
	if (k < -1022)                          /* a subnormal result */
		return y * util_pow2(k + 64) * 0x1p-64;
	return y * util_pow2(k);
}

double util_log1p(double x) {
	if (x != x || x == __builtin_inf())
		return x;
	if (x <= -1.0)
		return x == -1.0 ? -__builtin_inf() : __builtin_nan("");
	double ax = x < 0 ? -x : x;
	/* x - x^2 / 2 is within 2^-58 of ln(1 + x) there; the x^3 term is
	 * left out as glibc does, for its results where they are ties
	 * (1 / log1p(-2^-52): the sampling wait's scale at lg 52). */
	if (ax < 0x1p-29)
		return x - x * x * 0.5;
	/* u = 1 + x rounded, c what the rounding lost: ln(1 + x) is
	 * ln u + c / u to far below an ulp. */
	double u = 1.0 + x;
	double c = u > 2.0 ? 1.0 - (u - x) : x - (u - 1.0);
	/* u = 2^e m with m in [sqrt(1/2), sqrt(2)), f = m - 1 exactly. */
	union {
		double d;
		uint64_t b;
	} v = {.d = u};
	int e = (int)(v.b >> 52) - 1023;
	v.b = (v.b & (((uint64_t)1 << 52) - 1)) | ((uint64_t)1023 << 52);
	if (v.d >= 1.4142135623730951) {
		v.d *= 0.5;
		e++;
	}
	double f = v.d - 1.0;
	/* ln(1 + f) = 2 atanh(s), s = f / (2 + f): 2s + 2s z S(z) with
	 * z = s^2 <= 0.0295, and 2s = f - s f, so ln(1 + f) is
	 * f - s (f - 2 z S), f exact and the rest about f^2 / 2. */
	double s = f / (2.0 + f), z = s * s;
	double S = 1.0 / 3 + z * (1.0 / 5 + z * (1.0 / 7 + z * (1.0 / 9 +
	    z * (1.0 / 11 + z * (1.0 / 13 + z * (1.0 / 15 + z * (1.0 / 17 +
	    z * (1.0 / 19 + z * (1.0 / 21 + z * (1.0 / 23))))))))));
	double tail = c / u + e * UTIL_LN2_LO - s * (f - 2.0 * z * S);
	return e * UTIL_LN2_HI + (f + tail);
}

long long util_llround(double x) {
	/* What glibc's llround gives on x86-64 out of range (and for NaN):
	 * the conversion's "integer indefinite". */
	if (!(x >= -0x1p63 && x < 0x1p63))
		return LLONG_MIN;
	long long t = (long long)x;             /* toward zero */
	double d = x - (double)t;               /* exact: |d| < 1 */
	if (d >= 0.5)
		t++;
	else if (d <= -0.5)
		t--;
	return t;
}

double util_round(double x) {
	if (!(x > -0x1p52 && x < 0x1p52))       /* whole already, or NaN */
		return x;
	double t = (double)(long long)x;
	double d = x - t;
	if (d >= 0.5)
		t += 1.0;
	else if (d <= -0.5)
		t -= 1.0;
	return t == 0.0 ? x * 0.0 : t;          /* -0.3 and -0.0 give -0.0 */
}
