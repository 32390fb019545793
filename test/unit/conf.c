/*
 * test/unit/conf.c - the MALLOC_CONF parser and the options table
 * (src/ctl/conf.c).
 *
 * Every kind of bad input must produce exactly one line through the
 * malloc_message hook, starting with "<malloc_prof>: <source>: " and
 * quoting the offending text, and parsing must go on with the next pair.
 * Sources are applied in order (malloc_conf, the conf symlink, the
 * environment), later ones winning; abort_conf and confirm_conf behave as
 * documented; the defaults are the documented ones.
 *
 * This program defines its own malloc_conf, which must win over the
 * library's weak definition.
 */
#include "../test_util.h"

#include <sys/resource.h>
#include <sys/wait.h>

#include "malloc_prof/internal/internal.h"

const char *malloc_conf = "narenas:5,dirty_decay_ms:1234";

/* Messages are captured with test_util.h's mp_msgs_*. */

/* Every test starts from the defaults and leaves them behind. */
static int reset(void **state) {
	(void)state;
	mp_msgs_stop();
	conf_reset_defaults();
	return 0;
}

/*
 * Parse `conf` as MALLOC_CONF; it must fail, print exactly one line made
 * of one hook call, starting with the prefix and source, containing every
 * `want` piece (NULL-terminated list).
 */
static void expect_one_error(const char *conf, const char *const *want) {
	mp_msgs_start();
	bool err = conf_parse("MALLOC_CONF", conf);
	mp_msgs_stop();
	MP_ASSERT(err, "conf \"%s\" was accepted", conf);
	MP_ASSERT(mp_msgs_calls == 1 && mp_msgs_lines == 1,
	    "conf \"%s\": %u calls, output \"%s\"", conf, mp_msgs_calls, mp_msgs);
	MP_ASSERT(strncmp(mp_msgs, "<malloc_prof>: MALLOC_CONF: ", 28) == 0,
	    "conf \"%s\": bad prefix: \"%s\"", conf, mp_msgs);
	for (; *want != NULL; want++) {
		MP_ASSERT(strstr(mp_msgs, *want) != NULL,
		    "conf \"%s\": \"%s\" not in \"%s\"", conf, *want, mp_msgs);
	}
}

#define EXPECT_ERROR(conf, ...) do {					\
	const char *const want_[] = {__VA_ARGS__, NULL};		\
	expect_one_error((conf), want_);				\
} while (0)

/* ------------------------------------------------------------ defaults */

static void test_defaults(void **state) {
	(void)state;
	conf_reset_defaults();
	assert_false(opt_abort);
	assert_false(opt_abort_conf);
	assert_false(opt_confirm_conf);
	assert_int_equal(opt_narenas, 0);
	assert_true(opt_tcache);
	assert_int_equal(opt_tcache_max, 65536);
	assert_int_equal(opt_dirty_decay_ms, 10000);
	assert_int_equal(opt_muzzy_decay_ms, 0);
	assert_true(opt_retain);
	assert_string_equal(opt_junk, config_debug ? "true" : "false");
	assert_int_equal(opt_junk_alloc, config_debug);
	assert_int_equal(opt_junk_free, config_debug);
	assert_false(opt_zero);
	assert_int_equal(opt_zero_realloc, ZERO_REALLOC_FREE);
	assert_false(opt_stats_print);
	assert_string_equal(opt_stats_print_opts, "");

	/* Each row's default, printed back, is its `def` text. */
	for (unsigned i = 0; i < conf_nopts; i++) {
		char v[128];
		conf_opt_format(&conf_opts[i], v, sizeof(v));
		MP_ASSERT(strcmp(v, conf_opts[i].def) == 0,
		    "opt %s: default \"%s\" prints as \"%s\"",
		    conf_opts[i].name, conf_opts[i].def, v);
	}
}

