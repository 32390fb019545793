/*
 * test/unit/util.c - the non-allocating output layer (src/sys/util.c).
 *
 * mp_snprintf is checked against the C library's snprintf for a table of
 * formats and for every truncation length; mp_error, mp_write, mp_abort and
 * mp_assert_fail are checked for what reaches the malloc_message hook or
 * stderr: one whole line, with the "<malloc_prof>: " prefix.
 */
#include "../test_util.h"

#include <sys/resource.h>
#include <sys/wait.h>

#include "malloc_prof/internal/internal.h"

/* Messages are captured with test_util.h's mp_msgs_*. */

/* ------------------------------------------------------- the formatter */

/*
 * Format with both implementations into generous buffers and compare the
 * text and the returned length.  (A macro: the arguments are varargs.)
 */
#define CHECK_FMT(...) do {						\
	char want_[512], got_[512];					\
	int wn_ = snprintf(want_, sizeof(want_), __VA_ARGS__);		\
	int gn_ = mp_snprintf(got_, sizeof(got_), __VA_ARGS__);		\
	MP_ASSERT(wn_ == gn_ && strcmp(want_, got_) == 0,		\
	    "format %s: libc \"%s\" (%d), mp \"%s\" (%d)",		\
	    #__VA_ARGS__, want_, wn_, got_, gn_);			\
} while (0)

