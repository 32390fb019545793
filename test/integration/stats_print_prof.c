/*
 * test/integration/stats_print_prof.c - malloc_stats_print's prof_stats
 * columns (jemalloc 5.3's): with prof_stats on, the merged arenas' bin
 * and large tables get prof_live_requested, prof_live_count,
 * prof_accum_requested and prof_accum_count after nrequests' rate, and
 * their JSON objects the same keys; a per-arena table never has them,
 * nor any table without prof_stats.
 *
 * stats_print_prof.conf: prof:true,lg_prof_sample:0,prof_stats:true, so
 * every allocation is a sample: K objects of REQ_SMALL bytes (a class
 * nothing else here uses) show K * REQ_SMALL requested in their row, and
 * the same for K large ones.  The columns are found by the header's
 * words, the rows by their size; the JSON is checked by python3's json
 * module when there is one (as test/integration/stats_tree does), else
 * for its keys.  The absence is checked in children run without
 * prof_stats (with the profiler, and without it).
 */
#include "../test_util.h"

#define K 7
#define REQ_SMALL 3500
#define REQ_LARGE 100000

static char out_buf[4 * 1024 * 1024];
static size_t out_len;

static void collect(void *opaque, const char *s) {
	(void)opaque;
	size_t n = strlen(s);
	if (out_len + n >= sizeof(out_buf))
		n = sizeof(out_buf) - 1 - out_len;
	memcpy(out_buf + out_len, s, n);
	out_len += n;
	out_buf[out_len] = '\0';
}

static void print(const char *opts) {
	out_len = 0;
	out_buf[0] = '\0';
	malloc_stats_print(collect, NULL, opts);
}

static const char *const prof_cols[4] = {"prof_live_requested",
    "prof_live_count", "prof_accum_requested", "prof_accum_count"};

/* The words of the line at p (up to its newline) into w[], at most n. */
static int words(const char *p, char w[][32], int n) {
	int k = 0;
	while (*p != '\0' && *p != '\n' && k < n) {
		while (*p == ' ')
			p++;
		if (*p == '\0' || *p == '\n')
			break;
		int l = 0;
		while (*p != '\0' && *p != '\n' && *p != ' ') {
			if (l < 31)
				w[k][l++] = *p;
			p++;
		}
		w[k][l] = '\0';
		k++;
	}
	return k;
}

/* In the table whose header starts with title ("bins:", "large:") of
 * the text in sec: the value of column col in the row of size `size`
 * (the header's words after the title and the row's line up one to
 * one).  -1 if there is no such row or column. */
static long long cell(const char *sec, const char *title, size_t size,
    const char *col) {
	char hdr[64][32], row[64][32];
	char key[32];
	snprintf(key, sizeof(key), "\n%s", title);
	/* The table's header, not the summary row of the same title. */
	const char *h = sec;
	int nh = 0;
	while ((h = strstr(h, key)) != NULL) {
		h++;
		nh = words(h, hdr, 64);
		if (nh > 1 && strcmp(hdr[1], "size") == 0)
			break;
	}
	if (h == NULL)
		return -1;
	int c = -1;
	for (int i = 1; i < nh; i++)
		if (strcmp(hdr[i], col) == 0)
			c = i - 1;
	if (c < 0)
		return -1;
	/* "(#/sec)" is one word in both, "util"'s blank spacer none. */
	for (const char *l = strchr(h, '\n'); l != NULL && l[1] != '\0';
	    l = strchr(l + 1, '\n')) {
		int nr = words(l + 1, row, 64);
		if (nr == 0 || strcmp(row[0], "---") == 0)
			continue;
		char *end;
		unsigned long long sz = strtoull(row[0], &end, 10);
		if (*end != '\0')
			return -1;       /* the table ended */
		if (sz == size)
			return c < nr ? strtoll(row[c], NULL, 10) : -1;
	}
	return -1;
}

typedef struct {
	uint64_t req_sum;
	uint64_t count;
} stats_pair_t;

static void *small[K], *large[K];
static size_t small_usize, large_usize;

