/*
 * conf.c: run-time options.  One static table lists every option with its
 * type, variable, default, range and a line of documentation; that table
 * alone drives the MALLOC_CONF parser, the "opt.*" mallctl read-out
 * (ctl.c) and the option listing of malloc_stats_print (stats.c).  Adding
 * an option means defining its opt_* variable, declaring it in internal.h
 * and adding one row here.
 *
 * Options come from, in order, later sources overriding earlier ones: the
 * application's `malloc_conf` symbol, the target of the MP_CONF_FILE
 * symlink, and the MP_CONF_ENV environment variable.  Parsing runs inside
 * malloc initialisation, so nothing here may allocate: values are parsed
 * in place and messages are formatted into stack buffers.
 */
#include "malloc_prof/internal/internal.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

/* ------------------------------------------------------------- options */

/*
 * An option variable takes a value only if it differs: conf_boot first
 * sets every option to its default, which the variable already holds
 * (they are initialised to them above), and a store of the same bytes
 * would still make the page it lies on private and resident.  Options sit
 * beside the profiler's and the endpoint's tables in .bss: storing every
 * default made 5 pages of them resident in every process.
 */
static void conf_store(void *var, const void *val, size_t size) {
	if (memcmp(var, val, size) != 0)
		memcpy(var, val, size);
}

/* Defaults of the option variables, repeated in the table below (a unit
 * test checks that conf_reset_defaults gives these values). */
bool opt_abort = false;
bool opt_abort_conf = false;
bool opt_confirm_conf = false;
/* arena_boot writes the number in effect. */
MP_DATA unsigned opt_narenas = 0;
unsigned opt_percpu_arena = PERCPU_ARENA_DISABLED;
bool opt_tcache = true;
size_t opt_tcache_max = 65536;
ssize_t opt_dirty_decay_ms = 10000;
ssize_t opt_muzzy_decay_ms = 0;
bool opt_retain = true;
bool opt_zero = false;
unsigned opt_zero_realloc = ZERO_REALLOC_FREE;
bool opt_stats_print = false;
char opt_stats_print_opts[64] = "";
unsigned opt_thp = OS_THP_DEFAULT;
size_t opt_thp_heap_min = 0;
unsigned opt_metadata_thp = METADATA_THP_DISABLED;
size_t opt_oversize_threshold = 0;

/* jemalloc 5.3's remaining options (issue 18).  Those acting elsewhere
 * are declared in alloc.h; the rest only need their opt.* read-out. */
bool opt_xmalloc = false;
ssize_t opt_stats_interval = -1;
char opt_stats_interval_opts[64] = "";
unsigned opt_tcache_nslots_small_min = CACHE_BIN_MIN;
unsigned opt_tcache_nslots_small_max = CACHE_BIN_MAX;
unsigned opt_tcache_nslots_large = TCACHE_LARGE_SLOTS;
ssize_t opt_lg_tcache_nslots_mul = 1;
size_t opt_tcache_gc_incr_bytes = (size_t)256 << 10;
unsigned opt_lg_tcache_flush_small_div = 1;
unsigned opt_lg_tcache_flush_large_div = 1;
bool opt_lg_tcache_flush_large_div_given = false;
size_t opt_tcache_gc_delay_bytes = 0;
bool opt_experimental_infallible_new = false;
static char conf_slab_sizes[256] = "";
static size_t conf_lg_tcache_max = 16;
static bool conf_utrace = false;
/* The profiler options of jemalloc 5.3 that the profiler issue after
 * issue 18 implements: read-outs only until then. */

/* opt.hpa's fixed-point options (jemalloc's fxp_t syntax), kept as text
 * for their opt.* read-outs and applied to hpa.c's variables. */
static char conf_hpa_ratio[24] = "0.95";
static char conf_hpa_dirty_mult[24] = "0.25";

static bool conf_hpa_ratio_check(const char *v, size_t vlen,
    char *why, size_t whysize) {
	uint32_t x;
	if (hpa_fxp_parse(v, vlen, &x) || x > ((uint32_t)1 << 16)) {
		mp_snprintf(why, whysize, "expected a number from 0 to 1");
		return true;
	}
	return false;
}

static void conf_hpa_ratio_apply(void) {
	uint32_t x = 0;
	(void)hpa_fxp_parse(conf_hpa_ratio, strlen(conf_hpa_ratio), &x);
	size_t t = (size_t)(((uint64_t)HUGEPAGE * x) >> 16);
	opt_hpa_hugification_threshold = t < PAGE ? PAGE : t;
}

static bool conf_hpa_dirty_mult_check(const char *v, size_t vlen,
    char *why, size_t whysize) {
	uint32_t x;
	if ((vlen != 2 || strncmp(v, "-1", 2) != 0) &&
	    hpa_fxp_parse(v, vlen, &x)) {
		mp_snprintf(why, whysize, "expected -1 or a number below "
		    "65536");
		return true;
	}
	return false;
}

static void conf_hpa_dirty_mult_apply(void) {
	uint32_t x = HPA_DIRTY_MULT_OFF;
	if (strcmp(conf_hpa_dirty_mult, "-1") != 0)
		(void)hpa_fxp_parse(conf_hpa_dirty_mult,
		    strlen(conf_hpa_dirty_mult), &x);
	opt_hpa_dirty_mult = x;
}

/* lg_tcache_max is tcache_max as a power of two (jemalloc's deprecated
 * spelling): each keeps the other's read-out in step. */
static void conf_lg_tcache_max_apply(void) {
	opt_tcache_max = (size_t)1 << conf_lg_tcache_max;
}

static void conf_tcache_max_apply(void) {
	size_t lg = 0;
	while (lg < 63 && ((size_t)2 << lg) <= opt_tcache_max)
		lg++;
	conf_lg_tcache_max = opt_tcache_max == 0 ? 0 : lg;
}

/* The tcache knobs take jemalloc's values; what the cache can hold caps
 * them (a large class has TCACHE_LARGE_SLOTS slots). */
static void conf_tcache_nslots_large_apply(void) {
	if (opt_tcache_nslots_large > TCACHE_LARGE_SLOTS)
		opt_tcache_nslots_large = TCACHE_LARGE_SLOTS;
}

/* slab_sizes: "lo-hi:pages|..." (jemalloc's syntax), checked here and
 * applied by sz.c (sz_slab_sizes_apply). */