static void test_formats_match_libc(void **state) {
	(void)state;
	int x = 42;
	CHECK_FMT("plain text");
	CHECK_FMT("%%");
	CHECK_FMT("100%% sure %d", 1);
	CHECK_FMT("%s", "hello");
	CHECK_FMT("[%10s]", "right");
	CHECK_FMT("[%-10s]", "left");
	CHECK_FMT("[%.3s]", "truncate");
	CHECK_FMT("[%.*s]", 2, "star");
	CHECK_FMT("[%.*s]", 0, "none");
	CHECK_FMT("[%*s]", 6, "w");
	CHECK_FMT("[%*s]", -6, "neg");
	CHECK_FMT("[%-8.2s]", "abcdef");
	CHECK_FMT("[%s]", "");
	CHECK_FMT("[%c%c]", 'a', 'Z');
	CHECK_FMT("[%3c]", 'q');
	CHECK_FMT("[%-3c]", 'q');
	CHECK_FMT("%d %d %d", 0, -1, 123456);
	CHECK_FMT("%d %d", INT_MAX, INT_MIN);
	CHECK_FMT("%i", -77);
	CHECK_FMT("[%5d] [%-5d] [%05d]", 42, 42, 42);
	CHECK_FMT("[%05d] [%5d] [%-6d]", -42, -42, -42);
	/* C: the '0' flag is ignored when a precision is given. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat"
	CHECK_FMT("[%.3d] [%8.3d] [%08.3d]", 7, -7, 7);
#pragma GCC diagnostic pop
	CHECK_FMT("[%.0d]", 0);
	CHECK_FMT("[%u] [%u]", 0u, UINT_MAX);
	CHECK_FMT("[%ld] [%ld]", LONG_MAX, LONG_MIN);
	CHECK_FMT("[%lu]", ULONG_MAX);
	CHECK_FMT("[%lld] [%lld]", LLONG_MAX, LLONG_MIN);
	CHECK_FMT("[%llu]", ULLONG_MAX);
	CHECK_FMT("[%zu] [%zu]", (size_t)0, SIZE_MAX);
	CHECK_FMT("[%zd] [%zd]", (ssize_t)-5, (ssize_t)SSIZE_MAX);
	CHECK_FMT("[%jd] [%ju]", INTMAX_MIN, UINTMAX_MAX);
	CHECK_FMT("[%x] [%x] [%x]", 0u, 255u, 0xdeadbeefu);
	CHECK_FMT("[%X]", 0xabcdefu);
	CHECK_FMT("[%08x] [%-8x] [%8x]", 0x1fu, 0x1fu, 0x1fu);
	CHECK_FMT("[%lx] [%llx] [%zx]", ULONG_MAX, 0x123456789abcull,
	    (size_t)4096);
	CHECK_FMT("[%02x%02x]", 1u, 0xabu);
	CHECK_FMT("[%p]", (void *)&x);
	CHECK_FMT("[%p]", (void *)0x1000);
	CHECK_FMT("[%20p] [%-20p]", (void *)0xabc, (void *)0xabc);
	CHECK_FMT("[%p]", NULL);
	CHECK_FMT("[%hd] [%hhu]", (short)-3, (unsigned char)200);
	CHECK_FMT("%s=%d, %s=%zu", "a", 1, "b", (size_t)2);
	CHECK_FMT("[%*d] [%-*d]", 5, 3, 5, 3);
}

/* Every buffer size from 0 up: same return value, same (cut) text. */
static void test_truncation(void **state) {
	(void)state;
	const char *fmt = "%s:%d:%05x|%-4s|";
	for (size_t size = 0; size < 40; size++) {
		char want[64], got[64];
		memset(want, 'X', sizeof(want));
		memset(got, 'X', sizeof(got));
		int wn = snprintf(want, size, fmt, "abc", -12, 0xfu, "z");
		int gn = mp_snprintf(got, size, fmt, "abc", -12, 0xfu, "z");
		assert_int_equal(wn, gn);
		/* Nothing is written past `size` bytes. */
		assert_memory_equal(want, got, sizeof(want));
	}
}

static void test_nul_termination(void **state) {
	(void)state;
	char buf[16];
	memset(buf, 'X', sizeof(buf));
	int n = mp_snprintf(buf, 5, "abcdefgh");
	assert_int_equal(n, 8);
	assert_string_equal(buf, "abcd");
	assert_int_equal(buf[5], 'X');

	memset(buf, 'X', sizeof(buf));
	n = mp_snprintf(buf, 1, "%d", 12345);
	assert_int_equal(n, 5);
	assert_int_equal(buf[0], '\0');
	assert_int_equal(buf[1], 'X');

	/* size 0: only the length is computed; buf may be NULL. */
	assert_int_equal(mp_snprintf(NULL, 0, "%s-%d", "xyz", 100), 7);

	/* Exactly fitting output. */
	n = mp_snprintf(buf, 4, "abc");
	assert_int_equal(n, 3);
	assert_string_equal(buf, "abc");
}

/* %.Ns must not read past N bytes: the source need not be terminated. */
static void test_precision_does_not_overread(void **state) {
	(void)state;
	char src[3] = {'a', 'b', 'c'};     /* no NUL */
	char buf[8];
	assert_int_equal(mp_snprintf(buf, sizeof(buf), "%.3s", src), 3);
	assert_string_equal(buf, "abc");
	assert_int_equal(mp_snprintf(buf, sizeof(buf), "%.*s", 2, src), 2);
	assert_string_equal(buf, "ab");
}

static int call_vsnprintf(char *buf, size_t size, const char *fmt, ...) {
	va_list ap;
	va_start(ap, fmt);
	int n = mp_vsnprintf(buf, size, fmt, ap);
	va_end(ap);
	return n;
}

static void test_vsnprintf(void **state) {
	(void)state;
	char buf[32];
	assert_int_equal(call_vsnprintf(buf, sizeof(buf), "%s %zu %d", "v",
	    (size_t)7, -1), 6);
	assert_string_equal(buf, "v 7 -1");
}

/* ------------------------------------------------------------- output */

static void test_error_one_line_via_hook(void **state) {
	(void)state;
	mp_msgs_start();
	mp_error("hello %d %s", 42, "world");
	mp_msgs_stop();
	assert_int_equal(mp_msgs_calls, 1);
	assert_int_equal(mp_msgs_opaque, 0);
	assert_string_equal(mp_msgs, "<malloc_prof>: hello 42 world\n");
}

static void test_error_long_message_is_cut(void **state) {
	(void)state;
	char big[3000];
	memset(big, 'y', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	mp_msgs_start();
	mp_error("%s", big);
	mp_msgs_stop();
	assert_int_equal(mp_msgs_calls, 1);
	assert_int_equal(mp_msgs_opaque, 0);
	assert_true(strncmp(mp_msgs, "<malloc_prof>: yyy", 18) == 0);
	assert_true(mp_msgs_len <= 1023);
	assert_int_equal(mp_msgs[mp_msgs_len - 1], '\n');
	/* ... and it is the only one. */
	assert_ptr_equal(strchr(mp_msgs, '\n'), mp_msgs + mp_msgs_len - 1);
}

static void test_error_keeps_errno(void **state) {
	(void)state;
	mp_msgs_start();
	errno = ERANGE;
	mp_error("x");
	assert_int_equal(errno, ERANGE);
	mp_msgs_stop();
}

/* Run fn with fd 2 redirected to a pipe; return what was written. */
static size_t capture_stderr(void (*fn)(void), char *out, size_t size) {
	int fds[2];
	assert_int_equal(pipe(fds), 0);
	int saved = dup(STDERR_FILENO);
	assert_true(saved >= 0);
	assert_true(dup2(fds[1], STDERR_FILENO) >= 0);
	fn();
	dup2(saved, STDERR_FILENO);
	close(saved);
	close(fds[1]);
	size_t len = 0;
	ssize_t n;
	while (len + 1 < size &&
	    (n = read(fds[0], out + len, size - 1 - len)) > 0)
		len += (size_t)n;
	out[len] = '\0';
	close(fds[0]);
	return len;
}

static void write_abc(void) {
	mp_write("abc\n");
}

static void error_xyz(void) {
	mp_error("xyz %u", 7u);
}

static void test_write_without_hook_goes_to_stderr(void **state) {
	(void)state;
	char buf[128];
	malloc_message = NULL;
	capture_stderr(write_abc, buf, sizeof(buf));
	assert_string_equal(buf, "abc\n");
	capture_stderr(error_xyz, buf, sizeof(buf));
	assert_string_equal(buf, "<malloc_prof>: xyz 7\n");
}

/* Run fn in a child; expect SIGABRT and return the child's stderr. */
static void expect_abort(void (*fn)(void *), char *out, size_t size) {
	int status = mp_child_stderr(fn, NULL, out, size);
	MP_ASSERT(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT,
	    "child status %#x, output \"%s\"", status, out);
}

static void call_abort(void *arg) {
	(void)arg;
	mp_abort("giving up on %s", "everything");
}

static void call_assert_fail(void *arg) {
	(void)arg;
	mp_assert_fail("src/x.c", 12, "a == b");
}

/* util_popcount64 against a bit-by-bit count: every single bit, all ones,
 * alternating patterns and random words (a wrong mask or shift in any of
 * its four steps miscounts some of them). */
static unsigned popcount_slow(uint64_t w) {
	unsigned n = 0;
	for (; w != 0; w >>= 1)
		n += (unsigned)(w & 1);
	return n;
}

static void test_popcount64(void **state) {
	(void)state;
	assert_int_equal(util_popcount64(0), 0);
	assert_int_equal(util_popcount64(~0ull), 64);
	assert_int_equal(util_popcount64(0x5555555555555555ull), 32);
	assert_int_equal(util_popcount64(0xaaaaaaaaaaaaaaaaull), 32);
	for (unsigned b = 0; b < 64; b++) {
		assert_int_equal(util_popcount64(1ull << b), 1);
		assert_int_equal(util_popcount64(~(1ull << b)), 63);
		assert_int_equal(util_popcount64((1ull << b) - 1), b);
	}
	uint64_t x = 0x9e3779b97f4a7c15ull;
	for (int i = 0; i < 100000; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		assert_int_equal(util_popcount64(x), popcount_slow(x));
	}
}

static void test_abort_and_assert_fail(void **state) {
	(void)state;
	char buf[256];
	expect_abort(call_abort, buf, sizeof(buf));
	assert_string_equal(buf, "<malloc_prof>: giving up on everything\n");
	expect_abort(call_assert_fail, buf, sizeof(buf));
	assert_string_equal(buf,
	    "<malloc_prof>: assertion failed: a == b (src/x.c:12)\n");
}

int main(void) {
	mp_test_init(120);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_formats_match_libc),
		cmocka_unit_test(test_truncation),
		cmocka_unit_test(test_nul_termination),
		cmocka_unit_test(test_precision_does_not_overread),
		cmocka_unit_test(test_vsnprintf),
		cmocka_unit_test(test_error_one_line_via_hook),
		cmocka_unit_test(test_error_long_message_is_cut),
		cmocka_unit_test(test_error_keeps_errno),
		cmocka_unit_test(test_write_without_hook_goes_to_stderr),
		cmocka_unit_test(test_popcount64),
		cmocka_unit_test(test_abort_and_assert_fail),
	};
	return mp_run_tests(tests);
}
