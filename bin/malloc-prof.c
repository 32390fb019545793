/*
 * bin/malloc-prof.c - the malloc-prof command: reads heap profiles
 * (heap_v2, ours and jemalloc's), names their frames from the mapped ELF
 * files, and prints one report per command.  It replaces jeprof for our
 * users (doc/malloc-prof.md): no perl, no binutils, no graphviz needed
 * except to render `svg`.
 *
 *   malloc-prof COMMAND [options] [PROGRAM] PROFILE...
 *
 * This file holds main and the command line (the commands, their options
 * and help); mp_cmd.c runs the command.  The tool's files form a tree
 * under this one: mp_cmd.c uses the readers (mp_profile.c, mp_pprof.c),
 * the symbolizer (mp_symbolize.c, mp_dwarf.c) and the reports
 * (mp_output.c), and every file uses mp_util.c, which uses none.
 */
#include "malloc-prof.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- commands and options */
static const struct {
	const char *name;
	const char *args;
	const char *what;
} mp_cmds[] = {
	[CMD_TOP] = { "top", "[PROGRAM] PROFILE...",
	    "the functions holding the most memory (jeprof --text's table)" },
	[CMD_DIFF] = { "diff", "[PROGRAM] BASE PROFILE",
	    "what grew (or shrank) from BASE to PROFILE, as top" },
	[CMD_COLLAPSED] = { "collapsed", "[PROGRAM] PROFILE...",
	    "folded stacks, \"root;...;leaf value\" (flamegraph.pl input)" },
	[CMD_FLAMEGRAPH] = { "flamegraph", "[-o FILE.svg] [PROGRAM] PROFILE...",
	    "an interactive flame graph, one self-contained SVG file" },
	[CMD_DOT] = { "dot", "[PROGRAM] PROFILE...",
	    "the call graph in Graphviz DOT" },
	[CMD_SVG] = { "svg", "[-o FILE.svg] [PROGRAM] PROFILE...",
	    "the call graph drawn by Graphviz's dot -Tsvg" },
	[CMD_LEAKS] = { "leaks", "[--max-bytes N] [PROGRAM] PROFILE...",
	    "exit 1 if more than N bytes (default 0) are in use; lists them" },
	[CMD_INFO] = { "info", "[PROGRAM] PROFILE...",
	    "the sample period, totals, threads and mapped files" },
	[CMD_PPROF] = { "pprof", "-o FILE.pb.gz [PROGRAM] PROFILE...",
	    "a symbolized, gzipped profile.proto for pprof tools (all four "
	    "sample types)" },
	[CMD_TEMPORARY] = { "temporary", "[--within T] [PROGRAM] PROFILE",
	    "the stacks that churn short-lived memory (a lifetime profile: "
	    "prof.lifetimes.dump)" },
};
#define MP_NCMDS (sizeof(mp_cmds) / sizeof(mp_cmds[0]))

static void mp_usage(FILE *f) {
	fprintf(f, "usage: malloc-prof COMMAND [options] [PROGRAM] PROFILE...\n"
	    "Reads heap profiles (heap_v2 dumps of malloc_prof or jemalloc, "
	    "pprof heap\nprofiles) and names their frames from the files in "
	    "MAPPED_LIBRARIES\n(PROGRAM, if given, replaces the mapped file "
	    "of the same name).\n"
	    "\nCommands:\n");
	for (size_t i = 0; i < MP_NCMDS; i++)
		fprintf(f, "  %-11s %s\n", mp_cmds[i].name, mp_cmds[i].what);
	fprintf(f, "\n`malloc-prof COMMAND --help` describes a command's "
	    "options.  Exit status:\n0 ok, 1 leaks over the limit, 2 usage or "
	    "input errors.\n");
}

