/*
 * test/integration/prof_pprof.c - pprof dumps (prof_format:pprof,
 * prof.format), read back with the gzip + protobuf reader of
 * test/test_util.h.
 *
 * prof_pprof.conf: prof:true,lg_prof_sample:0,prof_format:pprof,
 * prof_symbolize:true, so the counts are exact and functions are named.  A named thread and the main thread allocate at two
 * known sites; a pprof dump and a heap_v2 dump are taken back to back
 * (prof.format switched in between) and must agree: the same inuse
 * totals, the same stacks.  The profile's sample types, period,
 * default sample type, time, the leaf locations of the two sites (no
 * allocator frame left), the mappings of the program and of
 * libmalloc_prof with the GNU build IDs that dl_iterate_phdr finds in
 * memory, the thread_id and thread_name labels (one sample per stack
 * and thread), and the function names of the
 * in-process symbolizer (the sites by name; every named location of the
 * program agrees with dladdr1 where its symbol covers the address) are
 * checked.  prof.format rejects
 * unknown names with EINVAL and one message line; automatic names end
 * in .pb.gz.
 */
#include "../test_util.h"

#include <elf.h>

#define NOBJ 50

static char tmpdir[256];

void pp_site_main(void **objs);
void pp_site_thread(void **objs);

MP_SITE void pp_site_main(void **objs) {
	for (int i = 0; i < NOBJ; i++) {
		objs[i] = malloc(opaque_size(1000));	/* usize 1024 */
	}
	__asm__ volatile("" : : : "memory");
}

MP_SITE void pp_site_thread(void **objs) {
	for (int i = 0; i < NOBJ; i++) {
		objs[i] = malloc(opaque_size(3000));	/* usize 3072 */
	}
	__asm__ volatile("" : : : "memory");
}

static int set_format(const char *f) {
	return mallctl("prof.format", NULL, NULL, (void *)&f, sizeof(f));
}

static const char *get_format(void) {
	const char *f = NULL;
	size_t sz = sizeof(f);
	if (mallctl("prof.format", (void *)&f, &sz, NULL, 0) != 0) {
		return "(error)";
	}
	return f;
}

/* ---- build IDs from memory (PT_NOTE of each loaded object) */

typedef struct {
	char exe_id[128];
	char lib_id[128];
	char lib_path[PATH_MAX];
} ids_t;

static void note_hex(const ElfW(Phdr) *ph, ElfW(Addr) base, char *out,
    size_t size) {
	const uint8_t *p = (const uint8_t *)(base + ph->p_vaddr);
	size_t off = 0;
	while (off + sizeof(ElfW(Nhdr)) <= ph->p_memsz) {
		const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)(p + off);
		size_t name = off + sizeof(*nh);
		size_t desc = name + ((nh->n_namesz + 3) & ~3u);
		size_t next = desc + ((nh->n_descsz + 3) & ~3u);
		if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 &&
		    memcmp(p + name, "GNU", 4) == 0 &&
		    nh->n_descsz * 2 < size) {
			for (size_t k = 0; k < nh->n_descsz; k++) {
				snprintf(out + 2 * k, 3, "%02x", p[desc + k]);
			}
			return;
		}
		off = next;
	}
}

static int ids_cb(struct dl_phdr_info *info, size_t size, void *arg) {
	(void)size;
	ids_t *ids = arg;
	char *out = NULL;
	if (info->dlpi_name == NULL || info->dlpi_name[0] == '\0') {
		if (ids->exe_id[0] == '\0') {
			out = ids->exe_id;	/* the program comes first */
		}
	} else if (strstr(info->dlpi_name, "libmalloc_prof") != NULL) {
		out = ids->lib_id;
		if (realpath(info->dlpi_name, ids->lib_path) == NULL) {
			ids->lib_path[0] = '\0';
		}
	}
	for (int i = 0; out != NULL && i < info->dlpi_phnum; i++) {
		if (info->dlpi_phdr[i].p_type == PT_NOTE && out[0] == '\0') {
			note_hex(&info->dlpi_phdr[i], info->dlpi_addr, out,
			    128);
		}
	}
	return 0;
}

