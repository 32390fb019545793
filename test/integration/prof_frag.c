/*
 * test/integration/prof_frag.c - the fragmentation profile
 * (prof.fragmentation.dump; doc/profiling.md, "Fragmentation").
 *
 * prof_frag.conf: prof:true,lg_prof_sample:8,prof_http:127.0.0.1:0.
 * frag_pin_site allocates 1 Mi objects of the smallest class (16 bytes,
 * 512 to an 8 KiB slab), then the test keeps one of every 512 allocated,
 * sampled or not, and frees the rest, flushing the thread's cache: the
 * samples (6% of the objects) live in the profiler's slabs, so each of
 * the program's slabs keeps about one object (two for some; none, and
 * released, for the ~6% whose one kept object was a sample) with the
 * rest free.  frag_dense_site's 64 Ki objects of the next class all
 * stay, packing their slabs.  In the profile, the pinned site's objects
 * are charged about a slab's unused space each (slab - 16 bytes; 75% to
 * 105% of it: the ~6% kept that are samples share the program's unused
 * space, and the released slabs hold none: each lowers the charge by
 * about 6%), and its total is that times the objects it has, about 0.88
 * of the objects kept times the slab's unused space: 0.55 to 1.3 of that
 * is more than 4 standard errors of about 125 samples on either side.
 * The dense site's objects are charged under 5% of their size.
 * frag_promoted_site's 256 objects of 6,000 bytes are all samples at
 * this rate (each stands for one object), promoted to blocks of their
 * own (malloc.c, alloc_promoted): the profile has them all, charged
 * under 5% of their size (no slab of their class need be held).  And
 * `malloc-prof top --sample fragmentation_space` lists the pinned site
 * first.  The dense site again, in a thread of another automatic arena:
 * its samples' slabs are that arena's prof_cache's, which must come off
 * its class's slabs as arena 0's do (counted as the program's, they were
 * charged to its objects: 15.7 bytes each of 32, tried).  Automatic names
 * are <prefix>.<pid>.<seq>.frag<n>.pb.gz; the endpoint serves the profile
 * at /debug/pprof/fragmentation; errors are prof.dump's; without
 * prof_stats, prof.stats.* is ENOENT.
 */
#include "../test_util.h"

#include <dirent.h>
#include <pthread.h>
#include <sys/socket.h>

#define NPIN ((size_t)1 << 20)
#define NDENSE ((size_t)64 << 10)

#define NPROMOTED 256

static char tmpdir[256];
static void *pin[NPIN], *dense[NDENSE], *promoted[NPROMOTED];

void frag_pin_site(void **objs, size_t n, size_t size);
void frag_dense_site(void **objs, size_t n, size_t size);
void frag_promoted_site(void **objs, size_t n, size_t size);

MP_SITE void frag_pin_site(void **objs, size_t n, size_t size) {
	for (size_t i = 0; i < n; i++)
		objs[i] = malloc(opaque_size(size));
	__asm__ volatile("" : : : "memory");
}

MP_SITE void frag_dense_site(void **objs, size_t n, size_t size) {
	for (size_t i = 0; i < n; i++)
		objs[i] = malloc(opaque_size(size));
	__asm__ volatile("" : : : "memory");
}

MP_SITE void frag_promoted_site(void **objs, size_t n, size_t size) {
	for (size_t i = 0; i < n; i++)
		objs[i] = malloc(opaque_size(size));
	__asm__ volatile("" : : : "memory");
}

/* The small class at index i: its size, slab size and regions. */
static void bin_class(unsigned i, size_t *size, size_t *slab,
    uint32_t *nregs) {
	char name[64];
	size_t len = sizeof(*size);
	snprintf(name, sizeof(name), "arenas.bin.%u.size", i);
	assert_int_equal(mallctl(name, size, &len, NULL, 0), 0);
	snprintf(name, sizeof(name), "arenas.bin.%u.slab_size", i);
	len = sizeof(*slab);
	assert_int_equal(mallctl(name, slab, &len, NULL, 0), 0);
	snprintf(name, sizeof(name), "arenas.bin.%u.nregs", i);
	len = sizeof(*nregs);
	assert_int_equal(mallctl(name, nregs, &len, NULL, 0), 0);
}