static void mp_cmd_help(mp_cmd_t cmd) {
	printf("usage: malloc-prof %s [options] %s\n%s.\n\nOptions:\n",
	    mp_cmds[cmd].name, mp_cmds[cmd].args, mp_cmds[cmd].what);
	if (cmd == CMD_LEAKS)
		printf("  --max-bytes N     allowed bytes in use (default 0); "
		    "more: exit status 1\n");
	if (cmd != CMD_INFO)
		printf("  -o, --output FILE write there instead of standard "
		    "output\n");
	if (cmd == CMD_FLAMEGRAPH)
		printf("  --title TEXT      the title line of the graph\n");
	if (cmd == CMD_PPROF)
		printf("  --thread N        only what thread tN allocated\n"
		    "  --base BASE       subtract the profile BASE (its "
		    "samples, negated)\n");
	if (cmd == CMD_TEMPORARY)
		printf("  --within T        short-lived: freed within T, one of "
		    "1ms, 10ms (default),\n"
		    "                    100ms, 1s (the profile's buckets)\n"
		    "  -n, --nodecount N show at most N stacks\n");
	if (cmd != CMD_INFO && cmd != CMD_PPROF && cmd != CMD_TEMPORARY) {
		printf("  -n, --nodecount N show at most N rows (top, diff), "
		    "stacks (leaks) or\n"
		    "                    functions (dot, svg)\n"
		    "  --inuse_space     bytes in use (default)\n"
		    "  --inuse_objects   objects in use\n"
		    "  --alloc_space     bytes ever allocated (needs prof_accum)\n"
		    "  --alloc_objects   objects ever allocated (needs "
		    "prof_accum)\n"
		    "  --sample TYPE     one of the above by name, or "
		    "fragmentation_space or\n"
		    "                    fragmentation_objects (a "
		    "fragmentation profile)\n"
		    "  --focus REGEX     only stacks with a function matching "
		    "REGEX (POSIX ERE)\n"
		    "  --ignore REGEX    leave out stacks with a function "
		    "matching REGEX\n"
		    "  --thread N        only what thread tN allocated (the "
		    "uids of `info`)\n"
		    "  --tag KEY         group by the value of label KEY "
		    "(thread.prof.label,\n"
		    "                    thread_id, thread_name): top and "
		    "diff list the groups,\n"
		    "                    the others put a root frame "
		    "KEY=VALUE above each stack\n"
		    "  --tag KEY=VALUE   only the samples whose label KEY is "
		    "VALUE\n");
		if (cmd != CMD_DIFF)
			printf("  --base BASE       subtract the profile BASE "
			    "first (what grew since)\n");
	}
	if (cmd != CMD_PPROF)	/* it always writes both, apart */
		printf("  --lines           name frames \"function file:line\" "
		    "(DWARF .debug_line)\n"
		    "  --functions       function names only (default)\n"
		    "  --no-demangle     leave C++ names mangled (default: "
		    "c++filt when installed)\n");
	printf("  --debug-dir DIR   where separate debug files are looked "
	    "for\n"
	    "                    (default /usr/lib/debug: .build-id/xx/"
	    "yyyy.debug,\n"
	    "                    or the .gnu_debuglink name)\n"
	    "  -h, --help        this text\n");
}

static int mp_usage_error(const mp_opts_t *o, const char *fmt, ...) {
	va_list ap;
	fflush(stdout);
	fprintf(stderr, "%s: ", mp_progname);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	if (o != NULL)
		fprintf(stderr, ": usage: malloc-prof %s [options] %s (see "
		    "malloc-prof %s --help)\n", mp_cmds[o->cmd].name,
		    mp_cmds[o->cmd].args, mp_cmds[o->cmd].name);
	else
		fprintf(stderr, ": usage: malloc-prof COMMAND [options] "
		    "[PROGRAM] PROFILE... (see malloc-prof --help)\n");
	return MP_EXIT_USAGE;
}

static bool mp_parse_count(const char *s, uint64_t *out) {
	char *end;
	if (*s < '0' || *s > '9')
		return false;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno != 0 || *end != '\0')
		return false;
	*out = v;
	return true;
}

enum {
	OPT_INUSE_SPACE = 256, OPT_INUSE_OBJECTS, OPT_ALLOC_SPACE,
	OPT_ALLOC_OBJECTS, OPT_FOCUS, OPT_IGNORE, OPT_BASE, OPT_MAX_BYTES,
	OPT_DEBUG_DIR, OPT_TITLE, OPT_LINES, OPT_FUNCTIONS, OPT_NO_DEMANGLE,
	OPT_THREAD, OPT_TAG, OPT_WITHIN, OPT_SAMPLE
};