static void alloc_all(void) {
	for (int i = 0; i < K; i++) {
		small[i] = malloc(opaque_size(REQ_SMALL));
		large[i] = malloc(opaque_size(REQ_LARGE));
		assert_non_null(small[i]);
		assert_non_null(large[i]);
	}
	small_usize = malloc_usable_size(small[0]);
	large_usize = malloc_usable_size(large[0]);
	assert_true(small_usize > REQ_SMALL);
	assert_true(large_usize > REQ_LARGE);
}

static void free_all(void) {
	for (int i = 0; i < K; i++) {
		free(small[i]);
		free(large[i]);
	}
}

/* "a" prints the merged arenas alone: its tables have the columns, the
 * header's words in jemalloc's order, and the rows our objects' sums. */
static void test_text(void **state) {
	(void)state;
	alloc_all();
	print("a");
	const char *m = strstr(out_buf, "Merged arenas stats:\n");
	MP_ASSERT(m != NULL, "no merged section: %.200s", out_buf);
	const char *bins = strstr(m, "\nbins:");
	assert_non_null(bins);
	MP_ASSERT(strstr(bins, "(#/sec)  prof_live_requested  prof_live_count"
	    " prof_accum_requested prof_accum_count  nshards") != NULL,
	    "bin header: %.300s", bins + 1);
	const char *lg = strstr(m, "\nlarge:");
	assert_non_null(lg);
	MP_ASSERT(strstr(lg, "(#/sec)  prof_live_requested  prof_live_count"
	    " prof_accum_requested prof_accum_count  curlextents\n") != NULL,
	    "large header: %.300s", lg + 1);
	long long v = cell(m, "bins:", small_usize, "prof_live_requested");
	MP_ASSERT(v == (long long)K * REQ_SMALL, "bin %zu: "
	    "prof_live_requested %lld, expected %d", small_usize, v,
	    K * REQ_SMALL);
	assert_int_equal(cell(m, "bins:", small_usize, "prof_live_count"), K);
	assert_true(cell(m, "bins:", small_usize, "prof_accum_requested") >=
	    (long long)K * REQ_SMALL);
	assert_true(cell(m, "bins:", small_usize, "prof_accum_count") >= K);
	/* The columns after them are still where the header says. */
	assert_true(cell(m, "bins:", small_usize, "curregs") >= K);
	v = cell(m, "large:", large_usize, "prof_live_requested");
	MP_ASSERT(v == (long long)K * REQ_LARGE, "large %zu: "
	    "prof_live_requested %lld, expected %d", large_usize, v,
	    K * REQ_LARGE);
	assert_int_equal(cell(m, "large:", large_usize, "prof_live_count"),
	    K);
	assert_true(cell(m, "large:", large_usize, "curlextents") >= K);
	free_all();
	print("a");
	assert_int_equal(cell(out_buf, "bins:", small_usize,
	    "prof_live_count"), 0);
	assert_true(cell(out_buf, "bins:", small_usize, "prof_accum_count") >=
	    K);
}

/* The per-arena tables never have them: printed alone ("m"), no header
 * has the words. */
static void test_per_arena(void **state) {
	(void)state;
	alloc_all();
	print("m");
	MP_ASSERT(strstr(out_buf, "arenas[0]:\n") != NULL, "no arenas[0]");
	assert_null(strstr(out_buf, "prof_live_requested"));
	print("Jm");
	assert_null(strstr(out_buf, "prof_live_requested"));
	free_all();
}

/* The JSON: every object of merged.bins and merged.lextents has the
 * four keys, after nrequests and before curlextents, and our classes'
 * values; it parses. */