/* The program's own malloc_conf was read at start-up. */
static void test_app_malloc_conf_applied_at_init(void **state) {
	(void)state;
	if (getenv(MP_CONF_ENV) != NULL)
		MP_SKIP("%s is set in the environment", MP_CONF_ENV);
	/* Force initialisation, then look at what boot left (reset() has
	 * not run yet for this test: it is the first). */
	unsigned narenas = 0;
	ssize_t dirty = 0;
	MALLCTL_READ("opt.narenas", narenas);
	MALLCTL_READ("opt.dirty_decay_ms", dirty);
	assert_int_equal(narenas, 5);
	assert_int_equal(dirty, 1234);
}

/* ------------------------------------------------------- good input */

static void test_good_values(void **state) {
	(void)state;
	mp_msgs_start();
	bool err = conf_parse("MALLOC_CONF",
	    "abort:true,narenas:0x10,tcache:false,tcache_max:4096,"
	    "dirty_decay_ms:-1,muzzy_decay_ms:2147483647000,retain:false,"
	    "junk:alloc,zero:true,zero_realloc:abort,stats_print:true,"
	    "stats_print_opts:Jgm");
	mp_msgs_stop();
	assert_false(err);
	assert_int_equal(mp_msgs_len, 0);
	assert_true(opt_abort);
	assert_int_equal(opt_narenas, 16);
	assert_false(opt_tcache);
	assert_int_equal(opt_tcache_max, 4096);
	assert_int_equal(opt_dirty_decay_ms, -1);
	assert_int_equal(opt_muzzy_decay_ms, 2147483647000L);
	assert_false(opt_retain);
	assert_string_equal(opt_junk, "alloc");
	assert_true(opt_junk_alloc);
	assert_false(opt_junk_free);
	assert_true(opt_zero);
	assert_int_equal(opt_zero_realloc, ZERO_REALLOC_ABORT);
	assert_true(opt_stats_print);
	assert_string_equal(opt_stats_print_opts, "Jgm");
	conf_reset_defaults();

	/* Range limits are inclusive; an empty string is a string. */
	assert_false(conf_parse("MALLOC_CONF", "narenas:4095,tcache_max:0,"
	    "muzzy_decay_ms:-1,stats_print_opts:"));
	assert_int_equal(opt_narenas, 4095);
	assert_int_equal(opt_tcache_max, 0);
	assert_int_equal(opt_muzzy_decay_ms, -1);
	assert_string_equal(opt_stats_print_opts, "");

	/* Every junk value and its derived flags. */
	assert_false(conf_parse("MALLOC_CONF", "junk:free"));
	assert_true(!opt_junk_alloc && opt_junk_free);
	assert_string_equal(opt_junk, "free");
	assert_false(conf_parse("MALLOC_CONF", "junk:true"));
	assert_true(opt_junk_alloc && opt_junk_free);
	assert_false(conf_parse("MALLOC_CONF", "junk:false"));
	assert_true(!opt_junk_alloc && !opt_junk_free);
	assert_false(conf_parse("MALLOC_CONF", "zero_realloc:alloc"));
	assert_int_equal(opt_zero_realloc, ZERO_REALLOC_ALLOC);

	/* Empty conf: nothing to do, no error. */
	assert_false(conf_parse("MALLOC_CONF", ""));
}

/* ---------------------------------------------------------- bad input */

static void test_unknown_key(void **state) {
	(void)state;
	EXPECT_ERROR("narena:4", "unknown option \"narena\"",
	    "(did you mean \"narenas\"?)");
	EXPECT_ERROR("tcache_maxx:1", "unknown option \"tcache_maxx\"",
	    "did you mean \"tcache_max\"");
	EXPECT_ERROR("NARENAS:1", "did you mean \"narenas\"");
	EXPECT_ERROR("stats:true", "did you mean \"stats_print\"");
	/* Nothing close: no suggestion at all. */
	EXPECT_ERROR("xyzzyplugh:1", "unknown option \"xyzzyplugh\"");
	assert_null(strstr(mp_msgs, "did you mean"));
	EXPECT_ERROR("q:1", "unknown option \"q\"");
	assert_null(strstr(mp_msgs, "did you mean"));
}