/* ---- the test */

static const mp_pp_sample_t *site_sample(const mp_pprof_t *pp, const void *fn) {
	uintptr_t lo, hi;
	mp_fn_range(fn, &lo, &hi);
	for (size_t i = 0; i < pp->nsamples; i++) {
		const mp_pp_sample_t *s = &pp->samples[i];
		if (s->nlocs == 0) {
			continue;
		}
		const mp_pp_loc_t *l = mp_pprof_loc(pp, s->locs[0]);
		if (l != NULL && l->address >= lo && l->address < hi) {
			return s;
		}
	}
	return NULL;
}

/* The function name of a location's first line, "" if none. */
static const char *fn_name(const mp_pprof_t *pp, const mp_pp_loc_t *l) {
	if (l == NULL || l->nlines == 0) {
		return "";
	}
	for (size_t i = 0; i < pp->nfns; i++) {
		if (pp->fns[i].id == l->function_id) {
			return pp->fns[i].name;
		}
	}
	return "";
}

static pthread_barrier_t bar;
static void *thr_objs[NOBJ];

static void *thr_main(void *arg) {
	(void)arg;
	const char *name = "pp-worker";
	mallctl("thread.prof.name", NULL, NULL, (void *)&name, sizeof(name));
	pp_site_thread(thr_objs);
	pthread_barrier_wait(&bar);	/* allocated */
	pthread_barrier_wait(&bar);	/* dumped */
	return NULL;
}