static bool conf_slab_sizes_check(const char *v, size_t vlen, char *why,
    size_t whysize) {
	if (sz_slab_sizes_parse(v, vlen, NULL)) {
		mp_snprintf(why, whysize, "expected lo-hi:pages "
		    "segments separated by '|' (lo <= hi, pages >= 1)");
		return true;
	}
	return false;
}

static void conf_slab_sizes_apply(void) {
	(void)sz_slab_sizes_parse(conf_slab_sizes, strlen(conf_slab_sizes),
	    sz_slab_pages_conf);
}

/* Indexed by os_thp_t.  Only the first three are accepted: "not
 * supported" is what opt.thp reads when the kernel has no THP (set by
 * arena_boot, as jemalloc does). */
static const char *const conf_thp_names[] = {
	"default", "always", "never", "not supported",
};
/* Indexed by metadata_thp_t. */
static const char *const conf_metadata_thp_names[] = {
	"disabled", "auto", "always",
};

/* junk: which of new and freed memory gets junk bytes.  The table stores
 * the name's index in conf_junk; conf_junk_apply derives the rest. */
enum { CONF_JUNK_FALSE, CONF_JUNK_TRUE, CONF_JUNK_ALLOC, CONF_JUNK_FREE };
static const char *const conf_junk_names[] = {
	"false", "true", "alloc", "free",
};
#if MP_CONFIG_DEBUG
#define CONF_JUNK_DEFAULT "true"
static unsigned conf_junk = CONF_JUNK_TRUE;
const char *opt_junk = "true";
bool opt_junk_alloc = true;
bool opt_junk_free = true;
#else
#define CONF_JUNK_DEFAULT "false"
static unsigned conf_junk = CONF_JUNK_FALSE;
const char *opt_junk = "false";
bool opt_junk_alloc = false;
bool opt_junk_free = false;
#endif

static void conf_junk_apply(void) {
	opt_junk = conf_junk_names[conf_junk];
	bool on_alloc = conf_junk == CONF_JUNK_TRUE ||
	    conf_junk == CONF_JUNK_ALLOC;
	bool on_free = conf_junk == CONF_JUNK_TRUE ||
	    conf_junk == CONF_JUNK_FREE;
	conf_store(&opt_junk_alloc, &on_alloc, sizeof(on_alloc));
	conf_store(&opt_junk_free, &on_free, sizeof(on_free));
	realloc_shortcut_update();
}

/* Indexed by zero_realloc_t. */
static const char *const conf_zero_realloc_names[] = {
	"free", "alloc", "abort",
};

/* Indexed by percpu_arena_t. */
static const char *const conf_percpu_arena_names[] = {
	"disabled", "percpu", "phycpu",
};

#define CONF_NELEMS(a) ((unsigned)(sizeof(a) / sizeof((a)[0])))
#define CONF_DECAY_MS_MAX ((intmax_t)INT32_MAX * 1000)

/*
 * The options.  Integer rows give their inclusive range in min/max;
 * `early` rows are also read in a first pass over every source, so that
 * they govern the messages of all sources, not just the later ones.
 */