/* The site's totals of the profile's two values. */
static void site_sum(const mp_pprof_t *pp, const void *fn, int64_t *objs,
    int64_t *space) {
	uintptr_t lo, hi;
	mp_fn_range(fn, &lo, &hi);
	*objs = *space = 0;
	for (size_t i = 0; i < pp->nsamples; i++) {
		const mp_pp_sample_t *s = &pp->samples[i];
		bool in = false;
		for (size_t k = 0; k < s->nlocs && !in; k++) {
			const mp_pp_loc_t *l = mp_pprof_loc(pp, s->locs[k]);
			in = l != NULL && mp_ra_in(l->address + 1, lo, hi);
		}
		if (in) {
			*objs += s->vals[0];
			*space += s->vals[1];
		}
	}
}

static void read_profile(const char *path, mp_pprof_t *pp) {
	int fd = open(path, O_RDONLY);
	MP_ASSERT(fd >= 0, "open %s: %s", path, strerror(errno));
	size_t n;
	uint8_t *b = mp_read_fd_all(fd, &n);
	close(fd);
	bool ok = mp_pprof_decode(b, n, pp);
	free(b);
	MP_ASSERT(ok, "%s: %s", path, pp->err);
}

static int frag_dump(const char *path) {
	return mallctl("prof.fragmentation.dump", NULL, NULL,
	    path != NULL ? (void *)&path : NULL, path != NULL ? sizeof(path)
	    : 0);
}

/* prof.fragmentation.dump to tmpdir/name, read back into pp; the dump's
 * path in path. */
static void frag_dump_read(const char *name, char path[512], mp_pprof_t *pp) {
	snprintf(path, 512, "%s/%s", tmpdir, name);
	assert_int_equal(frag_dump(path), 0);
	memset(pp, 0, sizeof(*pp));
	read_profile(path, pp);
}

/* `malloc-prof top --sample fragmentation_space` on the profile names
 * the pinned site first (the tool of this build tree; skipped without
 * one). */
static void top_check(const char *path) {
	const char *top = getenv("top_builddir");
	char exe[512], cmd[2048], line[512];
	ssize_t el = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (top == NULL || el <= 0) {
		printf("# malloc-prof check skipped: no top_builddir\n");
		return;
	}
	exe[el] = '\0';
	snprintf(cmd, sizeof(cmd), "%s/bin/malloc-prof", top);
	if (access(cmd, X_OK) != 0) {
		printf("# malloc-prof check skipped: no %s\n", cmd);
		return;
	}
	snprintf(cmd, sizeof(cmd), "%s/bin/malloc-prof top --sample "
	    "fragmentation_space -n 3 '%s' '%s' 2>&1", top, exe, path);
	FILE *f = popen(cmd, "r");
	assert_non_null(f);
	char first[512] = "";
	bool total = false;
	/* Warnings (a stripped library) may come first. */
	while (fgets(line, sizeof(line), f) != NULL) {
		printf("# %s", line);
		if (total && first[0] == '\0')
			snprintf(first, sizeof(first), "%s", line);
		total |= strncmp(line, "Total:", 6) == 0;
	}
	int st = pclose(f);
	MP_ASSERT(st == 0 && strstr(first, "frag_pin_site") != NULL,
	    "malloc-prof top --sample fragmentation_space: status %d, first "
	    "row: %s", st, first);
}