static void test_bad_bool(void **state) {
	(void)state;
	EXPECT_ERROR("tcache:yes", "invalid value \"yes\" for option "
	    "\"tcache\": expected true or false");
	EXPECT_ERROR("tcache:TRUE", "\"TRUE\"", "expected true or false");
	EXPECT_ERROR("tcache:1", "\"1\"", "expected true or false");
	EXPECT_ERROR("tcache:", "invalid value \"\"", "true or false");
	assert_true(opt_tcache);
}

static void test_bad_integer(void **state) {
	(void)state;
	EXPECT_ERROR("narenas:abc", "invalid value \"abc\" for option "
	    "\"narenas\": expected an unsigned integer");
	EXPECT_ERROR("narenas:4x", "\"4x\"", "expected an unsigned integer");
	EXPECT_ERROR("narenas: 4", "\" 4\"", "expected an unsigned integer");
	EXPECT_ERROR("narenas:", "invalid value \"\"",
	    "expected an unsigned integer");
	EXPECT_ERROR("tcache_max:1.5", "\"1.5\"", "an unsigned integer");
	EXPECT_ERROR("dirty_decay_ms:1e3", "invalid value \"1e3\" for option "
	    "\"dirty_decay_ms\": expected an integer");
	EXPECT_ERROR("dirty_decay_ms:-", "\"-\"", "expected an integer");
	assert_int_equal(opt_narenas, 0);
	assert_int_equal(opt_dirty_decay_ms, 10000);
}

static void test_negative_unsigned(void **state) {
	(void)state;
	/* strtoumax would wrap "-1" to UINTMAX_MAX; it must be refused. */
	EXPECT_ERROR("narenas:-1", "invalid value \"-1\" for option "
	    "\"narenas\": expected an unsigned integer");
	EXPECT_ERROR("tcache_max:-4096", "\"-4096\"", "unsigned integer");
	assert_int_equal(opt_narenas, 0);
	assert_int_equal(opt_tcache_max, 65536);
}

static void test_out_of_range(void **state) {
	(void)state;
	assert_false(conf_parse("MALLOC_CONF", "narenas:4"));
	EXPECT_ERROR("narenas:5000", "value \"5000\" for option \"narenas\" "
	    "is out of range [0, 4095]");
	/* The previous value is kept. */
	assert_int_equal(opt_narenas, 4);
	EXPECT_ERROR("tcache_max:8388609", "\"8388609\"",
	    "out of range [0, 8388608]");
	EXPECT_ERROR("dirty_decay_ms:-2", "value \"-2\" for option "
	    "\"dirty_decay_ms\" is out of range [-1, 2147483647000]");
	EXPECT_ERROR("muzzy_decay_ms:2147483647001", "out of range");
	/* Beyond uintmax_t / intmax_t (strto*max's ERANGE). */
	EXPECT_ERROR("tcache_max:99999999999999999999999999",
	    "\"99999999999999999999999999\"", "out of range");
	EXPECT_ERROR("dirty_decay_ms:-99999999999999999999999999",
	    "out of range");
	assert_int_equal(opt_tcache_max, 65536);
	assert_int_equal(opt_dirty_decay_ms, 10000);
	assert_int_equal(opt_muzzy_decay_ms, 0);
}

