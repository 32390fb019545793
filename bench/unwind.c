/*
 * bench/unwind.c: the cost of the heap profiler's stack walk
 * (prof_backtrace, src/prof/prof_sys.c) in each prof_unwind mode, against
 * libgcc's _Unwind_Backtrace (what jemalloc's profiler uses), in
 * nanoseconds and in instructions per captured stack.
 *
 * A stack of DEPTH frames is a chain of DEPTH distinct functions (so that
 * every frame has its own return address and call-frame row, as in a real
 * program), built twice from this file: once with frame pointers
 * (-DUNWIND_PART=1) and once without (-DUNWIND_PART=2); the driver
 * (-DUNWIND_PART=0) is built with them.  At the bottom of a chain,
 * bench_bottom calls prof_backtrace or _Unwind_Backtrace itself, so both
 * start from its frame: prof_backtrace reads its saved return address by
 * frame pointer, and libgcc's callback drops bench_bottom's own frame, as
 * jemalloc drops its own.  Both stop at DEPTH return addresses, and each
 * walk is checked against the return addresses the chain's functions
 * recorded with __builtin_return_address(0) on the way down: a walk that
 * loses or invents a frame aborts the run instead of giving a number.
 *
 * fp is measured on the frame-pointer chain only (without frame pointers
 * it loses frames: that is what cfi and auto are for); cfi, auto and
 * libgcc on both chains.
 *
 * Warm: the same stack walked again and again (prof_cfi.c's rule cache
 * holds its rows).  Each repetition times every mode of both chains in a
 * rotated order, so that the load of a shared machine falls on all alike;
 * the report gives medians.  Cold: the first walk of the chain in a new
 * process (this program started again per sample), after one shallow
 * walk from main in the same mode has paid the one-time set-up (the text
 * map from /proc/self/maps, libgcc's first call), so the chain's rows are
 * in no cache of ours; "touched" walks the other chain first, so that
 * only the rows are new, not the pages they go to.  With valgrind
 * present, instruction counts per stack from callgrind (a new process per
 * mode, chain and depth: the first walk, then K more), which do not
 * depend on the machine's load.
 *
 * Built and run by bench/unwind.sh, linked statically against
 * libmalloc_prof_core.a as the unit tests are.  `unwind [--reps N]
 * [--cold N] [--no-callgrind] [--keep DIR]` prints the report in
 * Markdown; the other verbs are its children.
 */
#include "malloc_prof/internal/internal.h"