static void test_profile(void **state) {
	(void)state;
	void *objs[NOBJ];
	assert_int_equal(pthread_barrier_init(&bar, NULL, 2), 0);
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, thr_main, NULL), 0);
	pthread_barrier_wait(&bar);
	pp_site_main(objs);

	char pb[512], heap[512];
	snprintf(pb, sizeof(pb), "%s/now.pb.gz", tmpdir);
	snprintf(heap, sizeof(heap), "%s/now.heap", tmpdir);
	struct timespec t0, t1;
	clock_gettime(CLOCK_REALTIME, &t0);
	assert_int_equal(mp_prof_dump(pb), 0);
	assert_int_equal(set_format("heap_v2"), 0);
	assert_int_equal(mp_prof_dump(heap), 0);
	assert_int_equal(set_format("pprof"), 0);
	clock_gettime(CLOCK_REALTIME, &t1);
	pthread_barrier_wait(&bar);
	assert_int_equal(pthread_join(t, NULL), 0);

	if (system("gzip --version >/dev/null 2>&1") == 0) {
		char cmd[700];
		snprintf(cmd, sizeof(cmd), "gzip -t '%s'", pb);
		MP_ASSERT(system(cmd) == 0, "gzip -t rejects %s", pb);
	}
	mp_pprof_t pp;
	MP_PPROF_LOAD(pb, &pp);
	mp_heap_t h;
	MP_HEAP_PARSE(heap, &h);

	/* Types, period, default, time. */
	assert_int_equal(pp.ntypes, 2);
	assert_string_equal(pp.type[0], "inuse_objects");
	assert_string_equal(pp.unit[0], "count");
	assert_string_equal(pp.type[1], "inuse_space");
	assert_string_equal(pp.unit[1], "bytes");
	assert_string_equal(pp.period_type, "space");
	assert_string_equal(pp.period_unit, "bytes");
	assert_int_equal(pp.period, 1);
	assert_string_equal(pp.default_type, "inuse_space");
	int64_t ns0 = (int64_t)t0.tv_sec * 1000000000 + t0.tv_nsec;
	int64_t ns1 = (int64_t)t1.tv_sec * 1000000000 + t1.tv_nsec;
	MP_ASSERT(pp.time_nanos >= ns0 && pp.time_nanos <= ns1,
	    "time_nanos %" PRId64 " not in [%" PRId64 ", %" PRId64 "]",
	    pp.time_nanos, ns0, ns1);

	/* The same moment as the heap_v2 dump: one sample per (stack,
	 * thread), the t<uid> lines of heap_v2; the same totals (exact counts
	 * at lg_prof_sample:0). */
	size_t pairs = 0;
	for (size_t i = 0; i < h.nstacks; i++)
		pairs += h.stacks[i].nthr;
	assert_int_equal(pp.nsamples, pairs);
	int64_t objs_sum = 0, bytes_sum = 0;
	for (size_t i = 0; i < pp.nsamples; i++) {
		assert_int_equal(pp.samples[i].nvals, 2);
		objs_sum += pp.samples[i].vals[0];
		bytes_sum += pp.samples[i].vals[1];
		/* Every location is known; none is the allocator's. */
		for (size_t k = 0; k < pp.samples[i].nlocs; k++) {
			assert_non_null(mp_pprof_loc(&pp,
			    pp.samples[i].locs[k]));
		}
	}
	assert_int_equal(objs_sum, h.total.co);
	assert_int_equal(bytes_sum, h.total.cb);

	/* The two sites, at the leaf, with their exact counts; the thread's
	 * sample carries its name. */
	const mp_pp_sample_t *sm = site_sample(&pp, (void *)pp_site_main);
	const mp_pp_sample_t *st = site_sample(&pp, (void *)pp_site_thread);
	MP_ASSERT(sm != NULL, "no sample whose leaf is in pp_site_main");
	MP_ASSERT(st != NULL, "no sample whose leaf is in pp_site_thread");
	assert_int_equal(sm->vals[0], NOBJ);
	assert_int_equal(sm->vals[1], NOBJ * 1024);
	assert_int_equal(st->vals[0], NOBJ);
	assert_int_equal(st->vals[1], NOBJ * 3072);
	/* Labels: thread_id (heap_v2's t<uid>) on each, thread_name on the
	 * named thread's only. */
	assert_int_equal(st->nlabels, 2);
	assert_string_equal(st->lkey[0], "thread_id");
	assert_string_equal(st->lkey[1], "thread_name");
	assert_string_equal(st->lstr[1], "pp-worker");
	assert_int_equal(sm->nlabels, 1);	/* main is not named */
	assert_string_equal(sm->lkey[0], "thread_id");
	MP_ASSERT(strcmp(sm->lstr[0], st->lstr[0]) != 0, "both sites' "
	    "samples have thread_id %s", sm->lstr[0]);
	const mp_heap_stack_t *hm = mp_heap_find_site(&h, (void *)pp_site_main,
	    1);
	assert_non_null(hm);
	assert_int_equal(hm->nthr, 1);
	char uid[24];
	snprintf(uid, sizeof(uid), "%" PRIu64, hm->thr[0].uid);
	assert_string_equal(sm->lstr[0], uid);

	/* No sample's leaf lies in the allocator's shared object (unless
	 * the allocator is linked into the program). */
	Dl_info self, prog;
	assert_true(dladdr((void *)mallctl, &self) != 0);
	assert_true(dladdr((void *)pp_site_main, &prog) != 0);
	for (size_t i = 0; prog.dli_fbase != self.dli_fbase &&
	    i < pp.nsamples; i++) {
		const mp_pp_loc_t *l = mp_pprof_loc(&pp,
		    pp.samples[i].locs[0]);
		Dl_info li;
		MP_ASSERT(dladdr((void *)(uintptr_t)l->address, &li) == 0 ||
		    li.dli_fbase != self.dli_fbase, "sample %zu: leaf 0x%"
		    PRIx64 " is in %s", i, l->address, self.dli_fname);
	}

	/* Mappings: the program first, libmalloc_prof, build IDs equal to
	 * those in memory; every location inside its mapping. */
	ids_t ids;
	memset(&ids, 0, sizeof(ids));
	dl_iterate_phdr(ids_cb, &ids);
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	assert_true(n > 0);
	exe[n] = '\0';
	assert_true(pp.nmaps >= 1);
	assert_int_equal(pp.maps[0].id, 1);
	assert_string_equal(pp.maps[0].file, exe);
	MP_ASSERT(ids.exe_id[0] != '\0', "the test program has no build ID "
	    "(linker without --build-id?)");
	assert_string_equal(pp.maps[0].build_id, ids.exe_id);
	if (ids.lib_path[0] != '\0') {
		bool found = false;
		for (size_t i = 0; i < pp.nmaps; i++) {
			if (strcmp(pp.maps[i].file, ids.lib_path) == 0) {
				found = true;
				assert_true(pp.maps[i].build_id[0] != '\0');
				assert_string_equal(pp.maps[i].build_id,
				    ids.lib_id);
			}
		}
		MP_ASSERT(found, "no mapping of %s", ids.lib_path);
	}
	for (size_t i = 0; i < pp.nlocs; i++) {
		const mp_pp_map_t *m = mp_pprof_map(&pp, pp.locs[i].mapping_id);
		if (m == NULL) {
			continue;	/* e.g. the vdso: no file */
		}
		assert_true(pp.locs[i].address >= m->start &&
		    pp.locs[i].address < m->limit);
	}
	/* The site's leaf is in the program's mapping. */
	const mp_pp_loc_t *leaf = mp_pprof_loc(&pp, sm->locs[0]);
	assert_int_equal(leaf->mapping_id, 1);

	/* prof_symbolize: the leaves are named after the sites. */
	assert_string_equal(fn_name(&pp, leaf), "pp_site_main");
	assert_string_equal(fn_name(&pp, mp_pprof_loc(&pp, st->locs[0])),
	    "pp_site_thread");
	size_t named = 0, compared = 0;
	for (size_t i = 0; i < pp.nlocs; i++) {
		const char *name = fn_name(&pp, &pp.locs[i]);
		if (name[0] == '\0') {
			continue;
		}
		named++;
		assert_int_equal(pp.locs[i].nlines, 1);
		Dl_info di;
		const ElfW(Sym) *sym = NULL;
		void *a = (void *)(uintptr_t)pp.locs[i].address;
		if (dladdr1(a, &di, (void **)&sym, RTLD_DL_SYMENT) != 0 &&
		    sym != NULL && di.dli_sname != NULL &&
		    (uintptr_t)a >= (uintptr_t)di.dli_saddr &&
		    (uintptr_t)a < (uintptr_t)di.dli_saddr + sym->st_size) {
			MP_ASSERT(strcmp(di.dli_sname, name) == 0, "location "
			    "0x%" PRIx64 ": \"%s\", dladdr1 says \"%s\"",
			    pp.locs[i].address, name, di.dli_sname);
			compared++;
		}
	}
	assert_true(named >= 2);
	assert_true(compared >= 2);
	/* Function ids are unique and every name is set. */
	for (size_t i = 0; i < pp.nfns; i++) {
		assert_true(pp.fns[i].name[0] != '\0');
		assert_string_equal(pp.fns[i].name, pp.fns[i].system_name);
		for (size_t k = 0; k < i; k++) {
			assert_true(pp.fns[i].id != pp.fns[k].id);
		}
	}

	mp_pprof_free(&pp);
	mp_heap_free(&h);
	for (int i = 0; i < NOBJ; i++) {
		free(objs[i]);
		free(thr_objs[i]);
	}
	pthread_barrier_destroy(&bar);
}