static void test_bad_enum_and_string(void **state) {
	(void)state;
	EXPECT_ERROR("junk:maybe", "invalid value \"maybe\" for option "
	    "\"junk\": expected one of \"false\", \"true\", \"alloc\", "
	    "\"free\"");
	EXPECT_ERROR("zero_realloc:nope", "\"nope\"",
	    "expected one of \"free\", \"alloc\", \"abort\"");
	assert_string_equal(opt_junk, config_debug ? "true" : "false");
	assert_int_equal(opt_zero_realloc, ZERO_REALLOC_FREE);

	char conf[128];
	snprintf(conf, sizeof(conf), "stats_print_opts:%064d", 0);
	EXPECT_ERROR(conf, "for option \"stats_print_opts\"",
	    "expected at most 63 characters");
	assert_string_equal(opt_stats_print_opts, "");
	snprintf(conf, sizeof(conf), "stats_print_opts:%063d", 0);
	assert_false(conf_parse("MALLOC_CONF", conf));
	assert_int_equal(strlen(opt_stats_print_opts), 63);

	/* opt.hpa's fixed-point options: a value out of range or not a
	 * number is refused and the option keeps its default. */
	EXPECT_ERROR("hpa_dirty_mult:0.5x", "invalid value \"0.5x\" for "
	    "option \"hpa_dirty_mult\": expected -1 or a number below 65536");
	EXPECT_ERROR("hpa_dirty_mult:-2", "\"-2\"", "expected -1 or a number");
	assert_int_equal(opt_hpa_dirty_mult, (uint32_t)1 << 14);
	EXPECT_ERROR("hpa_hugification_threshold_ratio:1.5", "\"1.5\"",
	    "\"hpa_hugification_threshold_ratio\": expected a number from "
	    "0 to 1");
	assert_false(conf_parse("MALLOC_CONF", "hpa_dirty_mult:-1"));
	assert_int_equal(opt_hpa_dirty_mult, HPA_DIRTY_MULT_OFF);
	assert_false(conf_parse("MALLOC_CONF", "hpa_dirty_mult:0.25"));
	assert_int_equal(opt_hpa_dirty_mult, (uint32_t)1 << 14);
}

static void test_malformed(void **state) {
	(void)state;
	const char *tail = "\": expected key:value pairs separated by commas";
	/* Missing colon. */
	EXPECT_ERROR("tcache=false",
	    "malformed conf string at \"tcache=false", tail);
	/* Empty key. */
	EXPECT_ERROR(":4", "malformed conf string at \":4", tail);
	/* Trailing comma: the pair before it still counts. */
	EXPECT_ERROR("narenas:4,", "malformed conf string at \",", tail);
	assert_int_equal(opt_narenas, 4);
	/* The string ends with a key. */
	EXPECT_ERROR("tcache", "malformed conf string at \"tcache", tail);
	EXPECT_ERROR("narenas:2,tcache", "at \"tcache\"", tail);
	assert_int_equal(opt_narenas, 2);
	/* Characters a key cannot have. */
	EXPECT_ERROR("nar-enas:4", "at \"nar-enas:4", tail);
	EXPECT_ERROR("narenas.x:4", "at \"narenas.x:4", tail);
	EXPECT_ERROR(" narenas:4", "at \" narenas:4", tail);
	/* A lone comma. */
	EXPECT_ERROR(",", "at \",\"", tail);
}

/* Control characters are escaped: the message stays one line. */
static void test_quoting_keeps_one_line(void **state) {
	(void)state;
	EXPECT_ERROR("narenas:1\n2", "\"1\\x0a2\"");
	EXPECT_ERROR("junk:\"q\"", "\"\\\"q\\\"\"");
	char conf[1200];
	memset(conf, 'a', sizeof(conf) - 1);
	conf[sizeof(conf) - 1] = '\0';
	conf[0] = 'x';
	EXPECT_ERROR(conf, "...");
}

static void test_parsing_continues_after_errors(void **state) {
	(void)state;
	mp_msgs_start();
	bool err = conf_parse("MALLOC_CONF", "narenas:abc,tcache_max:4096,"
	    "bogus:1,dirty_decay_ms:77,tcache=0,retain:false,:x,zero:true");
	mp_msgs_stop();
	assert_true(err);
	/* Four errors, four lines, four calls. */
	assert_int_equal(mp_msgs_calls, 4);
	assert_int_equal(mp_msgs_lines, 4);
	assert_int_equal(opt_narenas, 0);
	assert_int_equal(opt_tcache_max, 4096);
	assert_int_equal(opt_dirty_decay_ms, 77);
	assert_false(opt_retain);
	assert_true(opt_zero);
	/* A double comma costs the empty piece only. */
	mp_msgs_start();
	err = conf_parse("MALLOC_CONF", "narenas:3,,narenas:6");
	mp_msgs_stop();
	assert_true(err);
	assert_int_equal(mp_msgs_calls, 1);
	assert_int_equal(opt_narenas, 6);
}

