/*
 * test/unit/prof_pprof.c - the building blocks of pprof output
 * (src/prof/prof_pprof.c): protobuf varints, CRC-32 and the gzip/deflate
 * writer; and prof_dump_to_fd (src/prof/prof_dump.c), the silent entry point
 * meant for an HTTP endpoint (prof_pprof.conf: prof:true,
 * lg_prof_sample:0).
 *
 * Everything written is read back with the independent inflater of
 * test/test_util.h (mp_gunzip, which also checks the CRC-32 and ISIZE
 * trailer) and, when the system has gzip(1), with `gzip -t` as a second
 * opinion.  Repetitive input must shrink; random input may grow by at
 * most the 1/8 that fixed Huffman codes cost.
 */
#include "../test_util.h"

#include <sys/mman.h>

#include "malloc_prof/internal/internal.h"
#include "malloc_prof/internal/pprof_enc.h"

static int setup(void **state) {
	(void)state;
	return malloc_init() || tsd_fetch() == NULL ? -1 : 0;
}

/* ------------------------------------------------------------- varints */

static void check_varint(uint64_t v, const uint8_t *want, size_t wantlen) {
	uint8_t out[16];
	memset(out, 0xee, sizeof(out));
	size_t n = prof_pb_varint(out, v);
	MP_ASSERT(n == wantlen, "%" PRIu64 ": %zu bytes, want %zu", v, n,
	    wantlen);
	MP_ASSERT(memcmp(out, want, n) == 0, "%" PRIu64 ": wrong bytes", v);
	assert_int_equal(out[n], 0xee);		/* nothing past the end */
	mp_pb_t r = {out, out + n, false};
	assert_true(mp_pb_varint(&r) == v);
	assert_false(r.err);
	assert_ptr_equal(r.p, out + n);
}