static void test_format_ctl(void **state) {
	(void)state;
	const char *o = NULL;
	size_t sz = sizeof(o);
	assert_int_equal(mallctl("opt.prof_format", (void *)&o, &sz, NULL, 0),
	    0);
	assert_string_equal(o, "pprof");
	assert_string_equal(get_format(), "pprof");
	mp_msgs_start();
	int r1 = set_format("protobuf");
	int r2 = set_format(NULL);
	int r3 = mallctl("prof.format", NULL, NULL, (void *)&o, 1);
	mp_msgs_stop();
	assert_int_equal(r1, EINVAL);
	assert_int_equal(r2, EINVAL);
	assert_int_equal(r3, EINVAL);
	assert_int_equal(mp_msgs_lines, 3);
	MP_ASSERT(strncmp(mp_msgs, "<malloc_prof>: prof.format: \"protobuf\" "
	    "is not a format", 42) == 0, "%s", mp_msgs);
	assert_string_equal(get_format(), "pprof");
	/* Read and write in one call: the old value comes back. */
	const char *nf = "heap_v2";
	sz = sizeof(o);
	assert_int_equal(mallctl("prof.format", (void *)&o, &sz, (void *)&nf,
	    sizeof(nf)), 0);
	assert_string_equal(o, "pprof");
	assert_string_equal(get_format(), "heap_v2");
	assert_int_equal(set_format("pprof"), 0);
}

