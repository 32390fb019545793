/*
 * demo.c: a small server-like program with a leak, profiled by
 * libmalloc_prof's heap profiler.
 *
 * Three worker threads handle requests: parse_request() and
 * render_response() allocate and free, cache_insert() keeps every entry
 * it makes and never frees them - the leak.  The program turns profiling
 * on by itself with its malloc_conf symbol (see below), writes one heap
 * profile with mallctl("prof.dump"), prints the first lines of it and the
 * allocator's totals, and exits: the profiler then writes the final
 * profile and prints its leak summary on standard error.
 *
 *   mkdir -p build/demo
 *   cc -O2 -g -fno-omit-frame-pointer examples/demo.c \
 *       $(pkg-config --cflags --libs malloc_prof) -lpthread -o build/demo/demo
 *   ./build/demo/demo                 (from the directory holding build/)
 *   jeprof --text --show_bytes build/demo/demo build/demo/jeprof.*.f.heap
 *
 * -fno-omit-frame-pointer: the profiler walks frame pointers, so the
 * program needs them for deep stacks.  MALLOC_PROF_MANGLE lets the plain
 * names (malloc, mallctl, malloc_conf, ...) reach the library even when it
 * was built with --with-prefix (malloc_conf is then mp_malloc_conf).
 */
#define MALLOC_PROF_MANGLE
#include <malloc_prof.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/*
 * Options compiled into the program (the environment variable, MALLOC_CONF
 * or MP_MALLOC_CONF, still overrides them): profile, report leaks at exit
 * (prof_leak implies the final dump), one sample per 16 KiB allocated on
 * average, dumps named build/demo/jeprof.<pid>.<seq>.<kind>.heap.
 */
const char *malloc_conf = "prof:true,prof_leak:true,lg_prof_sample:14,"
    "prof_prefix:build/demo/jeprof";

#define NWORKERS 3
#define NREQUESTS 1000

struct entry {
	struct entry *next;
	unsigned id;
	char payload[1000];
};

/* The cache: entries are added and never removed. */
static struct entry *cache;
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;

/* A request's text, parsed into a scratch buffer that is freed. */
__attribute__((noinline)) static size_t parse_request(unsigned id)
{
	char *buf = malloc(4096);

	if (buf == NULL)
		return 0;
	int n = snprintf(buf, 4096, "GET /item/%u HTTP/1.1", id);
	size_t len = n > 0 ? (size_t)n : 0;
	free(buf);
	return len;
}

/* The response, built and sent (freed). */
__attribute__((noinline)) static size_t render_response(unsigned id)
{
	char *page = calloc(1, 16384);

	if (page == NULL)
		return 0;
	memset(page, 'x', 1000 + id % 8192);
	size_t len = strlen(page);
	free(page);
	return len;
}

/* The leak: every response is cached and the cache is never trimmed. */
__attribute__((noinline)) static void cache_insert(unsigned id)
{
	struct entry *e = malloc(sizeof(*e));

	if (e == NULL)
		return;
	e->id = id;
	memset(e->payload, 'c', sizeof(e->payload));
	pthread_mutex_lock(&cache_lock);
	e->next = cache;
	cache = e;
	pthread_mutex_unlock(&cache_lock);
}

static void *worker(void *arg)
{
	unsigned first = (unsigned)(size_t)arg * NREQUESTS;
	char name[16];
	const char *namep = name;

	/* The name shows on this thread's line in the profile. */
	snprintf(name, sizeof(name), "worker-%u", first / NREQUESTS);
	mallctl("thread.prof.name", NULL, NULL, (void *)&namep,
	    sizeof(namep));
	for (unsigned id = first; id < first + NREQUESTS; id++) {
		parse_request(id);
		render_response(id);
		cache_insert(id);
	}
	return NULL;
}

/* The name of this process's first prof.dump dump, <prefix>.<pid>.<seq>.m0.heap. */
static int find_dump(char *path, size_t size)
{
	for (unsigned seq = 0; seq < 16; seq++) {
		snprintf(path, size, "build/demo/jeprof.%ld.%u.m0.heap",
		    (long)getpid(), seq);
		if (access(path, R_OK) == 0)
			return 0;
	}
	return -1;
}

static void print_head(const char *path, int nlines)
{
	FILE *f = fopen(path, "r");
	char line[512];

	if (f == NULL) {
		printf("demo: cannot open %s: %s\n", path, strerror(errno));
		return;
	}
	/* Up to the blank line before MAPPED_LIBRARIES. */
	for (int i = 0; i < nlines && fgets(line, sizeof(line), f) != NULL &&
	    line[0] != '\n'; i++) {
		size_t len = strlen(line);
		/* Long stacks are cut for the screen. */
		if (len > 100)
			strcpy(line + 96, " ...\n");
		printf("  %s", line);
	}
	printf("  ...\n");
	fclose(f);
}

/* malloc_stats_print's general section: keep its "Allocated:" line. */
static void stats_cb(void *opaque, const char *s)
{
	char *buf = opaque;
	size_t len = strlen(buf);

	snprintf(buf + len, 4096 - len, "%s", s);
}

int main(void)
{
	pthread_t tid[NWORKERS];
	static char stats[4096];

	for (size_t i = 0; i < NWORKERS; i++) {
		if (pthread_create(&tid[i], NULL, worker, (void *)i) != 0) {
			fprintf(stderr, "demo: pthread_create failed\n");
			return 1;
		}
	}
	for (size_t i = 0; i < NWORKERS; i++)
		pthread_join(tid[i], NULL);
	printf("demo: %d threads handled %d requests; the cache kept all of "
	    "them (%zu bytes each)\n", NWORKERS, NWORKERS * NREQUESTS,
	    sizeof(struct entry));

	/* One heap profile now, to the next automatic name. */
	int err = mallctl("prof.dump", NULL, NULL, NULL, 0);
	char path[256];
	if (err != 0) {
		printf("demo: prof.dump failed: %s (see the message above)\n",
		    strerror(err));
	} else if (find_dump(path, sizeof(path)) == 0) {
		printf("demo: prof.dump wrote %s; its first lines:\n", path);
		fflush(stdout);
		print_head(path, 12);
	}

	fflush(stdout);
	malloc_stats_print(stats_cb, stats, "mabl");
	char *line = strstr(stats, "Allocated:");
	if (line != NULL) {
		line[strcspn(line, "\n")] = '\0';
		printf("demo: allocator totals: %s\n", line);
	}
	if (err == 0)
		printf("demo: exiting; the profiler writes its final dump and "
		    "the leak summary\n");
	fflush(stdout);
	return 0;
}