static void test_varint(void **state) {
	(void)state;
	check_varint(0, (const uint8_t[]){0x00}, 1);
	check_varint(1, (const uint8_t[]){0x01}, 1);
	check_varint(127, (const uint8_t[]){0x7f}, 1);
	check_varint(128, (const uint8_t[]){0x80, 0x01}, 2);
	check_varint(300, (const uint8_t[]){0xac, 0x02}, 2);
	check_varint(16383, (const uint8_t[]){0xff, 0x7f}, 2);
	check_varint(16384, (const uint8_t[]){0x80, 0x80, 0x01}, 3);
	check_varint(UINT32_MAX,
	    (const uint8_t[]){0xff, 0xff, 0xff, 0xff, 0x0f}, 5);
	check_varint((uint64_t)1 << 63, (const uint8_t[]){0x80, 0x80, 0x80,
	    0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01}, 10);
	check_varint(UINT64_MAX, (const uint8_t[]){0xff, 0xff, 0xff, 0xff,
	    0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, 10);
	/* int64 -1, as protobuf writes negative int64 values: 10 bytes. */
	check_varint((uint64_t)(int64_t)-1, (const uint8_t[]){0xff, 0xff,
	    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, 10);
	/* Every length boundary: 2^(7k) - 1 and 2^(7k). */
	for (unsigned k = 1; k < 10; k++) {
		uint64_t b = (uint64_t)1 << (7 * k);
		uint8_t out[16];
		assert_int_equal(prof_pb_varint(out, b - 1), k);
		assert_int_equal(prof_pb_varint(out, b), k + 1);
	}
}

/* --------------------------------------------------------------- crc32 */

static void test_crc32(void **state) {
	(void)state;
	const char *check = "123456789";
	assert_true(pprof_crc32(0, check, 9) == 0xcbf43926u);
	assert_true(pprof_crc32(0, "", 0) == 0);
	/* Incremental equals one-shot equals the test's bitwise one. */
	uint8_t buf[5000];
	mp_rng_t rng = {12345};
	for (size_t i = 0; i < sizeof(buf); i++) {
		buf[i] = (uint8_t)mp_rng_next(&rng);
	}
	uint32_t one = pprof_crc32(0, buf, sizeof(buf));
	uint32_t inc = pprof_crc32(pprof_crc32(0, buf, 1234), buf + 1234,
	    sizeof(buf) - 1234);
	assert_true(one == inc);
	assert_true(one == mp_crc32(buf, sizeof(buf)));
}

/* ---------------------------------------------------------------- gzip */

static bool have_gzip(void) {
	return system("gzip --version >/dev/null 2>&1") == 0;
}

/* Compress in[0..n) through a memfd, inflate it back and compare;
 * returns the compressed size. */
static size_t roundtrip(const char *what, const uint8_t *in, size_t n) {
	int fd = memfd_create("mp_gzip", MFD_CLOEXEC);
	assert_true(fd >= 0);
	int err = -1;
	bool fail = prof_gzip_write(fd, in, n, &err);
	MP_ASSERT(!fail, "%s: prof_gzip_write failed: %s", what,
	    strerror(err));
	assert_int_equal(err, 0);
	assert_true(lseek(fd, 0, SEEK_SET) == 0);
	size_t gzlen;
	uint8_t *gz = mp_read_fd_all(fd, &gzlen);
	mp_bytes_t out;
	char msg[256];
	bool ok = mp_gunzip(gz, gzlen, &out, msg, sizeof(msg));
	MP_ASSERT(ok, "%s (%zu bytes): %s", what, n, msg);
	MP_ASSERT(out.len == n, "%s: inflated %zu bytes, want %zu", what,
	    out.len, n);
	MP_ASSERT(n == 0 || memcmp(out.p, in, n) == 0, "%s: inflated bytes "
	    "differ", what);
	if (have_gzip()) {
		char cmd[128];
		snprintf(cmd, sizeof(cmd), "gzip -t </proc/%ld/fd/%d",
		    (long)getpid(), fd);
		assert_true(lseek(fd, 0, SEEK_SET) == 0);
		MP_ASSERT(system(cmd) == 0, "%s: gzip -t rejects the stream",
		    what);
	}
	free(out.p);
	free(gz);
	close(fd);
	return gzlen;
}

static void test_gzip_small(void **state) {
	(void)state;
	/* Empty: 10-byte header, one empty fixed block, 8-byte trailer. */
	assert_int_equal(roundtrip("empty", NULL, 0), 10 + 2 + 8);
	roundtrip("one byte", (const uint8_t *)"x", 1);
	roundtrip("two bytes", (const uint8_t *)"xy", 2);
	roundtrip("three same", (const uint8_t *)"aaa", 3);
	roundtrip("a run", (const uint8_t *)"aaaaaaaaaaaaaaaaaaaaaaaaaaaa", 28);
	/* Every byte value, literal codes of 8 and 9 bits. */
	uint8_t all[512];
	for (int i = 0; i < 512; i++) {
		all[i] = (uint8_t)i;
	}
	roundtrip("all bytes twice", all, sizeof(all));
}

static void test_gzip_random(void **state) {
	(void)state;
	size_t n = 200 * 1000;
	uint8_t *in = malloc(n);
	assert_non_null(in);
	mp_rng_t rng = {777};
	for (size_t i = 0; i < n; i++) {
		in[i] = (uint8_t)(mp_rng_next(&rng) >> 24);
	}
	size_t z = roundtrip("random", in, n);
	MP_ASSERT(z <= n + n / 8 + 64, "random: %zu -> %zu", n, z);
	/* Random bytes from a small alphabet: short matches everywhere. */
	for (size_t i = 0; i < n; i++) {
		in[i] = (uint8_t)("ACGT"[mp_rng_next(&rng) % 4]);
	}
	z = roundtrip("4 letters", in, n);
	MP_ASSERT(z < n / 2, "4 letters: %zu -> %zu", n, z);
	free(in);
}

static void test_gzip_repetitive(void **state) {
	(void)state;
	size_t n = 300 * 1000;
	uint8_t *in = malloc(n);
	assert_non_null(in);
	/* Profile-like: the same few records with small changes. */
	static const char rec[] = "@ 0x7f22a52054e0 0x561da44f55c4 t0: "
	    "60: 61456\n";
	for (size_t i = 0; i < n; i++) {
		in[i] = (uint8_t)(rec[i % (sizeof(rec) - 1)] +
		    (i % 4096 == 0));
	}
	size_t z = roundtrip("repetitive", in, n);
	MP_ASSERT(z < n / 20, "repetitive: %zu -> %zu", n, z);
	/* Zeros: maximal matches (258) at distance 1. */
	memset(in, 0, n);
	z = roundtrip("zeros", in, n);
	MP_ASSERT(z < n / 50, "zeros: %zu -> %zu", n, z);
	/* A random block repeated at exactly the window size (32768) and
	 * one byte further (out of reach). */
	mp_rng_t rng = {99};
	for (size_t i = 0; i < 32768; i++) {
		in[i] = (uint8_t)mp_rng_next(&rng);
	}
	memcpy(in + 32768, in, 32768);
	memcpy(in + 65537, in + 1000, 20000);
	roundtrip("window edge", in, 65537 + 20000);
	free(in);
}

static void test_gzip_write_error(void **state) {
	(void)state;
	int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	close(fd);
	int err = 0;
	assert_true(prof_gzip_write(fd, "abc", 3, &err));
	assert_int_equal(err, EBADF);
	/* /dev/full: ENOSPC from the flush. */
	fd = open("/dev/full", O_WRONLY | O_CLOEXEC);
	if (fd >= 0) {
		err = 0;
		assert_true(prof_gzip_write(fd, "abc", 3, &err));
		assert_int_equal(err, ENOSPC);
		close(fd);
	}
	/* And the writer still works afterwards. */
	roundtrip("after errors", (const uint8_t *)"hello hello hello", 17);
}

/* ------------------------------------------------------ prof_dump_to_fd */

void unit_pp_site(void **objs, size_t n);

MP_SITE void unit_pp_site(void **objs, size_t n) {
	for (size_t i = 0; i < n; i++) {
		objs[i] = malloc(opaque_size(200));
	}
	__asm__ volatile("" : : : "memory");
}

static void test_dump_to_fd(void **state) {
	(void)state;
	if (!config_prof || !opt_prof) {
		MP_SKIP("no profiler in this build");
	}
	void *objs[10];
	unit_pp_site(objs, 10);
	char err[512];
	mp_msgs_start();
	/* pprof with another default sample type. */
	int m = memfd_create("mp_to_fd", MFD_CLOEXEC);
	assert_true(m >= 0);
	bool f1 = prof_dump_to_fd(m, PROF_FORMAT_PPROF, "inuse_objects", err,
	    sizeof(err));
	/* heap_v2 on request, whatever prof.format says. */
	int h = memfd_create("mp_to_fd_heap", MFD_CLOEXEC);
	assert_true(h >= 0);
	bool f2 = prof_dump_to_fd(h, PROF_FORMAT_HEAP_V2, NULL, err,
	    sizeof(err));
	/* Errors: reported in err[], never printed. */
	char e3[512], e4[512];
	bool f3 = prof_dump_to_fd(m, PROF_FORMAT_PPROF, "alloc_space", e3,
	    sizeof(e3));
	int closed = open("/dev/null", O_WRONLY | O_CLOEXEC);
	close(closed);
	bool f4 = prof_dump_to_fd(closed, PROF_FORMAT_CURRENT, NULL, e4,
	    sizeof(e4));
	mp_msgs_stop();
	assert_false(f1);
	assert_false(f2);
	assert_true(f3);
	assert_true(f4);
	MP_ASSERT(mp_msgs_lines == 0, "printed: %s", mp_msgs);
	MP_ASSERT(strstr(e3, "\"alloc_space\" is not a sample type") != NULL
	    && strstr(e3, "prof_accum") != NULL, "%s", e3);
	char want[128];
	snprintf(want, sizeof(want), "cannot write to fd %d: Bad file "
	    "descriptor", closed);
	assert_string_equal(e4, want);

	assert_true(lseek(m, 0, SEEK_SET) == 0);
	size_t n;
	uint8_t *b = mp_read_fd_all(m, &n);
	mp_pprof_t pp;
	bool ok = mp_pprof_decode(b, n, &pp);
	MP_ASSERT(ok, "%s", pp.err);
	assert_string_equal(pp.default_type, "inuse_objects");
	assert_true(pp.nsamples >= 1);
	mp_pprof_free(&pp);
	free(b);
	close(m);

	assert_true(lseek(h, 0, SEEK_SET) == 0);
	b = mp_read_fd_all(h, &n);
	assert_true(n > 10);
	assert_memory_equal(b, "heap_v2/1\n", 10);
	free(b);
	close(h);
	for (size_t i = 0; i < 10; i++) {
		free(objs[i]);
	}
}

int main(void) {
	mp_test_init(300);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_varint),
		cmocka_unit_test(test_crc32),
		cmocka_unit_test(test_gzip_small),
		cmocka_unit_test(test_gzip_random),
		cmocka_unit_test(test_gzip_repetitive),
		cmocka_unit_test(test_gzip_write_error),
		cmocka_unit_test(test_dump_to_fd),
	};
	return cmocka_run_group_tests(tests, setup, NULL) == 0 ? 0 : 1;
}