/* Automatic names follow the format of the moment. */
static void test_automatic_names(void **state) {
	(void)state;
	char prefix[512];
	snprintf(prefix, sizeof(prefix), "%s/auto", tmpdir);
	assert_int_equal(mp_prof_prefix(prefix), 0);
	assert_int_equal(mallctl("prof.dump", NULL, NULL, NULL, 0), 0);
	assert_int_equal(set_format("heap_v2"), 0);
	assert_int_equal(mallctl("prof.dump", NULL, NULL, NULL, 0), 0);
	assert_int_equal(set_format("pprof"), 0);
	DIR *d = opendir(tmpdir);
	assert_non_null(d);
	struct dirent *e;
	int npb = 0, nheap = 0;
	char want_pb[64], want_heap[64];
	snprintf(want_pb, sizeof(want_pb), "auto.%ld.", (long)getpid());
	snprintf(want_heap, sizeof(want_heap), "auto.%ld.", (long)getpid());
	while ((e = readdir(d)) != NULL) {
		size_t l = strlen(e->d_name);
		if (strncmp(e->d_name, want_pb, strlen(want_pb)) != 0) {
			continue;
		}
		if (l > 8 && strcmp(e->d_name + l - 6, ".pb.gz") == 0) {
			assert_non_null(strstr(e->d_name, ".m0.pb.gz"));
			char path[1024];
			snprintf(path, sizeof(path), "%s/%s", tmpdir,
			    e->d_name);
			mp_pprof_t pp;
			MP_PPROF_LOAD(path, &pp);
			mp_pprof_free(&pp);
			npb++;
		} else if (l > 6 && strcmp(e->d_name + l - 5, ".heap") == 0) {
			assert_non_null(strstr(e->d_name, ".m1.heap"));
			nheap++;
		}
	}
	closedir(d);
	assert_int_equal(npb, 1);
	assert_int_equal(nheap, 1);
	(void)want_heap;
}

static void test_no_profiler(void **state) {
	(void)state;
	mp_msgs_start();
	const char *f = "pprof";
	int r1 = mallctl("prof.format", NULL, NULL, (void *)&f, sizeof(f));
	int fd = 1;
	int r2 = mallctl("prof.dump_fd", NULL, NULL, (void *)&fd, sizeof(fd));
	mp_msgs_stop();
	assert_int_equal(r1, ENOENT);
	assert_int_equal(r2, ENOENT);
	MP_ASSERT(strstr(mp_msgs, "--disable-prof") != NULL, "%s", mp_msgs);
}

int main(void) {
	mp_test_init(300);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_format_ctl),
		cmocka_unit_test(test_profile),
		cmocka_unit_test(test_automatic_names),
	};
	return mp_prof_test_main("mp_prof_pprof", test_no_profiler, tests);
}
