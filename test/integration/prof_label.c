/*
 * test/integration/prof_label.c - thread.prof.label: per-thread label
 * sets carried by samples into pprof dumps, and prof_time_resolution.
 *
 * prof_label.conf: prof:true,lg_prof_sample:0 (every allocation sampled:
 * the counts are exact).  Two threads run one function, so their stacks
 * are the same: one sets tenant=alpha, allocates at label_site, adds
 * phase=two and allocates again from the same call; the other sets
 * tenant=beta and allocates once; the main thread, with no labels, too.
 * The pprof dump must give each (thread, label set) its own sample with
 * its pairs as string labels and its exact bytes; the heap_v2 dump of
 * the same moment keeps one line per thread (the label sets summed), as
 * jeprof and the strict reader of test_util.h expect.  The API: keys
 * replace, "key=" removes, NULL clears, the read-out is sorted; bad
 * strings are EINVAL with one `<malloc_prof>: thread.prof.label: ` line
 * and leave the set as it was.  Four threads changing their labels
 * while pprof dumps are taken give whole labels in every dump (run under
 * ThreadSanitizer too).  opt.prof_time_resolution reads what was set,
 * without the "no effect" line it once had.
 */
#include "../test_util.h"

#include <sys/mman.h>

#define NOBJ 40
#define OBJ_SIZE 1000           /* usize 1024 */
#define OBJ_USIZE 1024

static char tmpdir[256];

void label_site(void **objs);

MP_SITE void label_site(void **objs) {
	for (int i = 0; i < NOBJ; i++)
		objs[i] = malloc(opaque_size(OBJ_SIZE));
	__asm__ volatile("" : : : "memory");
}

static int label_set(const char *spec) {
	return mallctl("thread.prof.label", NULL, NULL, (void *)&spec,
	    sizeof(spec));
}

static const char *label_get(void) {
	const char *v = NULL;
	size_t len = sizeof(v);
	assert_int_equal(mallctl("thread.prof.label", (void *)&v, &len, NULL,
	    0), 0);
	assert_non_null(v);
	return v;
}

static int format_set(const char *f) {
	return mallctl("prof.format", NULL, NULL, (void *)&f, sizeof(f));
}

/* ---- the API */

static void test_api(void **state) {
	(void)state;
	assert_string_equal(label_get(), "");
	assert_int_equal(label_set("tenant=a"), 0);
	assert_string_equal(label_get(), "tenant=a");
	assert_int_equal(label_set("req=get"), 0);
	assert_string_equal(label_get(), "req=get,tenant=a");
	assert_int_equal(label_set("tenant=b"), 0);        /* replaces */
	assert_string_equal(label_get(), "req=get,tenant=b");
	assert_int_equal(label_set("tenant="), 0);         /* removes */
	assert_string_equal(label_get(), "req=get");
	assert_int_equal(label_set("zz=1,aa=2,zz=3"), 0);  /* in order */
	assert_string_equal(label_get(), "aa=2,req=get,zz=3");
	assert_int_equal(label_set("v=a=b c"), 0);         /* '=', ' ' ok */
	assert_string_equal(label_get(), "aa=2,req=get,v=a=b c,zz=3");
	/* A read and a write: the set from before. */
	const char *old = NULL, *nv = NULL;
	size_t len = sizeof(old);
	assert_int_equal(mallctl("thread.prof.label", (void *)&old, &len,
	    (void *)&nv, sizeof(nv)), 0);
	assert_string_equal(old, "aa=2,req=get,v=a=b c,zz=3");
	assert_string_equal(label_get(), "");              /* NULL clears */
	/* Interned: the same set is the same string. */
	assert_int_equal(label_set("k=1"), 0);
	const char *a = label_get();
	assert_int_equal(label_set("k=2"), 0);
	assert_int_equal(label_set("k=1"), 0);
	assert_ptr_equal(label_get(), a);
	assert_string_equal(a, "k=1");                     /* still valid */
	assert_int_equal(label_set(NULL), 0);
	/* Eight pairs fit. */
	assert_int_equal(label_set("a=1,b=1,c=1,d=1,e=1,f=1,g=1,h=1"), 0);
	assert_int_equal(label_set(NULL), 0);
}