static void test_later_sources_override(void **state) {
	(void)state;
	assert_false(conf_parse("malloc_conf", "narenas:2,tcache_max:1024"));
	assert_false(conf_parse("/etc/malloc.conf", "narenas:3,zero:true"));
	assert_false(conf_parse("MALLOC_CONF", "narenas:4"));
	assert_int_equal(opt_narenas, 4);
	assert_int_equal(opt_tcache_max, 1024);
	assert_true(opt_zero);
	/* Within one string, the last pair wins too. */
	assert_false(conf_parse("MALLOC_CONF", "narenas:1,narenas:9"));
	assert_int_equal(opt_narenas, 9);
	/* The message names the source it came from. */
	mp_msgs_start();
	conf_parse("/etc/malloc.conf", "narenas:z");
	mp_msgs_stop();
	assert_non_null(strstr(mp_msgs,
	    "<malloc_prof>: /etc/malloc.conf: invalid value \"z\""));
}

static void test_confirm_conf(void **state) {
	(void)state;
	mp_msgs_start();
	assert_false(conf_parse("MALLOC_CONF", "confirm_conf:true,narenas:4,"
	    "junk:free"));
	assert_non_null(strstr(mp_msgs, "<malloc_prof>: set option "
	    "narenas:4\n"));
	assert_non_null(strstr(mp_msgs, "<malloc_prof>: set option "
	    "junk:free\n"));
	/* With confirm_conf already on, the source is printed first. */
	mp_msgs_start();
	assert_false(conf_parse("MALLOC_CONF", "narenas:2"));
	mp_msgs_stop();
	assert_string_equal(mp_msgs,
	    "<malloc_prof>: conf from MALLOC_CONF: \"narenas:2\"\n"
	    "<malloc_prof>: set option narenas:2\n");
}

/* ---------------------------------------------------------- conf_boot */

static char link_path[64];

static void make_conf_link(const char *target) {
	snprintf(link_path, sizeof(link_path), "/tmp/mp_conf_test.%d",
	    (int)getpid());
	unlink(link_path);
	assert_int_equal(symlink(target, link_path), 0);
	conf_file_path = link_path;
}

static void drop_conf_link(void) {
	unlink(link_path);
	conf_file_path = MP_CONF_FILE;
}

/* conf_boot reads the environment; keep the test's own value aside. */
static char saved_env[4096];
static bool had_env;

static void env_save(void) {
	const char *v = getenv(MP_CONF_ENV);
	had_env = v != NULL;
	if (had_env)
		snprintf(saved_env, sizeof(saved_env), "%s", v);
}

static void env_restore(void) {
	if (had_env)
		setenv(MP_CONF_ENV, saved_env, 1);
	else
		unsetenv(MP_CONF_ENV);
}

static void test_boot_source_order(void **state) {
	(void)state;
	env_save();
	make_conf_link("narenas:6,muzzy_decay_ms:77");
	setenv(MP_CONF_ENV, "narenas:7", 1);
	mp_msgs_start();
	conf_boot();
	mp_msgs_stop();
	drop_conf_link();
	env_restore();
	assert_int_equal(mp_msgs_len, 0);
	/* malloc_conf < symlink < environment. */
	assert_int_equal(opt_narenas, 7);
	assert_int_equal(opt_muzzy_decay_ms, 77);
	assert_int_equal(opt_dirty_decay_ms, 1234);
	/* Everything else is back to its default. */
	assert_int_equal(opt_tcache_max, 65536);
}

static void test_boot_without_env_or_link(void **state) {
	(void)state;
	env_save();
	unsetenv(MP_CONF_ENV);
	conf_file_path = "/nonexistent/malloc_prof.conf";
	mp_msgs_start();
	conf_boot();
	mp_msgs_stop();
	conf_file_path = MP_CONF_FILE;
	env_restore();
	assert_int_equal(mp_msgs_len, 0);
	assert_int_equal(opt_narenas, 5);
	assert_int_equal(opt_dirty_decay_ms, 1234);
}