static const struct option mp_long_opts[] = {
	{ "help", no_argument, NULL, 'h' },
	{ "nodecount", required_argument, NULL, 'n' },
	{ "output", required_argument, NULL, 'o' },
	{ "inuse_space", no_argument, NULL, OPT_INUSE_SPACE },
	{ "inuse-space", no_argument, NULL, OPT_INUSE_SPACE },
	{ "inuse_objects", no_argument, NULL, OPT_INUSE_OBJECTS },
	{ "inuse-objects", no_argument, NULL, OPT_INUSE_OBJECTS },
	{ "alloc_space", no_argument, NULL, OPT_ALLOC_SPACE },
	{ "alloc-space", no_argument, NULL, OPT_ALLOC_SPACE },
	{ "alloc_objects", no_argument, NULL, OPT_ALLOC_OBJECTS },
	{ "alloc-objects", no_argument, NULL, OPT_ALLOC_OBJECTS },
	{ "focus", required_argument, NULL, OPT_FOCUS },
	{ "ignore", required_argument, NULL, OPT_IGNORE },
	{ "base", required_argument, NULL, OPT_BASE },
	{ "max-bytes", required_argument, NULL, OPT_MAX_BYTES },
	{ "debug-dir", required_argument, NULL, OPT_DEBUG_DIR },
	{ "title", required_argument, NULL, OPT_TITLE },
	{ "lines", no_argument, NULL, OPT_LINES },
	{ "thread", required_argument, NULL, OPT_THREAD },
	{ "tag", required_argument, NULL, OPT_TAG },
	{ "functions", no_argument, NULL, OPT_FUNCTIONS },
	{ "no-demangle", no_argument, NULL, OPT_NO_DEMANGLE },
	{ "within", required_argument, NULL, OPT_WITHIN },
	{ "sample", required_argument, NULL, OPT_SAMPLE },
	{ NULL, 0, NULL, 0 },
};

