/*
 * test/bin/lifetimes_age.c - the program test/bin/lifetimes_age.sh
 * profiles: live objects of known ages at the lifetime profile's dump.
 *
 *   old_site: 30 x 1000 bytes, kept across a 1.1 s sleep
 *   new_site: 20 x 1000 bytes, allocated just before the dump
 *
 * `lifetimes_age LIFE` writes the lifetime profile (prof.lifetimes.dump)
 * to LIFE and prints "young_ms=N": how long new_site's first allocation
 * was before the end of the dump (CLOCK_MONOTONIC, the samples' clock
 * with prof_time_resolution:high), so that the script knows whether the
 * new objects can be older than 1 s on a stalled machine.
 * `--config` prints MALLOC_PROF_CONFIG_PROF (1/0).
 */
#define MALLOC_PROF_MANGLE
#include <malloc_prof.h>

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define NOLD 30
#define NNEW 20

void old_site(void **objs);
void new_site(void **objs);

/* volatile: the size is not known to the compiler. */
static volatile size_t obj_size = 1000;

__attribute__((noinline, used, visibility("default")))
void old_site(void **objs) {
	for (int i = 0; i < NOLD; i++)
		objs[i] = malloc(obj_size);
	__asm__ volatile("" : : : "memory");
}

__attribute__((noinline, used, visibility("default")))
void new_site(void **objs) {
	for (int i = 0; i < NNEW; i++)
		objs[i] = malloc(obj_size);
	__asm__ volatile("" : : : "memory");
}

static uint64_t now_ns(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void *olds[NOLD], *news[NNEW];

int main(int argc, char **argv) {
	if (argc == 2 && strcmp(argv[1], "--config") == 0) {
		printf("%d\n", MALLOC_PROF_CONFIG_PROF);
		return 0;
	}
	if (argc != 2) {
		fprintf(stderr, "usage: lifetimes_age LIFE_FILE\n");
		return 2;
	}
	old_site(olds);
	struct timespec ts = {1, 100000000};
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
	uint64_t t0 = now_ns();
	new_site(news);
	const char *life = argv[1];
	if (mallctl("prof.lifetimes.dump", NULL, NULL, (void *)&life,
	    sizeof(life)) != 0) {
		fprintf(stderr, "lifetimes_age: cannot write the profile\n");
		return 1;
	}
	printf("young_ms=%llu\n", (unsigned long long)((now_ns() - t0) /
	    1000000u));
	for (int i = 0; i < NOLD; i++)
		free(olds[i]);
	for (int i = 0; i < NNEW; i++)
		free(news[i]);
	return 0;
}
