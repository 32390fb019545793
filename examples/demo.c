/*
 * demo.c: allocate and free a mix of sizes in two threads, then print the
 * allocator's statistics.
 *
 *   cc demo.c $(pkg-config --cflags --libs malloc_prof) -lpthread
 *
 * MALLOC_PROF_MANGLE lets the plain names (malloc, malloc_stats_print)
 * reach the library even when it was built with --with-prefix.
 */
#define MALLOC_PROF_MANGLE
#include <malloc_prof.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NTHREADS 2
#define NROUNDS 2000
#define NLIVE 64

struct worker {
	unsigned seed;
	size_t bytes;   /* total bytes requested */
	size_t blocks;  /* total blocks allocated */
	int failed;
};

/* Small, medium and large requests, roughly 8:2:1. */
static size_t pick_size(unsigned *seed)
{
	unsigned r = (unsigned)rand_r(seed);

	switch (r % 11) {
	case 0: case 1: case 2: case 3: case 4: case 5: case 6: case 7:
		return 1 + r % 512;
	case 8: case 9:
		return 1024 + r % (32 * 1024);
	default:
		return 64 * 1024 + r % (1024 * 1024);
	}
}

static void *work(void *arg)
{
	struct worker *w = arg;
	void *live[NLIVE] = { NULL };

	for (int round = 0; round < NROUNDS; round++) {
		int slot = rand_r(&w->seed) % NLIVE;
		size_t size = pick_size(&w->seed);
		void *p;

		free(live[slot]);
		if (round % 7 == 0)
			p = calloc(1, size);
		else
			p = malloc(size);
		if (p == NULL) {
			w->failed = 1;
			break;
		}
		memset(p, round & 0xff, size);
		live[slot] = p;
		w->bytes += size;
		w->blocks++;
	}
	for (int i = 0; i < NLIVE; i++)
		free(live[i]);
	return NULL;
}

int main(void)
{
	pthread_t tid[NTHREADS];
	struct worker w[NTHREADS];
	size_t bytes = 0, blocks = 0;

	for (int i = 0; i < NTHREADS; i++) {
		w[i] = (struct worker){ .seed = 12345u + (unsigned)i };
		if (pthread_create(&tid[i], NULL, work, &w[i]) != 0) {
			fprintf(stderr, "demo: pthread_create failed\n");
			return 1;
		}
	}
	for (int i = 0; i < NTHREADS; i++) {
		pthread_join(tid[i], NULL);
		if (w[i].failed) {
			fprintf(stderr, "demo: allocation failed\n");
			return 1;
		}
		bytes += w[i].bytes;
		blocks += w[i].blocks;
	}

	fflush(stdout);
	malloc_stats_print(NULL, NULL, NULL);
	printf("demo: allocated %zu bytes in %zu blocks; stats above\n",
	    bytes, blocks);
	return 0;
}