const conf_opt_t conf_opts[] = {
	{ .name = "abort", .type = CONF_BOOL, .var = &opt_abort,
	  .def = "false",
	  .doc = "abort on internal errors instead of only reporting them" },
	{ .name = "abort_conf", .type = CONF_BOOL, .var = &opt_abort_conf,
	  .def = "false", .early = true,
	  .doc = "abort after parsing if any option was invalid" },
	{ .name = "confirm_conf", .type = CONF_BOOL, .var = &opt_confirm_conf,
	  .def = "false", .early = true,
	  .doc = "print every conf source and every option set" },
	{ .name = "narenas", .type = CONF_UNSIGNED, .var = &opt_narenas,
	  .def = "0", .min = 0, .max = 4095,
	  .doc = "arenas threads are spread over (0: 4 per CPU)" },
	{ .name = "percpu_arena", .type = CONF_ENUM, .var = &opt_percpu_arena,
	  .def = "disabled", .names = conf_percpu_arena_names,
	  .nnames = CONF_NELEMS(conf_percpu_arena_names),
	  .doc = "percpu: one arena per CPU, a thread uses its CPU's; "
	  "phycpu: hyperthread siblings share one (narenas at least that "
	  "many)" },
	{ .name = "tcache", .type = CONF_BOOL, .var = &opt_tcache,
	  .def = "true",
	  .doc = "give each thread a cache of slabs and large blocks" },
	{ .name = "tcache_max", .type = CONF_SIZE_T, .var = &opt_tcache_max,
	  .def = "65536", .min = 0, .max = 8388608,
	  .on_set = conf_tcache_max_apply,
	  .doc = "largest size kept in thread caches (bytes)" },
	{ .name = "dirty_decay_ms", .type = CONF_SSIZE_T,
	  .var = &opt_dirty_decay_ms, .def = "10000", .min = -1,
	  .max = CONF_DECAY_MS_MAX,
	  .doc = "time before dirty pages become muzzy (-1: never)" },
	{ .name = "muzzy_decay_ms", .type = CONF_SSIZE_T,
	  .var = &opt_muzzy_decay_ms, .def = "0", .min = -1,
	  .max = CONF_DECAY_MS_MAX,
	  .doc = "time before muzzy pages are purged (-1: never)" },
	{ .name = "background_thread", .type = CONF_BOOL,
	  .var = &opt_background_thread, .def = "false",
	  .doc = "purge decayed pages from a thread of the allocator's own, "
	  "also while the program sleeps" },
	{ .name = "max_background_threads", .type = CONF_SIZE_T,
	  .var = &opt_max_background_threads, .def = "1", .min = 1,
	  .max = 4096,
	  .doc = "background threads at most (one serves every arena; "
	  "opt.* reads 1)" },
	{ .name = "retain", .type = CONF_BOOL, .var = &opt_retain,
	  .def = "true",
	  .doc = "keep unused virtual memory mapped instead of unmapping" },
	{ .name = "junk", .type = CONF_ENUM, .var = &conf_junk,
	  .def = CONF_JUNK_DEFAULT, .names = conf_junk_names,
	  .nnames = CONF_NELEMS(conf_junk_names),
	  .on_set = conf_junk_apply,
	  .doc = "fill new (alloc) and/or freed (free) memory with junk" },
	{ .name = "zero", .type = CONF_BOOL, .var = &opt_zero,
	  .def = "false",
	  .doc = "zero every allocation" },
	{ .name = "zero_realloc", .type = CONF_ENUM, .var = &opt_zero_realloc,
	  .def = "free", .names = conf_zero_realloc_names,
	  .nnames = CONF_NELEMS(conf_zero_realloc_names),
	  .doc = "what realloc(p, 0) does" },
	{ .name = "stats_print", .type = CONF_BOOL, .var = &opt_stats_print,
	  .def = "false",
	  .doc = "print statistics at exit" },
	{ .name = "stats_print_opts", .type = CONF_STRING,
	  .var = opt_stats_print_opts, .def = "",
	  .bufsize = sizeof(opt_stats_print_opts),
	  .doc = "malloc_stats_print opts for stats_print" },
	{ .name = "thp", .type = CONF_ENUM, .var = &opt_thp,
	  .def = "default", .names = conf_thp_names, .nnames = 3,
	  .doc = "transparent huge pages for user data: always "
	  "(MADV_HUGEPAGE), never (MADV_NOHUGEPAGE) or default (the "
	  "kernel's choice)" },
	{ .name = "thp_heap_min", .type = CONF_SIZE_T,
	  .var = &opt_thp_heap_min, .def = "0", .min = 0,
	  .max = INTMAX_MAX,
	  .doc = "under thp:default with the kernel's THP mode madvise: "
	  "an arena's mappings get MADV_HUGEPAGE once it has had this "
	  "many bytes in use, until it purges repeatedly (0: never)" },
	{ .name = "metadata_thp", .type = CONF_ENUM,
	  .var = &opt_metadata_thp, .def = "disabled",
	  .names = conf_metadata_thp_names,
	  .nnames = CONF_NELEMS(conf_metadata_thp_names),
	  .doc = "transparent huge pages for the allocator's metadata: "
	  "always, auto (once it passes 20 MiB) or disabled" },
	{ .name = "dss", .type = CONF_ENUM, .var = &opt_dss,
	  .def = "disabled", .names = dss_mode_names, .nnames = DSS_NMODES,
	  .doc = "sbrk for arenas' pages: disabled, primary (before mmap) "
	  "or secondary (after mmap); jemalloc's Linux default is "
	  "secondary" },
	{ .name = "oversize_threshold", .type = CONF_SIZE_T,
	  .var = &opt_oversize_threshold, .def = "0", .min = 0,
	  .max = (intmax_t)SC_LARGE_MAXCLASS,
	  .doc = "blocks this large and larger come from a huge arena of "
	  "their own, purged at once (bytes; 0 or below 16 KiB: off)" },
	/* jemalloc 5.3's remaining options (issue 18).  A row with a note
	 * does nothing here, or less than in jemalloc: the note says why, in
	 * one line, when the option is set to anything but its default. */
	{ .name = "xmalloc", .type = CONF_BOOL, .var = &opt_xmalloc,
	  .def = "false",
	  .doc = "abort with a message when memory runs out instead of "
	  "returning NULL (jemalloc: --enable-xmalloc)" },
	{ .name = "stats_interval", .type = CONF_SSIZE_T,
	  .var = &opt_stats_interval, .def = "-1", .min = -1,
	  .max = INT64_MAX,
	  .doc = "print statistics every N bytes allocated, counted at the "
	  "threads' events (-1: never)" },
	{ .name = "stats_interval_opts", .type = CONF_STRING,
	  .var = opt_stats_interval_opts, .def = "",
	  .bufsize = sizeof(opt_stats_interval_opts),
	  .doc = "malloc_stats_print opts for stats_interval" },
	{ .name = "slab_sizes", .type = CONF_STRING, .var = conf_slab_sizes,
	  .def = "", .bufsize = sizeof(conf_slab_sizes),
	  .check = conf_slab_sizes_check, .on_set = conf_slab_sizes_apply,
	  .doc = "pages per slab of the small classes in byte ranges: "
	  "lo-hi:pages|... (clamped to what the class's slab can hold)" },
	{ .name = "trust_madvise", .type = CONF_BOOL,
	  .var = &opt_trust_madvise, .def = "false",
	  .doc = "trust madvise(MADV_DONTNEED) to zero pages without a check "
	  "(false: one page is checked at the first purge)" },
	{ .name = "cache_oblivious", .type = CONF_BOOL,
	  .var = &opt_cache_oblivious, .def = "false",
	  .doc = "start each large block under 4 MiB aligned below a page a "
	  "random number of cache lines into an extent one page longer" },
	{ .name = "lg_extent_max_active_fit", .type = CONF_SIZE_T,
	  .var = &opt_lg_extent_max_active_fit, .def = "6", .min = 0,
	  .max = 63,
	  .doc = "largest ratio (log2) of a reused extent to the request" },
	{ .name = "tcache_nslots_small_min", .type = CONF_UNSIGNED,
	  .var = &opt_tcache_nslots_small_min, .def = "8", .min = 1,
	  .max = 65535,
	  .doc = "fewest slots of a small class's cache bin" },
	{ .name = "tcache_nslots_small_max", .type = CONF_UNSIGNED,
	  .var = &opt_tcache_nslots_small_max, .def = "128", .min = 1,
	  .max = 65535,
	  .doc = "most slots of a small class's cache bin" },
	{ .name = "tcache_nslots_large", .type = CONF_UNSIGNED,
	  .var = &opt_tcache_nslots_large, .def = "8", .min = 1,
	  .max = 65535, .on_set = conf_tcache_nslots_large_apply,
	  .doc = "blocks cached per large class (at most 8 here)" },
	{ .name = "lg_tcache_nslots_mul", .type = CONF_SSIZE_T,
	  .var = &opt_lg_tcache_nslots_mul, .def = "1", .min = -16, .max = 16,
	  .doc = "a small cache bin holds 16 KiB << N of regions, within "
	  "tcache_nslots_small_min/max" },
	{ .name = "tcache_gc_incr_bytes", .type = CONF_SIZE_T,
	  .var = &opt_tcache_gc_incr_bytes, .def = "262144", .min = 1,
	  .max = (intmax_t)1 << 40,
	  .doc = "bytes a thread allocates between events (a cache GC step, "
	  "a decay tick)" },
	{ .name = "tcache_gc_delay_bytes", .type = CONF_SIZE_T,
	  .var = &opt_tcache_gc_delay_bytes, .def = "0", .min = 0,
	  .max = INTMAX_MAX,
	  .doc = "bytes of a small class the GC skips flushing before it "
	  "flushes (at most 255 regions)" },
	{ .name = "lg_tcache_flush_small_div", .type = CONF_UNSIGNED,
	  .var = &opt_lg_tcache_flush_small_div, .def = "1", .min = 1,
	  .max = 16,
	  .doc = "a full small cache bin keeps 1/2^N of its slots" },
	{ .name = "lg_tcache_flush_large_div", .type = CONF_UNSIGNED,
	  .var = &opt_lg_tcache_flush_large_div, .def = "1", .min = 1,
	  .max = 16, .given = &opt_lg_tcache_flush_large_div_given,
	  .doc = "a full large cache class keeps 1/2^N of its blocks (not "
	  "set: all of them, the freed block goes to the arena)" },
	{ .name = "lg_tcache_max", .type = CONF_SIZE_T,
	  .var = &conf_lg_tcache_max, .def = "16", .min = 0, .max = 23,
	  .on_set = conf_lg_tcache_max_apply,
	  .doc = "deprecated: tcache_max as log2" },
	/* opt.hpa and its knobs (hpa.c), jemalloc 5.3's defaults and
	 * bounds.  The ratio row comes before the threshold it sets, so that
	 * the defaults end on jemalloc's threshold in bytes. */
	{ .name = "hpa", .type = CONF_BOOL, .var = &opt_hpa, .def = "false",
	  .doc = "page runs up to hpa_slab_max_alloc of the automatic arenas "
	  "from 2 MiB pageslabs, hugified when dense" },
	{ .name = "hpa_slab_max_alloc", .type = CONF_SIZE_T,
	  .var = &opt_hpa_slab_max_alloc, .def = "65536",
	  .min = (intmax_t)PAGE, .max = (intmax_t)HUGEPAGE,
	  .doc = "largest page run taken from pageslabs (bytes)" },
	{ .name = "hpa_hugification_threshold_ratio", .type = CONF_STRING,
	  .var = conf_hpa_ratio, .def = "0.95",
	  .bufsize = sizeof(conf_hpa_ratio),
	  .check = conf_hpa_ratio_check, .on_set = conf_hpa_ratio_apply,
	  .doc = "hpa_hugification_threshold as a fraction of the pageslab "
	  "(0 to 1)" },
	{ .name = "hpa_hugification_threshold", .type = CONF_SIZE_T,
	  .var = &opt_hpa_hugification_threshold, .def = "1992294",
	  .min = (intmax_t)PAGE, .max = (intmax_t)HUGEPAGE,
	  .doc = "active bytes at which a pageslab is hugified" },
	{ .name = "hpa_hugify_delay_ms", .type = CONF_SIZE_T,
	  .var = &opt_hpa_hugify_delay_ms, .def = "10000", .min = 0,
	  .max = INTMAX_MAX,
	  .doc = "how long a pageslab stays dense before it is hugified" },
	{ .name = "hpa_min_purge_interval_ms", .type = CONF_SIZE_T,
	  .var = &opt_hpa_min_purge_interval_ms, .def = "5000", .min = 0,
	  .max = INTMAX_MAX,
	  .doc = "least time between two purges by hpa_dirty_mult" },
	{ .name = "hpa_dirty_mult", .type = CONF_STRING,
	  .var = conf_hpa_dirty_mult, .def = "0.25",
	  .bufsize = sizeof(conf_hpa_dirty_mult),
	  .check = conf_hpa_dirty_mult_check,
	  .on_set = conf_hpa_dirty_mult_apply,
	  .readout = &opt_hpa_dirty_mult,
	  .readout_size = sizeof(opt_hpa_dirty_mult),
	  .doc = "pageslabs are purged while their dirty pages exceed this "
	  "times their active ones (-1: never)" },
	{ .name = "hpa_sec_nshards", .type = CONF_SIZE_T,
	  .var = &opt_hpa_sec_nshards, .def = "4", .min = 0,
	  .max = INTMAX_MAX, .doc = "small extent cache: shards (0: none)" },
	{ .name = "hpa_sec_max_alloc", .type = CONF_SIZE_T,
	  .var = &opt_hpa_sec_max_alloc, .def = "32768",
	  .min = (intmax_t)PAGE, .max = INTMAX_MAX,
	  .doc = "small extent cache: largest extent cached" },
	{ .name = "hpa_sec_max_bytes", .type = CONF_SIZE_T,
	  .var = &opt_hpa_sec_max_bytes, .def = "262144",
	  .min = (intmax_t)PAGE, .max = INTMAX_MAX,
	  .doc = "small extent cache: bytes per shard" },
	{ .name = "hpa_sec_bytes_after_flush", .type = CONF_SIZE_T,
	  .var = &opt_hpa_sec_bytes_after_flush, .def = "131072",
	  .min = (intmax_t)PAGE, .max = INTMAX_MAX,
	  .doc = "small extent cache: bytes kept by a flush" },
	{ .name = "hpa_sec_batch_fill_extra", .type = CONF_SIZE_T,
	  .var = &opt_hpa_sec_batch_fill_extra, .def = "0", .min = 0,
	  .max = (intmax_t)HPA_NPAGES,
	  .doc = "small extent cache: extra extents per fill" },
	{ .name = "san_guard_small", .type = CONF_SIZE_T,
	  .var = &opt_san_guard_small, .def = "0", .min = 0,
	  .max = INTMAX_MAX,
	  .doc = "guard pages around every Nth slab of small regions "
	  "(0: none)" },
	{ .name = "san_guard_large", .type = CONF_SIZE_T,
	  .var = &opt_san_guard_large, .def = "0", .min = 0,
	  .max = INTMAX_MAX,
	  .doc = "guard pages around every Nth large allocation (0: none)" },
	{ .name = "experimental_infallible_new", .type = CONF_BOOL,
	  .var = &opt_experimental_infallible_new, .def = "false",
	  .doc = "a failed C++ operator new aborts (through "
	  "experimental.hooks.safety_check_abort) instead of throwing" },
	{ .name = "utrace", .type = CONF_BOOL, .var = &conf_utrace,
	  .def = "false",
	  .note = "no effect: Linux has no utrace(2)",
	  .doc = "trace allocations with utrace(2) (BSD)" },
	{ .name = "prof_stats", .type = CONF_BOOL, .var = &opt_prof_stats,
	  .def = "false", .prof = true,
	  .doc = "count sampled objects and bytes per size class "
	  "(prof.stats.bins.<i>.*, prof.stats.lextents.<i>.*)" },
	{ .name = "prof_sys_thread_name", .type = CONF_BOOL,
	  .var = &opt_prof_sys_thread_name, .def = "false", .prof = true,
	  .doc = "name profiled threads after their system names "
	  "(pthread_setname_np), read at each sample" },
	{ .name = "prof_time_resolution", .type = CONF_ENUM,
	  .var = &opt_prof_time_resolution, .def = "default",
	  .names = prof_time_resolution_names,
	  .nnames = PROF_TIME_RES_COUNT, .prof = true,
	  .doc = "clock of sample times: default (CLOCK_MONOTONIC_COARSE, "
	  "a few ms) or high (CLOCK_MONOTONIC, ns)" },
	{ .name = "prof_unbias", .type = CONF_BOOL, .var = &opt_prof_unbias,
	  .def = "true", .prof = true,
	  .doc = "dumps estimate each stack's objects and bytes from its "
	  "samples without bias (false: the sampled counts, which jeprof "
	  "scales by the stack's average size, as before jemalloc 5.3)" },
	/* The heap profiler (prof.c); without it these rows stay, so that
	 * setting one says why it cannot work. */
	{ .name = "prof", .type = CONF_BOOL, .var = &opt_prof,
	  .def = "false", .prof = true,
	  .doc = "heap profiling: sample allocations (needed by every "
	  "prof.* control; only at start-up)" },
	{ .name = "prof_prefix", .type = CONF_STRING,
	  .var = opt_prof_prefix, .def = "jeprof",
	  .bufsize = sizeof(opt_prof_prefix), .prof = true,
	  .doc = "start of automatic dump names "
	  "<prefix>.<pid>.<seq>.<kind>.heap (\"\": no automatic dumps)" },
	{ .name = "prof_dump_follow_symlinks", .type = CONF_BOOL,
	  .var = &opt_prof_dump_follow_symlinks, .def = "false", .prof = true,
	  .doc = "prof.dump with a file name writes through a symbolic link "
	  "(false: refused, as a link may point at a file to overwrite)" },
	{ .name = "prof_active", .type = CONF_BOOL, .var = &opt_prof_active,
	  .def = "true", .prof = true,
	  .doc = "initial prof.active: whether sampling runs" },
	{ .name = "prof_thread_active_init", .type = CONF_BOOL,
	  .var = &opt_prof_thread_active_init, .def = "true", .prof = true,
	  .doc = "initial thread.prof.active of new threads" },
	{ .name = "lg_prof_sample", .type = CONF_SIZE_T,
	  .var = &opt_lg_prof_sample, .def = "19", .min = 0, .max = 63,
	  .prof = true,
	  .doc = "mean bytes between samples, log2 (0: sample everything)" },
	{ .name = "prof_format", .type = CONF_ENUM, .var = &opt_prof_format,
	  .def = "heap_v2", .names = prof_format_names,
	  .nnames = PROF_FORMAT_COUNT, .prof = true,
	  .doc = "format of every dump: heap_v2 (jeprof) or pprof "
	  "(gzipped profile.proto, for go tool pprof)" },
	{ .name = "prof_symbolize", .type = CONF_BOOL,
	  .var = &opt_prof_symbolize, .def = "false", .prof = true,
	  .doc = "name the functions of pprof profiles from the symbol "
	  "tables of the mapped files" },
	{ .name = "prof_accum", .type = CONF_BOOL, .var = &opt_prof_accum,
	  .def = "false", .prof = true,
	  .doc = "also count freed samples (the [accum] column of dumps)" },
	{ .name = "lg_prof_interval", .type = CONF_SSIZE_T,
	  .var = &opt_lg_prof_interval, .def = "-1", .min = -1, .max = 63,
	  .prof = true,
	  .doc = "dump every 2^N bytes allocated, .i<n>.heap (-1: never)" },
	{ .name = "prof_gdump", .type = CONF_BOOL, .var = &opt_prof_gdump,
	  .def = "false", .prof = true,
	  .doc = "dump at each new high of active memory, .u<n>.heap" },
	{ .name = "prof_final", .type = CONF_BOOL, .var = &opt_prof_final,
	  .def = "false", .prof = true,
	  .doc = "dump at exit, <prefix>.<pid>.<seq>.f.heap" },
	{ .name = "prof_recent_alloc_max", .type = CONF_SSIZE_T,
	  .var = &opt_prof_recent_alloc_max, .def = "0", .min = -1,
	  .max = INTMAX_MAX, .prof = true,
	  .doc = "sampled allocations whose record is kept for "
	  "experimental.prof_recent.alloc_dump (-1: all; 0: none)" },
	{ .name = "prof_peak", .type = CONF_BOOL, .var = &opt_prof_peak,
	  .def = "true", .prof = true,
	  .doc = "keep the profile of the highest live heap: prof.peak.dump, "
	  "/debug/pprof/peak, .p<n>.heap at exit with prof_final" },
	{ .name = "prof_peak_growth", .type = CONF_STRING,
	  .var = opt_prof_peak_growth, .def = "1.1",
	  .bufsize = sizeof(opt_prof_peak_growth), .prof = true,
	  .check = prof_peak_growth_conf_check,
	  .doc = "a new peak profile when the live heap passes the last peak "
	  "by this factor" },
	{ .name = "prof_oom_dump", .type = CONF_BOOL,
	  .var = &opt_prof_oom_dump, .def = "false", .prof = true,
	  .doc = "when the OS refuses memory, dump the current and the peak "
	  "profile once: .o<n>.heap, .p<n>.heap" },
	{ .name = "prof_leak", .type = CONF_BOOL, .var = &opt_prof_leak,
	  .def = "false", .prof = true,
	  .doc = "at exit, summarise objects never freed (implies prof and "
	  "prof_final)" },
	{ .name = "prof_leak_error", .type = CONF_BOOL,
	  .var = &opt_prof_leak_error, .def = "false", .prof = true,
	  .doc = "prof_leak, and exit with status 1 if anything leaked" },
	{ .name = "prof_unwind", .type = CONF_ENUM, .var = &opt_prof_unwind,
	  .def = "auto", .names = prof_unwind_names,
	  .nnames = PROF_UNWIND_COUNT, .prof = true,
	  .doc = "how stacks are walked: fp (frame pointers), cfi "
	  "(.eh_frame) or auto (frame pointers, .eh_frame where they stop)" },
	{ .name = "prof_bt_max", .type = CONF_UNSIGNED,
	  .var = &opt_prof_bt_max, .def = "128", .min = 1,
	  .max = PROF_BT_MAX_LIMIT, .prof = true,
	  .doc = "frames kept per backtrace" },
	{ .name = "prof_http", .type = CONF_STRING, .var = opt_prof_http,
	  .def = "", .bufsize = sizeof(opt_prof_http), .prof = true,
	  .check = prof_http_conf_check,
	  .doc = "serve profiles over HTTP on HOST:PORT (numeric; empty "
	  "HOST: 127.0.0.1; port 0: any free one; \"\": off)" },
	{ .name = "prof_http_timeout_ms", .type = CONF_UNSIGNED,
	  .var = &opt_prof_http_timeout_ms, .def = "2000", .min = 100,
	  .max = PROF_HTTP_TIMEOUT_MS_MAX, .prof = true,
	  .doc = "ms a prof_http client has from connecting to send its "
	  "whole request (then 408)" },
#if MP_CONFIG_DEBUG
	/* Fault injection, debug builds only (doc/reliability.md). */
	{ .name = "debug_mmap_fail", .type = CONF_SIZE_T,
	  .var = &opt_debug_mmap_fail, .def = "0", .min = 0,
	  .max = INTMAX_MAX, .on_set = os_mmap_fail_conf_apply,
	  .doc = "the nth OS mapping from start-up and all later ones fail "
	  "(0: off; debug builds)" },
#endif
};
const unsigned conf_nopts = CONF_NELEMS(conf_opts);