/* Returns -1 to go on, or the exit status. */
static int mp_parse_args(int argc, char **argv, mp_opts_t *o) {
	o->which = MP_INUSE_SPACE;
	o->limit = -1;
	o->debug_dir = "/usr/lib/debug";
	o->demangle = true;
	o->thread = -1;
	o->within = 10;
	optind = 1;
	opterr = 0;
	int c;
	uint64_t v;
	/* ":" first: a missing argument is reported as ':' not '?'. */
	while ((c = getopt_long(argc, argv, ":hn:o:", mp_long_opts, NULL)) != -1) {
		switch (c) {
		case 'h':
			mp_cmd_help(o->cmd);
			return MP_EXIT_OK;
		case 'n':
			if (!mp_parse_count(optarg, &v) || v > (uint64_t)LONG_MAX)
				return mp_usage_error(o, "-n needs a number of "
				    "rows, got \"%s\"", optarg);
			o->limit = (long)v;
			break;
		case 'o': o->output = optarg; break;
		case OPT_INUSE_SPACE: o->which = MP_INUSE_SPACE; break;
		case OPT_INUSE_OBJECTS: o->which = MP_INUSE_OBJECTS; break;
		case OPT_ALLOC_SPACE: o->which = MP_ALLOC_SPACE; break;
		case OPT_ALLOC_OBJECTS: o->which = MP_ALLOC_OBJECTS; break;
		case OPT_SAMPLE:
			/* A fragmentation profile's two types stand where a
			 * heap profile's inuse pair does (mp_pprof.c). */
			if (strcmp(optarg, "inuse_space") == 0 ||
			    strcmp(optarg, "fragmentation_space") == 0)
				o->which = MP_INUSE_SPACE;
			else if (strcmp(optarg, "inuse_objects") == 0 ||
			    strcmp(optarg, "fragmentation_objects") == 0)
				o->which = MP_INUSE_OBJECTS;
			else if (strcmp(optarg, "alloc_space") == 0)
				o->which = MP_ALLOC_SPACE;
			else if (strcmp(optarg, "alloc_objects") == 0)
				o->which = MP_ALLOC_OBJECTS;
			else
				return mp_usage_error(o, "--sample: unknown "
				    "sample type \"%s\" (inuse_space, "
				    "inuse_objects, alloc_space, alloc_objects, "
				    "fragmentation_space, fragmentation_objects)",
				    optarg);
			break;
		case OPT_FOCUS: o->focus = optarg; break;
		case OPT_IGNORE: o->ignore = optarg; break;
		case OPT_BASE: o->base = optarg; break;
		case OPT_DEBUG_DIR: o->debug_dir = optarg; break;
		case OPT_TITLE: o->title = optarg; break;
		case OPT_LINES: o->lines = true; break;
		case OPT_THREAD:
			if (!mp_parse_count(optarg, &v) || v > INT64_MAX)
				return mp_usage_error(o, "--thread needs a thread "
				    "number (N of a tN line), got \"%s\"", optarg);
			o->thread = (int64_t)v;
			break;
		case OPT_FUNCTIONS: o->lines = false; break;
		case OPT_NO_DEMANGLE: o->demangle = false; break;
		case OPT_TAG:
			/* A key as thread.prof.label takes them. */
			if (optarg[0] == '\0' || optarg[0] == '=' ||
			    strchr(optarg, ',') != NULL)
				return mp_usage_error(o, "--tag needs KEY or "
				    "KEY=VALUE, got \"%s\"", optarg);
			o->tag = optarg;
			break;
		case OPT_WITHIN:
			o->within = strcmp(optarg, "1ms") == 0 ? 1 :
			    strcmp(optarg, "10ms") == 0 ? 10 :
			    strcmp(optarg, "100ms") == 0 ? 100 :
			    strcmp(optarg, "1s") == 0 ? 1000 : -1;
			if (o->cmd != CMD_TEMPORARY || o->within < 0)
				return mp_usage_error(o, o->cmd != CMD_TEMPORARY ?
				    "--within applies to temporary only" :
				    "--within needs 1ms, 10ms, 100ms or 1s (the "
				    "lifetime profile's buckets), got \"%s\"",
				    optarg);
			break;
		case OPT_MAX_BYTES:
			if (!mp_parse_count(optarg, &o->max_bytes))
				return mp_usage_error(o, "--max-bytes needs a "
				    "number of bytes, got \"%s\"", optarg);
			break;
		case ':':
			return mp_usage_error(o, "option \"%s\" needs a value",
			    argv[optind - 1]);
		default:
			return mp_usage_error(o, "unknown option \"%s\"",
			    argv[optind - 1]);
		}
	}
	if (o->cmd == CMD_LEAKS && o->which != MP_INUSE_SPACE)
		return mp_usage_error(o, "leaks counts bytes in use: "
		    "--inuse_objects, --alloc_space and --alloc_objects do not "
		    "apply");
	if (o->cmd == CMD_PPROF && (o->focus != NULL || o->ignore != NULL ||
	    o->limit >= 0))
		return mp_usage_error(o, "--focus, --ignore and -n do not apply "
		    "to pprof: every stack is written (pprof tools filter)");
	if (o->cmd == CMD_PPROF && o->output == NULL && isatty(1))
		return mp_usage_error(o, "pprof writes binary data: give -o "
		    "FILE.pb.gz");
	if ((o->cmd == CMD_PPROF || o->cmd == CMD_INFO) && o->tag != NULL)
		return mp_usage_error(o, "--tag does not apply to %s",
		    mp_cmds[o->cmd].name);
	if (o->cmd == CMD_TEMPORARY && (o->focus != NULL || o->ignore != NULL ||
	    o->tag != NULL || o->base != NULL || o->thread >= 0 ||
	    o->which != MP_INUSE_SPACE))
		return mp_usage_error(o, "temporary reads a lifetime profile "
		    "as a whole: --focus, --ignore, --tag, --base, --thread and "
		    "the sample types do not apply");
	if (o->cmd == CMD_DIFF && o->base != NULL)
		return mp_usage_error(o, "diff takes its base as the first "
		    "profile, not --base");
	int i = optind;
	/* An ELF file first is the PROGRAM; profiles are text. */
	if (i < argc && mp_file_is_elf(argv[i]))
		o->program = argv[i++];
	o->profiles = (const char **)argv + i;
	o->nprofiles = argc - i;
	if (o->nprofiles == 0)
		return mp_usage_error(o, "no profile given");
	if (o->cmd == CMD_TEMPORARY && o->nprofiles != 1)
		return mp_usage_error(o, "temporary reads one lifetime profile "
		    "(got %d)", o->nprofiles);
	if (o->cmd == CMD_DIFF) {
		if (o->nprofiles != 2)
			return mp_usage_error(o, "diff needs two profiles, "
			    "BASE then PROFILE (got %d)", o->nprofiles);
		o->base = o->profiles[0];
		o->profiles++;
		o->nprofiles--;
	}
	return -1;
}

int main(int argc, char **argv) {
	if (argc < 2)
		return mp_usage_error(NULL, "no command given");
	const char *cmd = argv[1];
	if (strcmp(cmd, "-h") == 0 || strcmp(cmd, "--help") == 0 ||
	    strcmp(cmd, "help") == 0) {
		mp_usage(stdout);
		return MP_EXIT_OK;
	}
	mp_opts_t o;
	memset(&o, 0, sizeof(o));
	size_t i;
	for (i = 0; i < MP_NCMDS; i++)
		if (strcmp(cmd, mp_cmds[i].name) == 0)
			break;
	if (i == MP_NCMDS) {
		return mp_usage_error(NULL, "unknown command \"%s\"", cmd);
	}
	o.cmd = (mp_cmd_t)i;
	int r = mp_parse_args(argc - 1, argv + 1, &o);
	if (r >= 0)
		return r;
	return mp_cmd_run(&o);
}