static void test_json(void **state) {
	(void)state;
	alloc_all();
	print("Ja");
	for (int k = 0; k < 4; k++) {
		char key[64];
		snprintf(key, sizeof(key), "\"%s\": ", prof_cols[k]);
		assert_non_null(strstr(out_buf, key));
	}
	MP_ASSERT(strstr(out_buf, "\"nrequests\": 0,\n\t\t\t\t\t\t"
	    "\"prof_live_requested\": ") != NULL, "bins: no prof keys after "
	    "nrequests");
	MP_ASSERT(strstr(out_buf, "\"prof_accum_count\": 0,\n\t\t\t\t\t\t"
	    "\"curlextents\": ") != NULL, "lextents: no prof keys before "
	    "curlextents");
	if (system("command -v python3 >/dev/null 2>&1") == 0) {
		char cmd[1024];
		snprintf(cmd, sizeof(cmd), "python3 -c 'import json,sys\n"
		    "d = json.load(sys.stdin)[\"jemalloc\"]\n"
		    "m = d[\"stats.arenas\"][\"merged\"]\n"
		    "b = [x for x in m[\"bins\"] if "
		    "x[\"prof_live_requested\"] == %d and "
		    "x[\"prof_live_count\"] == %d]\n"
		    "l = [x for x in m[\"lextents\"] if "
		    "x[\"prof_live_requested\"] == %d and "
		    "x[\"prof_live_count\"] == %d]\n"
		    "assert len(b) == 1 and len(l) == 1, (len(b), len(l))\n"
		    "keys = [\"prof_live_requested\", \"prof_live_count\", "
		    "\"prof_accum_requested\", \"prof_accum_count\"]\n"
		    "assert all(all(k in x for k in keys) for x in "
		    "m[\"bins\"] + m[\"lextents\"])'", K * REQ_SMALL, K,
		    K * REQ_LARGE, K);
		FILE *f = popen(cmd, "w");
		assert_non_null(f);
		fwrite(out_buf, 1, out_len, f);
		int st = pclose(f);
		MP_ASSERT(st == 0, "python3 rejects the JSON (%d)", st);
	}
	free_all();
}

/* Children without prof_stats: no column, no key. */
static char child_out[4 * 1024 * 1024];

static void test_absent(void **state) {
	(void)state;
	static const char *const confs[] = {"prof:true,lg_prof_sample:0",
	    NULL};
	for (size_t i = 0; i < MP_ARRAY_SIZE(confs); i++) {
		int st = mp_run_child_conf("print", confs[i], child_out,
		    sizeof(child_out), NULL, 0, NULL);
		MP_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child (%s): "
		    "status %#x", confs[i] != NULL ? confs[i] : "no options",
		    st);
		MP_ASSERT(strstr(child_out, "Merged arenas stats:") != NULL &&
		    strstr(child_out, "\"stats.arenas\"") != NULL,
		    "child (%s) printed no merged section",
		    confs[i] != NULL ? confs[i] : "no options");
		MP_ASSERT(strstr(child_out, "prof_live_") == NULL &&
		    strstr(child_out, "prof_accum_requested") == NULL &&
		    strstr(child_out, "prof_accum_count") == NULL,
		    "child (%s): prof_stats columns without prof_stats",
		    confs[i] != NULL ? confs[i] : "no options");
	}
}

/* --child print: the merged tables in text and JSON, with objects. */
static int child_print(void) {
	void *p[K];
	for (int i = 0; i < K; i++)
		p[i] = malloc(opaque_size(REQ_SMALL));
	malloc_stats_print(NULL, NULL, "a");
	malloc_stats_print(NULL, NULL, "Ja");
	for (int i = 0; i < K; i++)
		free(p[i]);
	return 0;
}

static void test_no_profiler(void **state) {
	(void)state;
	print("a");
	assert_null(strstr(out_buf, "prof_live_requested"));
}

int main(int argc, char **argv) {
	if (argc == 3 && strcmp(argv[1], "--child") == 0)
		return strcmp(argv[2], "print") == 0 ? child_print() : 2;
	mp_test_init(120);
	if (!MALLOC_PROF_CONFIG_PROF) {
		const struct CMUnitTest tests[] = {
			cmocka_unit_test(test_no_profiler),
		};
		return mp_run_tests(tests);
	}
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_text),
		cmocka_unit_test(test_per_arena),
		cmocka_unit_test(test_json),
		cmocka_unit_test(test_absent),
	};
	return mp_run_tests(tests);
}