/* The symlink read for options; tests point it at a link of their own. */
const char *conf_file_path = MP_CONF_FILE;

/* --------------------------------------------------------------- lookup */

const conf_opt_t *conf_opt_lookup(const char *name, size_t len) {
	for (unsigned i = 0; i < conf_nopts; i++) {
		if (strncmp(conf_opts[i].name, name, len) == 0 &&
		    conf_opts[i].name[len] == '\0')
			return &conf_opts[i];
	}
	return NULL;
}

const char *conf_opt_str(const conf_opt_t *opt) {
	if (opt->type == CONF_STRING)
		return (const char *)opt->var;
	mp_assert(opt->type == CONF_ENUM);
	return opt->names[*(const unsigned *)opt->var];
}

int conf_opt_format(const conf_opt_t *opt, char *buf, size_t size) {
	switch (opt->type) {
	case CONF_BOOL:
		return mp_snprintf(buf, size, "%s",
		    *(const bool *)opt->var ? "true" : "false");
	case CONF_UNSIGNED:
		return mp_snprintf(buf, size, "%u",
		    *(const unsigned *)opt->var);
	case CONF_SIZE_T:
		return mp_snprintf(buf, size, "%zu",
		    *(const size_t *)opt->var);
	case CONF_SSIZE_T:
		return mp_snprintf(buf, size, "%zd",
		    *(const ssize_t *)opt->var);
	case CONF_STRING:
	case CONF_ENUM:
		return mp_snprintf(buf, size, "%s", conf_opt_str(opt));
	}
	mp_not_reached();
}

