/*
 * test/bin/labels.c - the program test/bin/labels.sh profiles: two
 * threads run one function under labels (thread.prof.label) while the
 * main thread, unlabeled, allocates too.
 *
 *   thread "alpha": tenant=alpha, 40 x 1000 bytes at labels_site; then
 *                   phase=two added, 40 more from the same call
 *   thread "beta":  tenant=beta, 40 x 1000 bytes at labels_site
 *   main:           40 x 1000 bytes at labels_site, no labels
 *
 * (usable size 1024: 40960 bytes per batch).  `labels PPROF HEAP`
 * writes a pprof dump to PPROF and a heap_v2 dump to HEAP with
 * everything live; `--config` prints MALLOC_PROF_CONFIG_PROF (1/0).
 * Linked -no-install: the file in the dumps' memory map is the program
 * that ran.
 */
#define MALLOC_PROF_MANGLE
#include <malloc_prof.h>

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define NOBJ 40

void labels_site(void **objs);

/* volatile: the size is not known to the compiler. */
static volatile size_t obj_size = 1000;

__attribute__((noinline, used, visibility("default")))
void labels_site(void **objs) {
	for (int i = 0; i < NOBJ; i++)
		objs[i] = malloc(obj_size);
	__asm__ volatile("" : : : "memory");
}

typedef struct {
	const char *name;
	volatile int nrounds;           /* no unrolling: one call site */
	const char *spec[2];
	void *objs[2][NOBJ];
	int err;
} worker_t;

static void *worker(void *arg) {
	worker_t *w = arg;
	mallctl("thread.prof.name", NULL, NULL, (void *)&w->name,
	    sizeof(w->name));
	for (int r = 0; r < w->nrounds; r++) {
		if (mallctl("thread.prof.label", NULL, NULL,
		    (void *)&w->spec[r], sizeof(w->spec[r])) != 0)
			w->err = 1;
		labels_site(w->objs[r]);
	}
	return NULL;
}

static int dump(const char *format, const char *path) {
	if (mallctl("prof.format", NULL, NULL, (void *)&format,
	    sizeof(format)) != 0 ||
	    mallctl("prof.dump", NULL, NULL, (void *)&path, sizeof(path)) != 0) {
		fprintf(stderr, "labels: cannot write %s\n", path);
		return 1;
	}
	return 0;
}

static worker_t alpha = {"alpha", 2, {"tenant=alpha", "phase=two"}, {{0}},
    0};
static worker_t beta = {"beta", 1, {"tenant=beta", NULL}, {{0}}, 0};
static void *main_objs[NOBJ];

int main(int argc, char **argv) {
	if (argc == 2 && strcmp(argv[1], "--config") == 0) {
		printf("%d\n", MALLOC_PROF_CONFIG_PROF);
		return 0;
	}
	if (argc != 3) {
		fprintf(stderr, "usage: labels PPROF_FILE HEAP_V2_FILE\n");
		return 2;
	}
	pthread_t t;
	if (pthread_create(&t, NULL, worker, &alpha) != 0 ||
	    pthread_join(t, NULL) != 0 ||
	    pthread_create(&t, NULL, worker, &beta) != 0 ||
	    pthread_join(t, NULL) != 0 || alpha.err || beta.err) {
		fprintf(stderr, "labels: the threads failed\n");
		return 1;
	}
	labels_site(main_objs);
	if (dump("pprof", argv[1]) || dump("heap_v2", argv[2]))
		return 1;
	for (int i = 0; i < NOBJ; i++) {
		free(alpha.objs[0][i]);
		free(alpha.objs[1][i]);
		free(beta.objs[0][i]);
		free(main_objs[i]);
	}
	return 0;
}