static void test_pinned_and_dense(void **state) {
	(void)state;
	size_t psize, pslab, dsize, dslab;
	uint32_t pnregs, dnregs;
	bin_class(0, &psize, &pslab, &pnregs);
	bin_class(1, &dsize, &dslab, &dnregs);
	MP_ASSERT(pnregs >= 64 && (size_t)pnregs * 8 <= NPIN, "class 0: %u "
	    "regions of %zu bytes", pnregs, psize);
	frag_pin_site(pin, NPIN, psize);
	/* One object of every pnregs allocated stays, whether sampled or
	 * not: the program's slabs, which the samples skip, get pnregs
	 * consecutive unsampled ones each, so each keeps one or two. */
	size_t kept = 0;
	for (size_t i = 0; i < NPIN; i++) {
		if (i % pnregs == 0) {
			kept++;
		} else {
			free(pin[i]);
			pin[i] = NULL;
		}
	}
	frag_dense_site(dense, NDENSE, dsize);
	frag_promoted_site(promoted, NPROMOTED, 6000);
	mp_tcache_flush();

	char path[512];
	mp_pprof_t pp;
	frag_dump_read("frag.pb.gz", path, &pp);
	assert_int_equal(pp.ntypes, 2);
	assert_string_equal(pp.type[0], "fragmentation_objects");
	assert_string_equal(pp.type[1], "fragmentation_space");
	assert_string_equal(pp.default_type, "fragmentation_space");

	int64_t po, ps, dobj, dsp, pro, prs;
	site_sum(&pp, (const void *)frag_pin_site, &po, &ps);
	site_sum(&pp, (const void *)frag_dense_site, &dobj, &dsp);
	site_sum(&pp, (const void *)frag_promoted_site, &pro, &prs);
	printf("# promoted: %d objects of 6000 bytes, profile %" PRId64
	    " objects %" PRId64 " bytes\n", NPROMOTED, pro, prs);
	MP_ASSERT(pro >= NPROMOTED * 9 / 10 && pro <= NPROMOTED * 11 / 10 &&
	    (double)prs < 0.05 * 6000.0 * (double)pro, "promoted: %" PRId64
	    " objects, %" PRId64 " bytes charged; %d live, in no slab", pro,
	    prs, NPROMOTED);
	double unused = (double)(pslab - psize);
	printf("# pinned: %zu objects kept of %zu bytes, profile %" PRId64
	    " objects %" PRId64 " bytes (%.1f per object, slab unused %.0f); "
	    "dense: %" PRId64 " objects %" PRId64 " bytes\n", kept, psize, po,
	    ps, po ? (double)ps / (double)po : 0.0, unused, dobj, dsp);
	MP_ASSERT(po > 0 && dobj > 0, "no samples of a site: pinned %" PRId64
	    ", dense %" PRId64, po, dobj);
	double per = (double)ps / (double)po;
	MP_ASSERT(per > unused * 0.75 && per < unused * 1.05, "pinned: %.1f "
	    "bytes charged per object, expected the slab's unused %.0f", per,
	    unused);
	MP_ASSERT((double)ps > 0.55 * unused * (double)kept &&
	    (double)ps < 1.3 * unused * (double)kept, "pinned: %" PRId64
	    " bytes charged, expected %.0f (%zu slabs of %.0f unused bytes)",
	    ps, unused * (double)kept, kept, unused);
	MP_ASSERT((double)dsp < 0.05 * (double)dsize * (double)dobj,
	    "dense: %" PRId64 " bytes charged to %" PRId64 " objects of %zu",
	    dsp, dobj, dsize);
	mp_pprof_free(&pp);
	top_check(path);
	for (size_t i = 0; i < NPIN; i++)
		free(pin[i]);
	for (size_t i = 0; i < NDENSE; i++)
		free(dense[i]);
	for (size_t i = 0; i < NPROMOTED; i++)
		free(promoted[i]);
}

typedef struct {
	unsigned arena;
	size_t size;
} dense_job_t;

static void *dense_thread(void *arg) {
	dense_job_t *job = arg;
	assert_int_equal(mallctl("thread.arena", NULL, NULL, &job->arena,
	    sizeof(job->arena)), 0);
	frag_dense_site(dense, NDENSE, job->size);
	assert_int_equal(mallctl("thread.tcache.flush", NULL, NULL, NULL, 0),
	    0);
	return NULL;
}

/* The dense site's objects, allocated by a thread of another arena, are
 * charged under 5% of their size there too. */
static void test_other_arena(void **state) {
	(void)state;
	size_t dsize, dslab;
	uint32_t dnregs;
	bin_class(1, &dsize, &dslab, &dnregs);
	/* An automatic arena: a thread of a manual one (arenas.create)
	 * samples into arena 0's prof_cache. */
	unsigned narenas;
	size_t len = sizeof(narenas);
	assert_int_equal(mallctl("arenas.narenas", &narenas, &len, NULL, 0),
	    0);
	MP_ASSERT(narenas > 1, "arenas.narenas %u", narenas);
	dense_job_t job = { .arena = narenas - 1, .size = dsize };
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, dense_thread, &job), 0);
	assert_int_equal(pthread_join(t, NULL), 0);

	char path[512];
	mp_pprof_t pp;
	frag_dump_read("frag_arena.pb.gz", path, &pp);
	int64_t dobj, dsp;
	site_sum(&pp, (const void *)frag_dense_site, &dobj, &dsp);
	printf("# dense in arena %u: %" PRId64 " objects %" PRId64
	    " bytes\n", job.arena, dobj, dsp);
	MP_ASSERT(dobj > (int64_t)NDENSE / 2, "dense: %" PRId64 " objects in "
	    "the profile of %zu live", dobj, NDENSE);
	MP_ASSERT((double)dsp < 0.05 * (double)dsize * (double)dobj,
	    "dense in arena %u: %" PRId64 " bytes charged to %" PRId64
	    " objects of %zu", job.arena, dsp, dobj, dsize);
	mp_pprof_free(&pp);
	for (size_t i = 0; i < NDENSE; i++)
		free(dense[i]);
}