static void test_einval(void **state) {
	(void)state;
	char key33[40], val65[80], buf[160];
	memset(key33, 'k', 33);
	key33[33] = '\0';
	memset(val65, 'v', 65);
	val65[65] = '\0';
	const char *bad[] = {
		"",                     /* empty */
		"novalue",              /* no '=' */
		"=v",                   /* no key */
		"a b=1",                /* space in the key */
		"k=line\n",             /* control character */
		"k=\x80",               /* not ASCII */
		"ok=1,,x=2",            /* empty pair */
		"thread_id=3",          /* reserved */
		"thread_name=x",
		"a=1,b=1,c=1,d=1,e=1,f=1,g=1,h=1,i=1",  /* nine */
		key33,                  /* filled in below */
		val65,
		"a\nb=1",               /* the message stays one line */
		"no\nvalue",
	};
	snprintf(buf, sizeof(buf), "%s=1", key33);
	bad[10] = buf;
	static char vbuf[100];
	snprintf(vbuf, sizeof(vbuf), "k=%s", val65);
	bad[11] = vbuf;
	assert_int_equal(label_set("keep=me"), 0);
	for (size_t i = 0; i < MP_ARRAY_SIZE(bad); i++) {
		mp_msgs_start();
		int r = label_set(bad[i]);
		mp_msgs_stop();
		MP_ASSERT(r == EINVAL, "\"%s\": %d, not EINVAL", bad[i], r);
		MP_ASSERT(mp_msgs_lines == 1 && strncmp(mp_msgs,
		    "<malloc_prof>: thread.prof.label: ", 34) == 0,
		    "\"%s\": messages \"%s\"", bad[i], mp_msgs);
		assert_string_equal(label_get(), "keep=me");
	}
	/* A wrong newlen. */
	const char *s = "k=v";
	mp_msgs_start();
	int r = mallctl("thread.prof.label", NULL, NULL, (void *)&s, 1);
	mp_msgs_stop();
	assert_int_equal(r, EINVAL);
	assert_int_equal(mp_msgs_lines, 1);
	assert_int_equal(label_set(NULL), 0);
}

/* ---- the split: two threads, one stack */

static void *objs_alpha[2][NOBJ], *objs_beta[NOBJ], *objs_main[NOBJ];

typedef struct {
	volatile int nrounds;           /* not a constant: no unrolling */
	const char *spec[2];
	void **out[2];
} worker_arg_t;

static void *worker(void *p) {
	worker_arg_t *w = p;
	for (int round = 0; round < w->nrounds; round++) {
		if (label_set(w->spec[round]) != 0)
			return (void *)1;
		label_site(w->out[round]);      /* one call: one stack */
	}
	return NULL;
}

/* The value of label key of s, or NULL. */
static const char *sample_label(const mp_pp_sample_t *s, const char *key) {
	for (size_t j = 0; j < s->nlabels && j < MP_PP_LABELS; j++) {
		if (strcmp(s->lkey[j], key) == 0)
			return s->lstr[j];
	}
	return NULL;
}

static bool leaf_in(const mp_pprof_t *pp, const mp_pp_sample_t *s,
    uintptr_t lo, uintptr_t hi) {
	if (s->nlocs == 0)
		return false;
	const mp_pp_loc_t *l = mp_pprof_loc(pp, s->locs[0]);
	return l != NULL && l->address >= lo && l->address < hi;
}