/* ------------------------------------------------------- value parsing */

typedef enum {
	CONF_SET_OK,
	CONF_SET_INVALID,       /* not a value of the option's type */
	CONF_SET_RANGE,         /* a number outside [min, max] */
} conf_set_result_t;

/* Integers are copied here for strto*max, which want a terminated string;
 * anything longer is not a sensible number. */
#define CONF_NUM_MAX 80

static bool conf_is_digit(char c) {
	return c >= '0' && c <= '9';
}

/*
 * Parse v[0..vlen) as opt's type and store it.  On failure the variable
 * keeps its previous value.  Leading signs and spaces that strto*max
 * would accept are rejected first: "-1" is not an unsigned integer.
 */
static conf_set_result_t conf_set_value(const conf_opt_t *opt,
    const char *v, size_t vlen) {
	char num[CONF_NUM_MAX];
	char *end;
	switch (opt->type) {
	case CONF_BOOL:
	{
		bool b;
		if (vlen == 4 && strncmp(v, "true", 4) == 0)
			b = true;
		else if (vlen == 5 && strncmp(v, "false", 5) == 0)
			b = false;
		else
			return CONF_SET_INVALID;
		conf_store(opt->var, &b, sizeof(b));
		break;
	}
	case CONF_UNSIGNED:
	case CONF_SIZE_T: {
		if (vlen == 0 || vlen >= sizeof(num) || !conf_is_digit(v[0]))
			return CONF_SET_INVALID;
		memcpy(num, v, vlen);
		num[vlen] = '\0';
		errno = 0;
		uintmax_t u = strtoumax(num, &end, 0);
		if (*end != '\0')
			return CONF_SET_INVALID;
		if (errno == ERANGE || u < (uintmax_t)opt->min ||
		    u > (uintmax_t)opt->max)
			return CONF_SET_RANGE;
		if (opt->type == CONF_UNSIGNED) {
			unsigned x = (unsigned)u;
			conf_store(opt->var, &x, sizeof(x));
		} else {
			size_t x = (size_t)u;
			conf_store(opt->var, &x, sizeof(x));
		}
		break;
	}
	case CONF_SSIZE_T: {
		size_t sign = (vlen > 0 && (v[0] == '-' || v[0] == '+'));
		if (vlen <= sign || vlen >= sizeof(num) ||
		    !conf_is_digit(v[sign]))
			return CONF_SET_INVALID;
		memcpy(num, v, vlen);
		num[vlen] = '\0';
		errno = 0;
		intmax_t s = strtoimax(num, &end, 0);
		if (*end != '\0')
			return CONF_SET_INVALID;
		if (errno == ERANGE || s < opt->min || s > opt->max)
			return CONF_SET_RANGE;
		ssize_t x = (ssize_t)s;
		conf_store(opt->var, &x, sizeof(x));
		break;
	}
	case CONF_STRING:
		if (vlen >= opt->bufsize)
			return CONF_SET_INVALID;
		if (strncmp(opt->var, v, vlen) != 0 ||
		    ((char *)opt->var)[vlen] != '\0') {
			memcpy(opt->var, v, vlen);
			((char *)opt->var)[vlen] = '\0';
		}
		break;
	case CONF_ENUM: {
		unsigned i;
		for (i = 0; i < opt->nnames; i++) {
			if (strncmp(opt->names[i], v, vlen) == 0 &&
			    opt->names[i][vlen] == '\0')
				break;
		}
		if (i == opt->nnames)
			return CONF_SET_INVALID;
		conf_store(opt->var, &i, sizeof(i));
		break;
	}
	}
	if (opt->on_set != NULL)
		opt->on_set();
	return CONF_SET_OK;
}