static void test_boot_names_sources(void **state) {
	(void)state;
	env_save();
	make_conf_link("narenas:q");
	setenv(MP_CONF_ENV, "tcache:maybe", 1);
	mp_msgs_start();
	conf_boot();
	mp_msgs_stop();
	drop_conf_link();
	env_restore();
	char want[128];
	snprintf(want, sizeof(want), "<malloc_prof>: %s: invalid value "
	    "\"q\"", link_path);
	assert_non_null(strstr(mp_msgs, want));
	snprintf(want, sizeof(want), "<malloc_prof>: %s: invalid value "
	    "\"maybe\"", MP_CONF_ENV);
	assert_non_null(strstr(mp_msgs, want));
	assert_int_equal(mp_msgs_lines, 2);
}

/* confirm_conf set late in the last source still covers every source. */
static void test_boot_confirm_conf_early(void **state) {
	(void)state;
	env_save();
	conf_file_path = "/nonexistent/malloc_prof.conf";
	setenv(MP_CONF_ENV, "narenas:3,confirm_conf:true", 1);
	mp_msgs_start();
	conf_boot();
	mp_msgs_stop();
	conf_file_path = MP_CONF_FILE;
	env_restore();
	char want[256];
	snprintf(want, sizeof(want), "<malloc_prof>: conf from "
	    "%smalloc_conf: \"narenas:5,dirty_decay_ms:1234\"\n",
	    MP_PREFIX_STR);
	assert_non_null(strstr(mp_msgs, want));
	snprintf(want, sizeof(want), "<malloc_prof>: conf from %s: "
	    "\"narenas:3,confirm_conf:true\"\n", MP_CONF_ENV);
	assert_non_null(strstr(mp_msgs, want));
	assert_non_null(strstr(mp_msgs, "set option narenas:5\n"));
	assert_non_null(strstr(mp_msgs, "set option narenas:3\n"));
}

static void boot_without_file(void *arg) {
	(void)arg;
	conf_file_path = "/nonexistent/malloc_prof.conf";
	conf_boot();
}

/* Run conf_boot in a child with `env` as the conf variable; return its
 * wait status and stderr. */
static int boot_in_child(const char *env, char *out, size_t size) {
	env_save();
	setenv(MP_CONF_ENV, env, 1);
	int status = mp_child_stderr(boot_without_file, NULL, out, size);
	env_restore();
	return status;
}

static void test_abort_conf(void **state) {
	(void)state;
	char out[1024];
	/* The error comes before abort_conf in the string: all sources are
	 * parsed first, then the process aborts. */
	int st = boot_in_child("bogus:1,abort_conf:true,narenas:2", out,
	    sizeof(out));
	MP_ASSERT(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT,
	    "status %#x, output \"%s\"", st, out);
	assert_non_null(strstr(out, "unknown option \"bogus\""));
	assert_non_null(strstr(out, "<malloc_prof>: abort_conf:true: "
	    "aborting on invalid conf (see above)\n"));
	/* No error: no abort. */
	st = boot_in_child("abort_conf:true,narenas:2", out, sizeof(out));
	MP_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %#x, "
	    "output \"%s\"", st, out);
	assert_string_equal(out, "");
	/* An error without abort_conf: reported, no abort. */
	st = boot_in_child("bogus:1", out, sizeof(out));
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	assert_non_null(strstr(out, "unknown option \"bogus\""));
}