static void test_split(void **state) {
	(void)state;
	worker_arg_t a = {2, {"tenant=alpha", "phase=two"},
	    {objs_alpha[0], objs_alpha[1]}};
	worker_arg_t b = {1, {"tenant=beta", NULL}, {objs_beta, NULL}};
	pthread_t ta, tb;
	void *ra, *rb;
	assert_int_equal(pthread_create(&ta, NULL, worker, &a), 0);
	assert_int_equal(pthread_join(ta, &ra), 0);
	assert_int_equal(pthread_create(&tb, NULL, worker, &b), 0);
	assert_int_equal(pthread_join(tb, &rb), 0);
	assert_null(ra);
	assert_null(rb);
	label_site(objs_main);

	char pb[512], hv[512];
	snprintf(pb, sizeof(pb), "%s/labels.pb.gz", tmpdir);
	snprintf(hv, sizeof(hv), "%s/labels.heap", tmpdir);
	assert_int_equal(format_set("pprof"), 0);
	assert_int_equal(mp_prof_dump(pb), 0);
	assert_int_equal(format_set("heap_v2"), 0);
	assert_int_equal(mp_prof_dump(hv), 0);

	mp_pprof_t pp;
	MP_PPROF_LOAD(pb, &pp);
	int space = mp_pprof_type(&pp, "inuse_space");
	int objs = mp_pprof_type(&pp, "inuse_objects");
	assert_true(space >= 0 && objs >= 0);
	uintptr_t lo, hi;
	mp_fn_range((void *)label_site, &lo, &hi);
	/* alpha alone, alpha with phase=two, beta, none. */
	int64_t bytes[4] = {0, 0, 0, 0}, count[4] = {0, 0, 0, 0};
	unsigned nsamples[4] = {0, 0, 0, 0};
	const char *tid[4] = {NULL, NULL, NULL, NULL};
	for (size_t i = 0; i < pp.nsamples; i++) {
		const mp_pp_sample_t *s = &pp.samples[i];
		if (!leaf_in(&pp, s, lo, hi))
			continue;
		const char *tenant = sample_label(s, "tenant");
		const char *phase = sample_label(s, "phase");
		int k;
		if (tenant == NULL) {
			k = 3;
			MP_ASSERT(phase == NULL && s->nlabels == 1, "an "
			    "unlabeled sample with %zu labels", s->nlabels);
		} else if (strcmp(tenant, "alpha") == 0) {
			k = phase == NULL ? 0 : 1;
			MP_ASSERT(phase == NULL || strcmp(phase, "two") == 0,
			    "phase=%s", phase);
			MP_ASSERT(s->nlabels == (phase == NULL ? 2u : 3u),
			    "alpha sample with %zu labels", s->nlabels);
		} else {
			assert_string_equal(tenant, "beta");
			MP_ASSERT(phase == NULL, "beta has phase=%s", phase);
			k = 2;
		}
		const char *id = sample_label(s, "thread_id");
		assert_non_null(id);
		if (tid[k] != NULL)
			assert_string_equal(tid[k], id);
		tid[k] = id;
		bytes[k] += s->vals[space];
		count[k] += s->vals[objs];
		nsamples[k]++;
	}
	for (int k = 0; k < 4; k++) {
		MP_ASSERT(nsamples[k] == 1, "set %d: %u samples", k,
		    nsamples[k]);
		assert_int_equal(bytes[k], NOBJ * OBJ_USIZE);
		assert_int_equal(count[k], NOBJ);
	}
	/* One thread made both alpha sets; each set has its thread. */
	assert_string_equal(tid[0], tid[1]);
	MP_ASSERT(strcmp(tid[0], tid[2]) != 0 && strcmp(tid[0], tid[3]) != 0 &&
	    strcmp(tid[2], tid[3]) != 0, "thread ids %s %s %s", tid[0],
	    tid[2], tid[3]);
	char alpha_tid[24];
	snprintf(alpha_tid, sizeof(alpha_tid), "%s", tid[0]);
	mp_pprof_free(&pp);             /* tid[] pointed into it */

	/* heap_v2: the alpha thread's two sets (one stack) in one line. */
	mp_heap_t h;
	MP_HEAP_PARSE(hv, &h);
	mp_heap_check_sums(&h, true);
	unsigned seen = 0;
	for (size_t i = 0; i < h.nstacks; i++) {
		const mp_heap_stack_t *s = &h.stacks[i];
		size_t f = mp_heap_user_frame(s);
		if (f >= s->nframes || !mp_ra_in(s->frames[f], lo, hi))
			continue;
		for (size_t t = 0; t < s->nthr; t++) {
			for (size_t u = t + 1; u < s->nthr; u++)
				MP_ASSERT(s->thr[t].uid != s->thr[u].uid,
				    "t%" PRIu64 " twice in a stack",
				    s->thr[t].uid);
			char id[24];
			snprintf(id, sizeof(id), "%" PRIu64, s->thr[t].uid);
			if (strcmp(id, alpha_tid) == 0) {
				assert_int_equal(s->thr[t].c.co,
				    2 * NOBJ);
				assert_int_equal(s->thr[t].c.cb,
				    2 * NOBJ * OBJ_USIZE);
				seen++;
			}
		}
	}
	MP_ASSERT(seen == 1, "%u heap_v2 lines for the alpha thread t%s",
	    seen, alpha_tid);
	mp_heap_free(&h);
	for (int i = 0; i < NOBJ; i++) {
		free(objs_alpha[0][i]);
		free(objs_alpha[1][i]);
		free(objs_beta[i]);
		free(objs_main[i]);
	}
}

/* ---- threads changing labels while pprof dumps are taken */

#define CONC_THREADS 4
static _Atomic int conc_stop;
static _Atomic unsigned conc_rounds;

static void *conc_worker(void *arg) {
	unsigned id = (unsigned)(uintptr_t)arg;
	static const char *const specs[] = {"tenant=t0", "tenant=t1",
	    "tenant=t2", "req=x", "req=", NULL};
	void *keep[8] = {NULL};
	/* Until the dumps are done: some labeled objects are live in each. */
	for (unsigned r = 0; !atomic_load(&conc_stop); r++) {
		const char *spec = specs[(r + id) % MP_ARRAY_SIZE(specs)];
		if (label_set(spec) != 0)
			return (void *)1;
		unsigned k = (r * 7 + id) % 8;
		free(keep[k]);
		keep[k] = malloc(opaque_size(64 + 64 * k));
		atomic_fetch_add(&conc_rounds, 1);
	}
	for (unsigned k = 0; k < 8; k++)
		free(keep[k]);
	return NULL;
}