/* The chain: LEVEL_MAX distinct functions, level i at depth i. */
#define LEVEL_MAX 100
#define X10(M, b) M(b##0) M(b##1) M(b##2) M(b##3) M(b##4) M(b##5) \
	M(b##6) M(b##7) M(b##8) M(b##9)
#define LEVELS(M) X10(M, ) X10(M, 1) X10(M, 2) X10(M, 3) X10(M, 4) \
	X10(M, 5) X10(M, 6) X10(M, 7) X10(M, 8) X10(M, 9)

typedef unsigned (*level_fn_t)(unsigned i);

/* Return addresses as the chain recorded them: ra[j] is the one a walk
 * must give at index j. */
extern void *volatile bench_ra[LEVEL_MAX + 1];
unsigned bench_bottom(void);

#if UNWIND_PART == 1 || UNWIND_PART == 2
#if UNWIND_PART == 1
#define CHAIN(name) fp_##name
#else
#define CHAIN(name) nofp_##name
#endif

extern level_fn_t const CHAIN(levels)[LEVEL_MAX];

/* Each level keeps a stack frame (a volatile array of a size that varies
 * with the level) and its argument across the call (a callee-saved
 * register), so the call-frame rows differ as real functions' do; the
 * work after the call keeps the call from being a tail call. */
#define LEVEL_DEF(n) \
	__attribute__((noinline)) static unsigned \
	CHAIN(level##n)(unsigned i) { \
		volatile unsigned pad[2 + (n) % 7]; \
		pad[0] = i; \
		bench_ra[i + 1] = __builtin_return_address(0); \
		unsigned r = i == 0 ? bench_bottom() : \
		    CHAIN(levels)[i - 1](i - 1); \
		return r + pad[0] + i * (n); \
	}
LEVELS(LEVEL_DEF)

#define LEVEL_REF(n) CHAIN(level##n),
level_fn_t const CHAIN(levels)[LEVEL_MAX] = { LEVELS(LEVEL_REF) };

#else /* UNWIND_PART == 0: the driver */

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <unwind.h>
#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#define HAVE_CALLGRIND 1
#else
#define HAVE_CALLGRIND 0
#endif

extern level_fn_t const fp_levels[LEVEL_MAX];
extern level_fn_t const nofp_levels[LEVEL_MAX];

void *volatile bench_ra[LEVEL_MAX + 1];

enum { CHAIN_FP, CHAIN_NOFP, CHAIN_COUNT };
static const char *const chain_names[CHAIN_COUNT] = { "fp", "nofp" };

/* Walkers: the library's three modes (their prof_unwind_t values), then
 * libgcc. */
#define WALK_LIBGCC PROF_UNWIND_COUNT
#define WALK_COUNT (PROF_UNWIND_COUNT + 1)
_Static_assert(PROF_UNWIND_FP == 0 && PROF_UNWIND_CFI == 1 &&
    PROF_UNWIND_AUTO == 2, "walk_names follows prof_unwind_t");
static const char *const walk_names[WALK_COUNT] = {
	"fp", "cfi", "auto", "libgcc"
};

static bool walk_applies(unsigned chain, unsigned walk) {
	return walk != PROF_UNWIND_FP || chain == CHAIN_FP;
}

static const unsigned depths[] = { 10, 30, 100 };
#define DEPTH_COUNT (sizeof(depths) / sizeof(depths[0]))

/* What bench_bottom does, set before each descent. */
typedef enum {
	JOB_WARM,       /* time every walk of the chain, K walks each */
	JOB_PREP,       /* one checked walk */
	JOB_COLD,       /* time one walk (a fresh process) */
	JOB_CALLGRIND   /* one walk, then K: two callgrind dumps */
} job_t;

static struct {
	job_t job;
	unsigned chain, depth, walk, k, rep;
	double ns[WALK_COUNT];          /* out: per walk, this repetition */
	long faults;                    /* out: minor faults, JOB_COLD */
} bench;

static void die(const char *what) {
	fprintf(stderr, "<malloc_prof>: bench/unwind: %s\n", what);
	exit(1);
}

static uint64_t now_ns(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* jemalloc's callback (prof_unwind_callback), plus dropping the caller's
 * own frames. */
typedef struct {
	void **vec;
	unsigned n, max, skip;
} gcc_bt_t;

static _Unwind_Reason_Code gcc_cb(struct _Unwind_Context *ctx, void *arg) {
	gcc_bt_t *d = arg;
	void *ip = (void *)_Unwind_GetIP(ctx);
	if (ip == NULL)
		return _URC_END_OF_STACK;
	if (d->skip > 0) {
		d->skip--;
		return _URC_NO_REASON;
	}
	d->vec[d->n++] = ip;
	return d->n == d->max ? _URC_END_OF_STACK : _URC_NO_REASON;
}

/* One walk of `max` frames from the frame `fp` of its caller; inlined,
 * so that both walkers start from that caller's frame. */
__attribute__((always_inline)) static inline unsigned walk_once(
    unsigned walk, void **vec, unsigned max, uintptr_t fp) {
	if (walk == WALK_LIBGCC) {
		gcc_bt_t d = { vec, 0, max, 1 };
		_Unwind_Backtrace(gcc_cb, &d);
		return d.n;
	}
	opt_prof_unwind = walk;
	return prof_backtrace(vec, max, fp);
}

/* Whether a walk gave exactly the chain's return addresses. */
static bool walk_ok(void *const *vec, unsigned n, unsigned depth) {
	if (n != depth)
		return false;
	for (unsigned j = 0; j < depth; j++) {
		if (vec[j] != bench_ra[j])
			return false;
	}
	return true;
}

static void report_bad(unsigned walk, void *const *vec, unsigned n) {
	fprintf(stderr, "<malloc_prof>: bench/unwind: %s on chain %s, "
	    "depth %u: %u frames, expected %u:", walk_names[walk],
	    chain_names[bench.chain], bench.depth, n, bench.depth);
	for (unsigned j = 0; j < n && j < bench.depth; j++) {
		if (vec[j] != bench_ra[j]) {
			fprintf(stderr, " first wrong at %u (%p, expected %p)",
			    j, vec[j], bench_ra[j]);
			break;
		}
	}
	fputc('\n', stderr);
	exit(1);
}

/* The bottom of a chain: the walks are called from here. */
__attribute__((noinline)) unsigned bench_bottom(void) {
	uintptr_t fp = (uintptr_t)__builtin_frame_address(0);
	void *vec[LEVEL_MAX];
	unsigned depth = bench.depth, n = 0;
	bench_ra[0] = __builtin_return_address(0);
	switch (bench.job) {
	case JOB_WARM:
		for (unsigned i = 0; i < WALK_COUNT; i++) {
			unsigned walk = (i + bench.rep) % WALK_COUNT;
			if (!walk_applies(bench.chain, walk))
				continue;
			/* Warm the rows and check the walk first. */
			n = walk_once(walk, vec, depth, fp);
			if (!walk_ok(vec, n, depth))
				report_bad(walk, vec, n);
			unsigned bad = 0;
			uint64_t t0 = now_ns();
			for (unsigned k = 0; k < bench.k; k++) {
				n = walk_once(walk, vec, depth, fp);
				bad += n != depth;
			}
			uint64_t t1 = now_ns();
			if (bad != 0 || !walk_ok(vec, n, depth))
				report_bad(walk, vec, n);
			bench.ns[walk] = (double)(t1 - t0) / bench.k;
		}
		break;
	case JOB_PREP:
		n = walk_once(bench.walk, vec, depth, fp);
		if (!walk_ok(vec, n, depth))
			report_bad(bench.walk, vec, n);
		break;
	case JOB_COLD: {
		struct rusage u0, u1;
		getrusage(RUSAGE_SELF, &u0);
		uint64_t t0 = now_ns();
		n = walk_once(bench.walk, vec, depth, fp);
		uint64_t t1 = now_ns();
		getrusage(RUSAGE_SELF, &u1);
		if (!walk_ok(vec, n, depth))
			report_bad(bench.walk, vec, n);
		bench.ns[bench.walk] = (double)(t1 - t0);
		bench.faults = u1.ru_minflt - u0.ru_minflt;
		break;
	}
	case JOB_CALLGRIND: {
#if HAVE_CALLGRIND
		CALLGRIND_ZERO_STATS;
#endif
		n = walk_once(bench.walk, vec, depth, fp);
#if HAVE_CALLGRIND
		CALLGRIND_DUMP_STATS_AT("cold");
#endif
		if (!walk_ok(vec, n, depth))
			report_bad(bench.walk, vec, n);
		unsigned bad = 0;
#if HAVE_CALLGRIND
		CALLGRIND_ZERO_STATS;
#endif
		for (unsigned k = 0; k < bench.k; k++) {
			n = walk_once(bench.walk, vec, depth, fp);
			bad += n != depth;
		}
#if HAVE_CALLGRIND
		CALLGRIND_DUMP_STATS_AT("warm");
#endif
		if (bad != 0 || !walk_ok(vec, n, depth))
			report_bad(bench.walk, vec, n);
		break;
	}
	}
	return n;
}

static void descend(unsigned chain, unsigned depth) {
	const level_fn_t *levels = chain == CHAIN_FP ? fp_levels : nofp_levels;
	bench.chain = chain;
	bench.depth = depth;
	levels[depth - 1](depth - 1);
}

/* One-time set-up a first walk pays in any process: the text map
 * (/proc/self/maps), libgcc's first call. */
__attribute__((noinline)) static void shallow_walk(unsigned walk) {
	void *vec[4];
	if (walk_once(walk, vec, 4, (uintptr_t)__builtin_frame_address(0))
	    == 0)
		die("the shallow walk from main found no frame");
}

static int cmp_double(const void *a, const void *b) {
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double median(double *v, unsigned n) {
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Walks per timed batch: about 30,000 frames. */
static unsigned warm_k(unsigned depth) {
	return 30000 / depth;
}

static unsigned walk_of(const char *s) {
	for (unsigned w = 0; w < WALK_COUNT; w++) {
		if (strcmp(s, walk_names[w]) == 0)
			return w;
	}
	die("unknown walk");
	return 0;
}

static unsigned chain_of(const char *s) {
	for (unsigned c = 0; c < CHAIN_COUNT; c++) {
		if (strcmp(s, chain_names[c]) == 0)
			return c;
	}
	die("unknown chain");
	return 0;
}

static unsigned depth_of(const char *s) {
	unsigned long d = strtoul(s, NULL, 10);
	if (d < 1 || d > LEVEL_MAX)
		die("depth out of range");
	return (unsigned)d;
}

/*
 * Child verbs: `cold CHAIN WALK DEPTH fresh|touched` prints the time of
 * the chain's first walk and the minor page faults it took; touched
 * first walks the other chain at the greatest depth (its rows are not
 * this chain's), so that the pages of the rule cache and of the tables'
 * indexes have been touched and only the rows are new.  `callgrind CHAIN
 * WALK DEPTH K` walks once, then K times, with a callgrind dump after
 * each.
 */
static int child(int argc, char **argv) {
	bool cold = strcmp(argv[1], "cold") == 0;
	if (argc != 6)
		die("usage: cold CHAIN WALK DEPTH fresh|touched | "
		    "callgrind CHAIN WALK DEPTH K");
	bench.walk = walk_of(argv[3]);
	unsigned chain = chain_of(argv[2]), depth = depth_of(argv[4]);
	shallow_walk(bench.walk);
	if (cold && strcmp(argv[5], "touched") == 0) {
		/* fp keeps no rows and does not apply to the other chain:
		 * cfi touches the pages there. */
		unsigned other = (chain + 1) % CHAIN_COUNT, walk = bench.walk;
		bench.job = JOB_PREP;
		if (!walk_applies(other, walk))
			bench.walk = PROF_UNWIND_CFI;
		descend(other, LEVEL_MAX);
		bench.walk = walk;
	} else if (cold && strcmp(argv[5], "fresh") != 0) {
		die("cold takes fresh or touched");
	}
	bench.job = cold ? JOB_COLD : JOB_CALLGRIND;
	bench.k = cold ? 0 : (unsigned)strtoul(argv[5], NULL, 10);
	descend(chain, depth);
	if (cold)
		printf("%.0f %ld\n", bench.ns[bench.walk], bench.faults);
	return 0;
}

/* Runs argv and reads up to two numbers from its standard output into
 * v (NaN where there are none); a failure of the child ends the report. */
static void run_child(char *const argv[], double v[2]) {
	int fd[2];
	if (pipe(fd) != 0)
		die("pipe failed");
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, fd[1], 1);
	posix_spawn_file_actions_addclose(&fa, fd[0]);
	posix_spawn_file_actions_addclose(&fa, fd[1]);
	pid_t pid;
	extern char **environ;
	if (posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ) != 0)
		die("posix_spawn failed");
	posix_spawn_file_actions_destroy(&fa);
	close(fd[1]);
	char buf[256];
	size_t len = 0;
	ssize_t r;
	while ((r = read(fd[0], buf + len, sizeof(buf) - 1 - len)) > 0 ||
	    (r < 0 && errno == EINTR))
		len += r > 0 ? (size_t)r : 0;
	close(fd[0]);
	buf[len] = '\0';
	int status;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		fprintf(stderr, "<malloc_prof>: bench/unwind: child failed:");
		for (unsigned i = 0; argv[i] != NULL; i++)
			fprintf(stderr, " %s", argv[i]);
		fputc('\n', stderr);
		exit(1);
	}
	char *p = buf;
	for (unsigned i = 0; i < 2; i++) {
		char *end;
		v[i] = strtod(p, &end);
		if (end == p)
			v[i] = NAN;
		p = end;
	}
}

/* The total of a callgrind output file ("totals:" or "summary:"). */
static double callgrind_total(const char *path) {
	FILE *f = fopen(path, "r");
	if (f == NULL)
		return NAN;
	char line[512];
	double v = NAN;
	while (fgets(line, sizeof(line), f) != NULL) {
		if (strncmp(line, "totals:", 7) == 0)
			v = strtod(line + 7, NULL);
		else if (strncmp(line, "summary:", 8) == 0 && isnan(v))
			v = strtod(line + 8, NULL);
	}
	fclose(f);
	return v;
}

/* Results by chain, depth index and walk (NaN where a walk does not
 * apply).  Cold: fresh and touched (child's comment), with the page
 * faults the walk took. */
typedef double result_t[CHAIN_COUNT][DEPTH_COUNT][WALK_COUNT];
enum { COLD_FRESH, COLD_TOUCHED, COLD_COUNT };
static const char *const cold_names[COLD_COUNT] = { "fresh", "touched" };
static result_t warm_ns, cold_ns[COLD_COUNT], cold_faults[COLD_COUNT];
static result_t ir_warm, ir_cold;

static void result_clear(result_t r) {
	for (unsigned c = 0; c < CHAIN_COUNT; c++) {
		for (unsigned d = 0; d < DEPTH_COUNT; d++) {
			for (unsigned w = 0; w < WALK_COUNT; w++)
				r[c][d][w] = NAN;
		}
	}
}

/* Samples of one result: n per chain, depth and walk. */
typedef struct {
	unsigned n;
	double *v;
} samples_t;

static double *sample_at(samples_t *s, unsigned i, unsigned c, unsigned d,
    unsigned w) {
	return &s->v[((i * CHAIN_COUNT + c) * DEPTH_COUNT + d) * WALK_COUNT +
	    w];
}

static void samples_init(samples_t *s, unsigned n) {
	s->n = n;
	s->v = malloc(sizeof(double) * n * CHAIN_COUNT * DEPTH_COUNT *
	    WALK_COUNT);
	if (s->v == NULL)
		die("out of memory");
}

static void samples_median(samples_t *s, result_t out) {
	double *col = malloc(sizeof(double) * s->n);
	if (col == NULL)
		die("out of memory");
	result_clear(out);
	for (unsigned c = 0; c < CHAIN_COUNT; c++) {
		for (unsigned d = 0; d < DEPTH_COUNT; d++) {
			for (unsigned w = 0; w < WALK_COUNT; w++) {
				if (!walk_applies(c, w))
					continue;
				for (unsigned i = 0; i < s->n; i++)
					col[i] = *sample_at(s, i, c, d, w);
				out[c][d][w] = median(col, s->n);
			}
		}
	}
	free(col);
	free(s->v);
}

/* Warm: every repetition walks both chains, every walk in turn. */
static void run_warm(unsigned reps) {
	samples_t s;
	samples_init(&s, reps);
	for (unsigned d = 0; d < DEPTH_COUNT; d++) {
		for (unsigned r = 0; r < reps; r++) {
			for (unsigned c = 0; c < CHAIN_COUNT; c++) {
				bench.job = JOB_WARM;
				bench.k = warm_k(depths[d]);
				bench.rep = r;
				descend(c, depths[d]);
				for (unsigned w = 0; w < WALK_COUNT; w++) {
					*sample_at(&s, r, c, d, w) =
					    bench.ns[w];
				}
			}
		}
	}
	samples_median(&s, warm_ns);
}

/* Cold: a new process per sample, the walks in a rotated order. */
static void run_cold(const char *self, unsigned runs, unsigned variant) {
	samples_t ns, faults;
	samples_init(&ns, runs);
	samples_init(&faults, runs);
	for (unsigned r = 0; r < runs; r++) {
		for (unsigned c = 0; c < CHAIN_COUNT; c++) {
			for (unsigned d = 0; d < DEPTH_COUNT; d++) {
				for (unsigned i = 0; i < WALK_COUNT; i++) {
					unsigned w = (i + r) % WALK_COUNT;
					if (!walk_applies(c, w))
						continue;
					char ds[16];
					snprintf(ds, sizeof(ds), "%u",
					    depths[d]);
					char *av[] = { (char *)self, "cold",
					    (char *)chain_names[c],
					    (char *)walk_names[w], ds,
					    (char *)cold_names[variant], NULL };
					double out[2];
					run_child(av, out);
					*sample_at(&ns, r, c, d, w) = out[0];
					*sample_at(&faults, r, c, d, w) =
					    out[1];
				}
			}
		}
	}
	samples_median(&ns, cold_ns[variant]);
	samples_median(&faults, cold_faults[variant]);
}

/* Instructions of one walk, chain and depth: callgrind's two dumps are
 * the first walk and the K that follow. */
static void callgrind_one(const char *self, const char *dir, unsigned c,
    unsigned d, unsigned w) {
	unsigned k = 3000 / depths[d];
	char out[PATH_MAX + 32], opt[PATH_MAX + 64], f[PATH_MAX + 40];
	char ds[16], ks[16];
	snprintf(out, sizeof(out), "%s/%s-%s-%u", dir, chain_names[c],
	    walk_names[w], depths[d]);
	snprintf(opt, sizeof(opt), "--callgrind-out-file=%s", out);
	snprintf(ds, sizeof(ds), "%u", depths[d]);
	snprintf(ks, sizeof(ks), "%u", k);
	char *av[] = { "valgrind", "-q", "--tool=callgrind",
	    "--compress-strings=no", opt, (char *)self, "callgrind",
	    (char *)chain_names[c], (char *)walk_names[w], ds, ks, NULL };
	double ignored[2];
	run_child(av, ignored);
	snprintf(f, sizeof(f), "%s.1", out);
	ir_cold[c][d][w] = callgrind_total(f);
	snprintf(f, sizeof(f), "%s.2", out);
	ir_warm[c][d][w] = callgrind_total(f) / k;
	if (isnan(ir_cold[c][d][w]) || isnan(ir_warm[c][d][w]))
		die("no callgrind totals (is valgrind installed?)");
}

static void run_callgrind(const char *self, const char *dir) {
	result_clear(ir_warm);
	result_clear(ir_cold);
	for (unsigned c = 0; c < CHAIN_COUNT; c++) {
		for (unsigned d = 0; d < DEPTH_COUNT; d++) {
			for (unsigned w = 0; w < WALK_COUNT; w++) {
				if (walk_applies(c, w))
					callgrind_one(self, dir, c, d, w);
			}
		}
	}
}

static void fmt_ratio(char *buf, size_t size, double a, double b) {
	if (isnan(a) || isnan(b) || b == 0)
		snprintf(buf, size, "–");
	else
		snprintf(buf, size, "%.2f", a / b);
}

static void print_table(const char *title,
    result_t v, const char *unit,
    bool ratios) {
	printf("\n%s\n\n", title);
	printf("| chain | depth |");
	for (unsigned w = 0; w < WALK_COUNT; w++)
		printf(" %s (%s) |", walk_names[w], unit);
	if (ratios)
		printf(" fp/libgcc | cfi/libgcc | auto/libgcc |");
	printf("\n|---|--:|");
	for (unsigned w = 0; w < WALK_COUNT + (ratios ? 3 : 0); w++)
		printf("--:|");
	printf("\n");
	for (unsigned c = 0; c < CHAIN_COUNT; c++) {
		for (unsigned d = 0; d < DEPTH_COUNT; d++) {
			printf("| %s | %u |", chain_names[c], depths[d]);
			for (unsigned w = 0; w < WALK_COUNT; w++) {
				if (!walk_applies(c, w) || isnan(v[c][d][w]))
					printf(" – |");
				else
					printf(" %.0f |", v[c][d][w]);
			}
			for (unsigned w = 0; ratios && w < WALK_LIBGCC; w++) {
				char r[32];
				fmt_ratio(r, sizeof(r), walk_applies(c, w) ?
				    v[c][d][w] : NAN, v[c][d][WALK_LIBGCC]);
				printf(" %s |", r);
			}
			printf("\n");
		}
	}
}

/* The target: warm cfi at depth 30 <= 1/4 of libgcc's. */
static void print_target(bool callgrind) {
	printf("\nTarget (warm cfi at depth 30 <= 1/4 of libgcc's):\n\n");
	for (unsigned c = 0; c < CHAIN_COUNT; c++) {
		double t = warm_ns[c][1][PROF_UNWIND_CFI] /
		    warm_ns[c][1][WALK_LIBGCC];
		printf("- chain %s: time %.2f (%s)", chain_names[c], t,
		    t <= 0.25 ? "met" : "not met");
		if (callgrind) {
			double i = ir_warm[c][1][PROF_UNWIND_CFI] /
			    ir_warm[c][1][WALK_LIBGCC];
			printf(", instructions %.2f (%s)", i,
			    i <= 0.25 ? "met" : "not met");
		}
		printf("\n");
	}
}

int main(int argc, char **argv) {
	prof_sys_thread_init(&mp_tsd);
	if (argc > 1 && (strcmp(argv[1], "cold") == 0 ||
	    strcmp(argv[1], "callgrind") == 0))
		return child(argc, argv);

	unsigned reps = 51, cold_runs = 21;
	bool callgrind = HAVE_CALLGRIND;
	const char *keep = NULL;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc)
			reps = (unsigned)strtoul(argv[++i], NULL, 10);
		else if (strcmp(argv[i], "--cold") == 0 && i + 1 < argc)
			cold_runs = (unsigned)strtoul(argv[++i], NULL, 10);
		else if (strcmp(argv[i], "--no-callgrind") == 0)
			callgrind = false;
		else if (strcmp(argv[i], "--keep") == 0 && i + 1 < argc)
			keep = argv[++i];
		else
			die("usage: unwind [--reps N] [--cold N] "
			    "[--no-callgrind] [--keep DIR]");
	}
	if (reps == 0 || cold_runs == 0)
		die("--reps and --cold take a positive count");
	char self[PATH_MAX];
	ssize_t sl = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (sl <= 0)
		die("readlink /proc/self/exe failed");
	self[sl] = '\0';

	run_warm(reps);
	for (unsigned v = 0; v < COLD_COUNT; v++)
		run_cold(self, cold_runs, v);
	char dir[PATH_MAX];
	if (callgrind) {
		snprintf(dir, sizeof(dir), "%s", keep != NULL ? keep :
		    "/tmp/unwind-cg.XXXXXX");
		if (keep == NULL && mkdtemp(dir) == NULL)
			die("mkdtemp failed");
		run_callgrind(self, dir);
	}

	printf("Stack walks, per captured stack of DEPTH frames; medians of "
	    "%u interleaved repetitions (warm: %u walks per batch at depth "
	    "10, %u at 30, %u at 100) and of %u new processes (cold).\n",
	    reps, warm_k(10), warm_k(30), warm_k(100), cold_runs);
	print_table("Warm (the same stack again), ns per stack:", warm_ns,
	    "ns", true);
	print_table("Cold, fresh (first walk of the chain in a new process), "
	    "ns per stack:", cold_ns[COLD_FRESH], "ns", true);
	print_table("Minor page faults taken by that walk (medians):",
	    cold_faults[COLD_FRESH], "faults", false);
	print_table("Cold, touched (first walk of the chain in a new process "
	    "that walked the other chain first), ns per stack:",
	    cold_ns[COLD_TOUCHED], "ns", true);
	print_table("Minor page faults taken by that walk (medians):",
	    cold_faults[COLD_TOUCHED], "faults", false);
	if (callgrind) {
		print_table("Warm, instructions per stack (callgrind):",
		    ir_warm, "Ir", true);
		print_table("Cold, instructions per stack (callgrind):",
		    ir_cold, "Ir", true);
		if (keep == NULL) {
			char cmd[PATH_MAX + 16];
			snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
			if (system(cmd) != 0)
				fprintf(stderr, "could not remove %s\n", dir);
		} else {
			printf("\ncallgrind outputs kept in %s\n", dir);
		}
	}
	print_target(callgrind);
	return 0;
}

#endif