static void test_prefixed_build_warns_about_malloc_conf(void **state) {
	(void)state;
	if (MP_PREFIX_STR[0] == '\0')
		MP_SKIP("unprefixed build: MALLOC_CONF is the conf variable");
	env_save();
	const char *plain = getenv("MALLOC_CONF");
	char saved_plain[256];
	if (plain != NULL)
		snprintf(saved_plain, sizeof(saved_plain), "%s", plain);
	unsetenv(MP_CONF_ENV);
	setenv("MALLOC_CONF", "narenas:2", 1);
	conf_file_path = "/nonexistent/malloc_prof.conf";
	mp_msgs_start();
	conf_boot();
	mp_msgs_stop();
	conf_file_path = MP_CONF_FILE;
	if (plain != NULL)
		setenv("MALLOC_CONF", saved_plain, 1);
	else
		unsetenv("MALLOC_CONF");
	env_restore();
	char want[256];
	snprintf(want, sizeof(want), "<malloc_prof>: MALLOC_CONF is set but "
	    "this build (prefix \"%s\") reads %s; MALLOC_CONF is ignored\n",
	    MP_PREFIX_STR, MP_CONF_ENV);
	if (plain == NULL)
		assert_string_equal(mp_msgs, want);
	assert_int_equal(opt_narenas, 5);
}

/* ------------------------------------------------------------- lookup */

static void test_lookup(void **state) {
	(void)state;
	const conf_opt_t *o = conf_opt_lookup("narenas", 7);
	assert_non_null(o);
	assert_ptr_equal(o->var, &opt_narenas);
	/* The length counts: "narenasX" cut to 7 is "narenas". */
	assert_ptr_equal(conf_opt_lookup("narenasX", 7), o);
	assert_null(conf_opt_lookup("narena", 6));
	assert_null(conf_opt_lookup("", 0));
	/* Every row has a unique name, a doc line, and a sane type. */
	for (unsigned i = 0; i < conf_nopts; i++) {
		const conf_opt_t *r = &conf_opts[i];
		assert_ptr_equal(conf_opt_lookup(r->name, strlen(r->name)), r);
		assert_non_null(r->doc);
		assert_true(strlen(r->doc) > 0);
		if (r->type == CONF_ENUM)
			assert_true(r->nnames > 0 && r->names != NULL);
		if (r->type == CONF_STRING)
			assert_true(r->bufsize > 0);
	}
}

int main(void) {
	mp_test_init(120);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_app_malloc_conf_applied_at_init),
		cmocka_unit_test_setup_teardown(test_defaults, reset, reset),
		cmocka_unit_test_setup_teardown(test_good_values, reset, reset),
		cmocka_unit_test_setup_teardown(test_unknown_key, reset, reset),
		cmocka_unit_test_setup_teardown(test_bad_bool, reset, reset),
		cmocka_unit_test_setup_teardown(test_bad_integer, reset, reset),
		cmocka_unit_test_setup_teardown(test_negative_unsigned, reset,
		    reset),
		cmocka_unit_test_setup_teardown(test_out_of_range, reset,
		    reset),
		cmocka_unit_test_setup_teardown(test_bad_enum_and_string, reset,
		    reset),
		cmocka_unit_test_setup_teardown(test_malformed, reset, reset),
		cmocka_unit_test_setup_teardown(test_quoting_keeps_one_line,
		    reset, reset),
		cmocka_unit_test_setup_teardown(
		    test_parsing_continues_after_errors, reset, reset),
		cmocka_unit_test_setup_teardown(test_later_sources_override,
		    reset, reset),
		cmocka_unit_test_setup_teardown(test_confirm_conf, reset,
		    reset),
		cmocka_unit_test_setup_teardown(test_boot_source_order, reset,
		    reset),
		cmocka_unit_test_setup_teardown(test_boot_without_env_or_link,
		    reset, reset),
		cmocka_unit_test_setup_teardown(test_boot_names_sources, reset,
		    reset),
		cmocka_unit_test_setup_teardown(test_boot_confirm_conf_early,
		    reset, reset),
		cmocka_unit_test_setup_teardown(test_abort_conf, reset, reset),
		cmocka_unit_test_setup_teardown(
		    test_prefixed_build_warns_about_malloc_conf, reset, reset),
		cmocka_unit_test_setup_teardown(test_lookup, reset, reset),
	};
	return mp_run_tests(tests);
}