static void test_auto_name(void **state) {
	(void)state;
	char prefix[512];
	snprintf(prefix, sizeof(prefix), "%s/auto", tmpdir);
	const char *p = prefix;
	assert_int_equal(mallctl("prof.prefix", NULL, NULL, (void *)&p,
	    sizeof(p)), 0);
	assert_int_equal(frag_dump(NULL), 0);
	assert_int_equal(frag_dump(NULL), 0);
	char want0[64], want1[64];
	snprintf(want0, sizeof(want0), "auto.%ld.", (long)getpid());
	snprintf(want1, sizeof(want1), ".frag1.pb.gz");
	DIR *d = opendir(tmpdir);
	assert_non_null(d);
	struct dirent *e;
	unsigned n0 = 0, n1 = 0;
	while ((e = readdir(d)) != NULL) {
		if (strncmp(e->d_name, want0, strlen(want0)) != 0)
			continue;
		size_t l = strlen(e->d_name);
		n0 += l > 12 && strcmp(e->d_name + l - 12, ".frag0.pb.gz") == 0;
		n1 += l > 12 && strcmp(e->d_name + l - 12, want1) == 0;
	}
	closedir(d);
	MP_ASSERT(n0 == 1 && n1 == 1, "auto.<pid>.<seq>.frag0/1.pb.gz: "
	    "%u, %u found", n0, n1);
}

static void test_errors(void **state) {
	(void)state;
	const char *p = "x";
	size_t len = sizeof(p);
	assert_int_equal(mallctl("prof.fragmentation.dump", (void *)&p, &len,
	    NULL, 0), EPERM);
	assert_int_equal(mallctl("prof.fragmentation.dump", NULL, NULL,
	    (void *)&p, 1), EINVAL);
	const char *empty = "";
	assert_int_equal(mallctl("prof.fragmentation.dump", NULL, NULL,
	    (void *)&empty, sizeof(empty)), EFAULT);
	/* prof_stats is off here: jemalloc's ENOENT. */
	uint64_t v[2];
	len = sizeof(v);
	assert_int_equal(mallctl("prof.stats.bins.0.live", v, &len, NULL, 0),
	    ENOENT);
	assert_int_equal(mallctl("prof.stats.lextents.0.accum", v, &len,
	    NULL, 0), ENOENT);
}

/* GET /debug/pprof/fragmentation: the same profile, pprof. */
static void test_endpoint(void **state) {
	(void)state;
	unsigned port = 0;
	size_t len = sizeof(port);
	assert_int_equal(mallctl("prof.http_port", &port, &len, NULL, 0), 0);
	assert_true(port > 0);
	int fd = mp_connect_loopback(AF_INET, port, 10);
	MP_ASSERT(fd >= 0, "connect: %s", strerror(errno));
	const char *req = "GET /debug/pprof/fragmentation HTTP/1.1\r\n"
	    "Host: 127.0.0.1\r\n\r\n";
	assert_int_equal(write(fd, req, strlen(req)), (ssize_t)strlen(req));
	size_t n;
	uint8_t *all = mp_read_fd_all(fd, &n);
	close(fd);
	size_t hl = 0;
	while (hl + 3 < n && memcmp(all + hl, "\r\n\r\n", 4) != 0)
		hl++;
	MP_ASSERT(hl + 3 < n && memcmp(all, "HTTP/1.1 200 ", 13) == 0,
	    "response: %.*s", (int)(n < 200 ? n : 200), (const char *)all);
	mp_pprof_t pp;
	memset(&pp, 0, sizeof(pp));
	bool ok = mp_pprof_decode(all + hl + 4, n - hl - 4, &pp);
	free(all);
	MP_ASSERT(ok, "body: %s", pp.err);
	assert_int_equal(pp.ntypes, 2);
	assert_string_equal(pp.default_type, "fragmentation_space");
	mp_pprof_free(&pp);
}

static void test_no_profiler(void **state) {
	(void)state;
	assert_int_equal(frag_dump(NULL), ENOENT);
}

int main(void) {
	mp_test_init(300);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pinned_and_dense),
		cmocka_unit_test(test_other_arena),
		cmocka_unit_test(test_auto_name),
		cmocka_unit_test(test_endpoint),
		cmocka_unit_test(test_errors),
	};
	return mp_prof_test_main("mp_prof_frag", test_no_profiler, tests);
}