/* Dumps read what the samplers write: every sample's labels come out
 * whole (a tenant among t0..t2, a req of x) in every dump. */
static void test_concurrent(void **state) {
	(void)state;
	pthread_t t[CONC_THREADS];
	atomic_store(&conc_stop, 0);
	atomic_store(&conc_rounds, 0);
	for (unsigned i = 0; i < CONC_THREADS; i++)
		assert_int_equal(pthread_create(&t[i], NULL, conc_worker,
		    (void *)(uintptr_t)i), 0);
	/* Each live object of the last 8 rounds of a thread: at most 2 of
	 * them unlabeled (specs cycle through 6, one of them NULL). */
	uint64_t t0 = mp_now_ns();
	while (atomic_load(&conc_rounds) < 16 * CONC_THREADS) {
		MP_ASSERT(!mp_waited_too_long(t0), "the threads do not run");
		mp_sleep_ms(1);
	}
	assert_int_equal(format_set("pprof"), 0);
	unsigned labeled = 0;
	for (int d = 0; d < 5; d++) {
		int fd = memfd_create("mp_label", MFD_CLOEXEC);
		assert_true(fd >= 0);
		assert_int_equal(mallctl("prof.dump_fd", NULL, NULL, (void *)&fd,
		    sizeof(fd)), 0);
		assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
		size_t n;
		uint8_t *b = mp_read_fd_all(fd, &n);
		close(fd);
		mp_pprof_t pp;
		bool ok = mp_pprof_decode(b, n, &pp);
		free(b);
		MP_ASSERT(ok, "dump %d: %s", d, pp.err);
		for (size_t i = 0; i < pp.nsamples; i++) {
			const char *tn = sample_label(&pp.samples[i], "tenant");
			const char *rq = sample_label(&pp.samples[i], "req");
			MP_ASSERT(tn == NULL || (strlen(tn) == 2 && tn[0] == 't'
			    && tn[1] >= '0' && tn[1] <= '2'), "tenant=%s", tn);
			MP_ASSERT(rq == NULL || strcmp(rq, "x") == 0, "req=%s",
			    rq);
			labeled += tn != NULL || rq != NULL;
		}
		mp_pprof_free(&pp);
	}
	atomic_store(&conc_stop, 1);
	assert_int_equal(format_set("heap_v2"), 0);
	MP_ASSERT(labeled > 0, "no labeled sample in 5 dumps");
	for (unsigned i = 0; i < CONC_THREADS; i++) {
		void *r;
		assert_int_equal(pthread_join(t[i], &r), 0);
		assert_null(r);
	}
}

/* ---- prof_time_resolution */

static void test_time_resolution(void **state) {
	(void)state;
	const char *v = NULL;
	size_t len = sizeof(v);
	assert_int_equal(mallctl("opt.prof_time_resolution", (void *)&v, &len,
	    NULL, 0), 0);
	assert_string_equal(v, "default");
	char err[4096];
	int st = mp_run_child_conf("time_high",
	    "prof:true,prof_time_resolution:high", err, sizeof(err), NULL, 0,
	    NULL);
	MP_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %#x",
	    st);
	MP_ASSERT(strstr(err, "<malloc_prof>") == NULL, "child said: %s",
	    err);
}

static int child_time_high(void) {
	const char *v = NULL;
	size_t len = sizeof(v);
	if (mallctl("opt.prof_time_resolution", (void *)&v, &len, NULL, 0) !=
	    0 || strcmp(v, "high") != 0) {
		fprintf(stderr, "opt.prof_time_resolution: %s\n", v ? v :
		    "(unreadable)");
		return 1;
	}
	return 0;
}

static void test_no_profiler(void **state) {
	(void)state;
	const char *s = "k=v";
	assert_int_equal(mallctl("thread.prof.label", NULL, NULL, (void *)&s,
	    sizeof(s)), ENOENT);
}

int main(int argc, char **argv) {
	if (argc == 3 && strcmp(argv[1], "--child") == 0 &&
	    strcmp(argv[2], "time_high") == 0)
		return child_time_high();
	mp_test_init(120);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_api),
		cmocka_unit_test(test_einval),
		cmocka_unit_test(test_split),
		cmocka_unit_test(test_concurrent),
		cmocka_unit_test(test_time_resolution),
	};
	return mp_prof_test_main("mp_prof_label", test_no_profiler, tests);
}