void conf_reset_defaults(void) {
	for (unsigned i = 0; i < conf_nopts; i++) {
		const conf_opt_t *opt = &conf_opts[i];
		conf_set_result_t r = conf_set_value(opt, opt->def,
		    strlen(opt->def));
		/* A default the parser rejects is a bug in the table. */
		mp_assert(r == CONF_SET_OK);
		(void)r;
		if (opt->given != NULL && *opt->given)
			*opt->given = false;
	}
}

/* ------------------------------------------------------------ messages */

/* Longest piece of input quoted in a message (the line must fit in
 * mp_error's 1 KiB). */
#define CONF_QUOTE_MAX 200

/*
 * Copy s[0..len) into buf for quoting: '"', '\\' and control bytes are
 * escaped so a message stays one line, and long text is cut with "...".
 */
static const char *conf_quote(char *buf, size_t size, const char *s,
    size_t len, size_t max) {
	size_t o = 0;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];
		char esc[5];
		size_t n;
		if (c == '"' || c == '\\') {
			esc[0] = '\\';
			esc[1] = (char)c;
			n = 2;
		} else if (c < 0x20 || c == 0x7f) {
			n = (size_t)mp_snprintf(esc, sizeof(esc), "\\x%02x",
			    c);
		} else {
			esc[0] = (char)c;
			n = 1;
		}
		if (i >= max || o + n + 4 > size) {
			memcpy(buf + o, "...", 3);
			o += 3;
			break;
		}
		memcpy(buf + o, esc, n);
		o += n;
	}
	buf[o] = '\0';
	return buf;
}

/* Case-insensitive edit distance, for "did you mean" (keys are short;
 * longer ones get no suggestion). */
#define CONF_KEY_MAX 64

static char conf_lower(char c) {
	return (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c;
}

static unsigned conf_distance(const char *a, size_t alen, const char *b) {
	size_t blen = strlen(b);
	unsigned row[CONF_KEY_MAX + 1];
	if (alen > CONF_KEY_MAX || blen > CONF_KEY_MAX)
		return UINT_MAX;
	for (size_t j = 0; j <= blen; j++)
		row[j] = (unsigned)j;
	for (size_t i = 1; i <= alen; i++) {
		unsigned diag = row[0];
		row[0] = (unsigned)i;
		for (size_t j = 1; j <= blen; j++) {
			unsigned up = row[j];
			unsigned best = diag +
			    (conf_lower(a[i - 1]) != conf_lower(b[j - 1]));
			if (up + 1 < best)
				best = up + 1;
			if (row[j - 1] + 1 < best)
				best = row[j - 1] + 1;
			row[j] = best;
			diag = up;
		}
	}
	return row[blen];
}

static bool conf_is_prefix(const char *key, size_t klen, const char *name) {
	for (size_t i = 0; i < klen; i++) {
		if (name[i] == '\0' || conf_lower(key[i]) != name[i])
			return false;
	}
	return true;
}

/*
 * The option an unknown key was most likely meant to be, or NULL.  Only
 * close matches count: a few edits (fewer for short keys, where a few
 * edits reach anything) or a key that starts an option's name.
 */
static const conf_opt_t *conf_suggest(const char *key, size_t klen) {
	unsigned limit = (unsigned)(klen / 2);
	if (limit < 1)
		limit = 1;
	if (limit > 3)
		limit = 3;
	const conf_opt_t *best = NULL;
	unsigned best_d = UINT_MAX;
	for (unsigned i = 0; i < conf_nopts; i++) {
		const char *name = conf_opts[i].name;
		unsigned d = conf_distance(key, klen, name);
		bool close = d <= limit ||
		    (klen >= 3 && conf_is_prefix(key, klen, name));
		if (close && d < best_d) {
			best = &conf_opts[i];
			best_d = d;
		}
	}
	return best;
}

/* What a value of opt's type looks like, for "expected ..." */
static const char *conf_expected(const conf_opt_t *opt, char *buf,
    size_t size) {
	switch (opt->type) {
	case CONF_BOOL:
		return "true or false";
	case CONF_UNSIGNED:
	case CONF_SIZE_T:
		return "an unsigned integer";
	case CONF_SSIZE_T:
		return "an integer";
	case CONF_STRING:
		mp_snprintf(buf, size, "at most %zu characters",
		    opt->bufsize - 1);
		return buf;
	case CONF_ENUM: {
		size_t o = (size_t)mp_snprintf(buf, size, "one of ");
		for (unsigned i = 0; i < opt->nnames && o < size; i++) {
			o += (size_t)mp_snprintf(buf + o, size - o,
			    "%s\"%s\"", i == 0 ? "" : ", ", opt->names[i]);
		}
		return buf;
	}
	}
	mp_not_reached();
}

static void conf_report_malformed(const char *source, const char *at) {
	char q[CONF_QUOTE_MAX + 16];
	mp_error("%s: malformed conf string at \"%s\": expected key:value "
	    "pairs separated by commas", source,
	    conf_quote(q, sizeof(q), at, strlen(at), CONF_QUOTE_MAX / 2));
}

static void conf_report_unknown(const char *source, const char *key,
    size_t klen) {
	char q[CONF_QUOTE_MAX + 16];
	const conf_opt_t *hint = conf_suggest(key, klen);
	conf_quote(q, sizeof(q), key, klen, CONF_QUOTE_MAX / 2);
	if (hint != NULL) {
		mp_error("%s: unknown option \"%s\" (did you mean \"%s\"?)",
		    source, q, hint->name);
	} else {
		mp_error("%s: unknown option \"%s\"", source, q);
	}
}

/* An option that does nothing here, set to something but its default:
 * say so once per setting. */
static void conf_note(const char *source, const conf_opt_t *opt) {
	char v[128];
	conf_opt_format(opt, v, sizeof(v));
	if (strcmp(v, opt->def) != 0)
		mp_error("%s: option \"%s\": %s", source, opt->name, opt->note);
}

/* ------------------------------------------------------------- parsing */

static bool conf_is_key_char(char c) {
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	    conf_is_digit(c) || c == '_';
}

/*
 * Handle one key:value pair.  Returns true if it was in error.  In the
 * early pass only `early` rows are set, and nothing is reported: the
 * main pass reports every error once.
 */
static bool conf_pair(const char *source, const char *key, size_t klen,
    const char *val, size_t vlen, bool early_pass) {
	const conf_opt_t *opt = conf_opt_lookup(key, klen);
	if (early_pass) {
		if (opt != NULL && opt->early)
			(void)conf_set_value(opt, val, vlen);
		return false;
	}
	if (opt == NULL) {
		conf_report_unknown(source, key, klen);
		return true;
	}
	if (!conf_opt_available(opt)) {
		mp_error("%s: option \"%s\" is not available: this build has "
		    "no profiler (configured with --disable-prof; config.prof "
		    "is false)", source, opt->name);
		return true;
	}
	char q[CONF_QUOTE_MAX + 16];
	char what[256];
	if (opt->check != NULL && opt->check(val, vlen, what, sizeof(what))) {
		mp_error("%s: invalid value \"%s\" for option \"%s\": %s",
		    source, conf_quote(q, sizeof(q), val, vlen,
		    CONF_QUOTE_MAX / 2), opt->name, what);
		(void)conf_set_value(opt, opt->def, strlen(opt->def));
		return true;
	}
	switch (conf_set_value(opt, val, vlen)) {
	case CONF_SET_OK:
		if (opt->given != NULL)
			*opt->given = true;
		if (opt->note != NULL)
			conf_note(source, opt);
		if (opt_confirm_conf) {
			char v[128];
			conf_opt_format(opt, v, sizeof(v));
			mp_error("set option %s:%s", opt->name,
			    conf_quote(q, sizeof(q), v, strlen(v),
			    CONF_QUOTE_MAX));
		}
		return false;
	case CONF_SET_INVALID:
		mp_error("%s: invalid value \"%s\" for option \"%s\": "
		    "expected %s", source,
		    conf_quote(q, sizeof(q), val, vlen, CONF_QUOTE_MAX / 2),
		    opt->name, conf_expected(opt, what, sizeof(what)));
		return true;
	case CONF_SET_RANGE:
		mp_error("%s: value \"%s\" for option \"%s\" is out of range "
		    "[%jd, %jd]", source,
		    conf_quote(q, sizeof(q), val, vlen, CONF_QUOTE_MAX / 2),
		    opt->name, opt->min, opt->max);
		return true;
	}
	mp_not_reached();
}

/*
 * Parse `key:value[,key:value]*`.  Keys are [A-Za-z0-9_]+ and a value runs
 * to the next comma.  A malformed piece is reported and skipped up to the
 * next comma, so one typo costs one pair, not the rest of the string.
 * Returns true if anything was in error.
 */
static bool conf_parse_pass(const char *source, const char *s,
    bool early_pass) {
	bool err = false;
	const char *p = s;
	while (*p != '\0') {
		const char *key = p;
		while (conf_is_key_char(*p))
			p++;
		size_t klen = (size_t)(p - key);
		if (klen == 0 || *p != ':') {
			/* Empty key, bad key character, missing colon, or
			 * the string ends with a key. */
			if (!early_pass)
				conf_report_malformed(source, key);
			err = true;
			const char *comma = strchr(p, ',');
			if (comma == NULL)
				break;
			p = comma + 1;
			continue;
		}
		const char *val = ++p;
		while (*p != '\0' && *p != ',')
			p++;
		if (conf_pair(source, key, klen, val, (size_t)(p - val),
		    early_pass))
			err = true;
		if (*p == ',' && *++p == '\0') {
			if (!early_pass)
				conf_report_malformed(source, p - 1);
			err = true;
		}
	}
	return err;
}

static void conf_confirm_source(const char *source, const char *conf) {
	char q[768];
	mp_error("conf from %s: \"%s\"", source,
	    conf_quote(q, sizeof(q), conf, strlen(conf), sizeof(q) / 2));
}

bool conf_parse(const char *source, const char *conf) {
	if (opt_confirm_conf)
		conf_confirm_source(source, conf);
	return conf_parse_pass(source, conf, false);
}

/* ---------------------------------------------------------------- boot */

/*
 * Options compiled into the application: it may define its own
 * `const char *malloc_conf = "..."`, which wins at link time over this
 * weak definition.
 */
MP_EXPORT const char *MP_PUBLIC(malloc_conf) __attribute__((weak)) = NULL;

#define CONF_NSOURCES 3
#ifndef PATH_MAX
#define PATH_MAX 4096
#endif

/* The symlink's target.  conf_boot runs once, under the init lock (and
 * again only from single-threaded tests), so static storage is safe and
 * spares the stack of whatever call first initialised the allocator. */
static char conf_link_buf[PATH_MAX + 1];
static bool conf_prefix_warned;

void conf_boot(void) {
	const char *names[CONF_NSOURCES];
	const char *strs[CONF_NSOURCES];
	unsigned n = 0;

	conf_reset_defaults();
	const char *app = MP_PUBLIC(malloc_conf);
	if (app != NULL) {
		names[n] = MP_PREFIX_STR "malloc_conf";
		strs[n++] = app;
	}
	ssize_t len = readlink(conf_file_path, conf_link_buf,
	    sizeof(conf_link_buf) - 1);
	if (len >= 0) {
		conf_link_buf[len] = '\0';
		names[n] = conf_file_path;
		strs[n++] = conf_link_buf;
	}
	/* secure_getenv: a setuid program must not take options from
	 * whoever runs it. */
	const char *env = secure_getenv(MP_CONF_ENV);
	if (env != NULL) {
		names[n] = MP_CONF_ENV;
		strs[n++] = env;
	}
	/* A prefixed build reads a different variable; say so when the
	 * user evidently expected the plain one to work. */
	if (MP_PREFIX_STR[0] != '\0' && strcmp(MP_CONF_ENV, "MALLOC_CONF") &&
	    env == NULL && secure_getenv("MALLOC_CONF") != NULL &&
	    !conf_prefix_warned) {
		conf_prefix_warned = true;
		mp_error("MALLOC_CONF is set but this build (prefix \"%s\") "
		    "reads %s; MALLOC_CONF is ignored", MP_PREFIX_STR,
		    MP_CONF_ENV);
	}

	for (unsigned i = 0; i < n; i++)
		(void)conf_parse_pass(names[i], strs[i], true);
	bool err = false;
	for (unsigned i = 0; i < n; i++) {
		if (conf_parse(names[i], strs[i]))
			err = true;
	}
	if (err && opt_abort_conf)
		mp_abort("abort_conf:true: aborting on invalid conf "
		    "(see above)");
}
