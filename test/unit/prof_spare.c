/*
 * test/unit/prof_spare.c - what the sixth round of per-sample savings
 * (brief pcost6) must keep exact: a tctx recycled through its shard's
 * spare (prof.c) starts from zero counts, however much the stack it
 * counted before had accumulated; the live large samples of the lifetime
 * profile, a list linked both ways (prof.h), stay consistent whatever
 * order they are freed in; and a sampled small region freed by the
 * shortcut for untagged pages (malloc.c, dalloc_small_sampled) is still
 * reported when freed twice, or freed by an interior pointer; and the
 * walk memo (prof_sys.c) answers for a caller that keeps data in rbp.
 *
 * prof_spare.conf: prof:true,lg_prof_sample:0 (every allocation is a
 * sample).  No check depends on the machine's speed.
 */
#include "../test_util.h"

#include "malloc_prof/internal/internal.h"

#include <sys/wait.h>

#define DEPTHS 100      /* distinct stacks, over 64 gctx shards */
#define KEEP 5          /* live samples a stack keeps */
#define B_SIZE 448      /* a small class of its own in this test */

static int setup(void **state) {
	(void)state;
	return malloc_init() || tsd_fetch() == NULL ? -1 : 0;
}

static int teardown(void **state) {
	(void)state;
	prof_reset(opt_lg_prof_sample);
	return 0;
}

/* A stack of its own for each depth: malloc and free (leaf 0), or keep
 * KEEP blocks of B_SIZE in out (leaf 1). */
static MP_NOINLINE void at_depth(unsigned d, int leaf, void **out) {
	if (d > 0) {
		at_depth(d - 1, leaf, out);
		__asm__ volatile("" ::: "memory");      /* no tail call */
		return;
	}
	if (leaf == 0) {
		free(LAUNDER(malloc(64)));
	} else {
		for (unsigned i = 0; i < KEEP; i++)
			out[i] = LAUNDER(malloc(B_SIZE));
	}
}

typedef struct {
	size_t found, bad;
	uint64_t objs, bytes;      /* of every live sample: curobjs, curbytes */
} visit_t;

static void visit_gctx(prof_gctx_t *g, void *arg) {
	visit_t *v = arg;
	for (prof_tctx_t *t = g->tctxs; t != NULL; t = t->next) {
		v->objs += t->cnt.curobjs;
		v->bytes += t->cnt.curbytes;
		if (t->cnt.curobjs != KEEP ||
		    t->cnt.curbytes != (uint64_t)KEEP * B_SIZE)
			continue;
		/* One of leaf 1's: it sampled exactly its KEEP blocks. */
		v->found++;
		if (t->cnt.accumobjs != KEEP ||
		    t->cnt.accumbytes != (uint64_t)KEEP * B_SIZE ||
		    t->nsamples != KEEP)
			v->bad++;
	}
}

static void visit_all(visit_t *v) {
	memset(v, 0, sizeof(*v));
	for (unsigned i = 0; i < prof_nshards; i++) {
		prof_shard_lock(i);
		prof_gctx_foreach_locked_shard(i, visit_gctx, v);
		prof_shard_unlock(i);
	}
}

/* Stacks that made and freed a tctx at every sample (leaving spares in
 * most shards, with accumulated counts: prof_accum is off, so those do
 * not keep a tctx), then new stacks that keep samples: each of their
 * tctxs counts exactly its own. */
static void test_spare_tctx_counts(void **state) {
	(void)state;
	if (!config_prof || !opt_prof || opt_prof_accum)
		MP_SKIP("profiling not built in / not on, or prof_accum");
	for (int round = 0; round < 3; round++) {
		for (unsigned d = 0; d < DEPTHS; d++)
			at_depth(d, 0, NULL);
	}
	static void *kept[DEPTHS][KEEP];
	visit_t before;
	visit_all(&before);
	for (unsigned d = 0; d < DEPTHS; d++)
		at_depth(d, 1, kept[d]);
	visit_t after;
	visit_all(&after);
	assert_int_equal(after.found, DEPTHS);
	assert_int_equal(after.bad, 0);
	assert_int_equal(after.objs - before.objs, (uint64_t)DEPTHS * KEEP);
	assert_int_equal(after.bytes - before.bytes,
	    (uint64_t)DEPTHS * KEEP * B_SIZE);
	for (unsigned d = 0; d < DEPTHS; d++)
		mp_free_all(kept[d], KEEP);
	visit_all(&after);
	assert_int_equal(after.found, 0);
	assert_int_equal(after.objs, before.objs);
}

/* Every shard's list of live large samples: linked both ways, as long
 * as its count, each sample large and live. */
static size_t large_lists_check(void) {
	size_t total = 0;
	for (unsigned i = 0; i < prof_nshards; i++) {
		prof_shard_lock(i);
		prof_life_part_t *pt = prof_life_part(i);
		size_t n = 0;
		const prof_sample_t *prev = NULL;
		for (const prof_sample_t *s = pt->large; s != NULL;
		    s = s->next) {
			assert_ptr_equal(s->prev, prev);
			assert_true(s->usize > SC_SMALL_MAXCLASS);
			prev = s;
			n++;
		}
		assert_int_equal(n, pt->nlarge);
		total += n;
		prof_shard_unlock(i);
	}
	return total;
}

#define NLARGE 64

/* Freed from the middle, then the lists' heads, then the rest: every
 * unlink leaves the lists whole, and each sample leaves its list. */
static void test_large_list(void **state) {
	(void)state;
	if (!config_prof || !opt_prof)
		MP_SKIP("profiling not built in / not on");
	size_t base = large_lists_check();
	void *p[NLARGE];
	for (unsigned i = 0; i < NLARGE; i++)
		p[i] = LAUNDER(malloc(SC_SMALL_MAXCLASS + 1 + i * 4096));
	assert_int_equal(large_lists_check(), base + NLARGE);
	size_t live = NLARGE;
	for (unsigned i = 1; i < NLARGE; i += 3) {
		free(p[i]);
		p[i] = NULL;
		live--;
	}
	assert_int_equal(large_lists_check(), base + live);
	/* The newest first: at the heads of their lists. */
	for (unsigned i = NLARGE; i-- > 0;) {
		if (p[i] == NULL || i % 2 == 0)
			continue;
		free(p[i]);
		p[i] = NULL;
		live--;
	}
	assert_int_equal(large_lists_check(), base + live);
	mp_free_all(p, NLARGE);
	assert_int_equal(large_lists_check(), base);
}

/* keep holds the slab (it is not retired between the frees). */
static void small_free_twice(void *arg) {
	(void)arg;
	void *keep = LAUNDER(malloc(64));
	void *p = LAUNDER(malloc(64));
	free(p);
	free(LAUNDER(p));
	free(keep);
}

static void small_free_interior(void *arg) {
	(void)arg;
	char *p = LAUNDER(malloc(64));
	free(LAUNDER(p + 16));
}

/* Sampled regions (every one, at lg_prof_sample:0) are freed through
 * the shortcut for untagged pages: a double free and an interior
 * pointer are reported as before (debug builds: and abort). */
static void test_sampled_free_misuse(void **state) {
	(void)state;
	if (!config_prof || !opt_prof)
		MP_SKIP("profiling not built in / not on");
	/* The region is a sample: it sits in the profiler's slabs. */
	void *q = LAUNDER(malloc(64));
	prof_sample_info_t info;
	assert_false(prof_sample_info(q, &info));
	free(q);
	char out[1024];
	mp_child_stderr(small_free_twice, NULL, out, sizeof(out));
	assert_non_null(strstr(out, "free(): double free of"));
	mp_child_stderr(small_free_interior, NULL, out, sizeof(out));
	assert_non_null(strstr(out, "free(): interior pointer"));
}

#if defined(__x86_64__)
/* prof_spare_call_with_rbp(v, fn, n): fn(n) with rbp = v, as a caller
 * built without frame pointers may keep data in rbp; its call-frame
 * information says where it saved its caller's rbp. */
__asm__(".text\n"
    ".p2align 4\n"
    ".globl prof_spare_call_with_rbp\n"
    ".hidden prof_spare_call_with_rbp\n"
    ".type prof_spare_call_with_rbp, @function\n"
    "prof_spare_call_with_rbp:\n"
    ".cfi_startproc\n"
    "pushq %rbp\n"
    ".cfi_adjust_cfa_offset 8\n"
    ".cfi_rel_offset %rbp, 0\n"
    "movq %rdi, %rbp\n"
    "movq %rdx, %rdi\n"
    "callq *%rsi\n"
    "popq %rbp\n"
    ".cfi_adjust_cfa_offset -8\n"
    ".cfi_restore %rbp\n"
    "ret\n"
    ".cfi_endproc\n"
    ".size prof_spare_call_with_rbp, .-prof_spare_call_with_rbp\n");
__attribute__((visibility("hidden"))) void *prof_spare_call_with_rbp(
    uintptr_t v, void *(*fn)(size_t), size_t n);
#endif

#define NRBP 50
#define RBP_SIZE 320    /* a class of its own in this test */

typedef struct {
	size_t found;
} rbp_visit_t;

static void visit_rbp(prof_gctx_t *g, void *arg) {
	rbp_visit_t *v = arg;
	for (prof_tctx_t *t = g->tctxs; t != NULL; t = t->next) {
		if (t->cnt.curobjs == NRBP &&
		    t->cnt.curbytes == (uint64_t)NRBP * RBP_SIZE)
			v->found++;
	}
}

/* A walk through a caller that keeps data in rbp, different at every
 * call (prof_unwind:auto leaves the frame pointers there for its
 * call-frame information, which restores rbp from the stack): the memo
 * answers from the second walk on (rbp's old value is not part of the
 * answer), and every sample has the same stack as the first, fresh,
 * walk. */
static void test_memo_rbp_data(void **state) {
	(void)state;
#if defined(__x86_64__)
	if (!config_prof || !opt_prof || opt_prof_unwind != PROF_UNWIND_AUTO)
		MP_SKIP("profiling not built in / not on, or prof_unwind "
		    "not auto");
	tsd_t *tsd = tsd_fetch();
	void *p[NRBP];
	uint64_t h0 = 0;
	for (unsigned i = 0; i < NRBP; i++) {
		p[i] = prof_spare_call_with_rbp(0x5a5a0000u + i * 8,
		    malloc, RBP_SIZE);
		assert_non_null(p[i]);
		if (i == 0) {
			assert_non_null(tsd->prof_tdata);
			h0 = prof_bt_memo_hits(tsd->prof_tdata->bt_memo);
		}
	}
	uint64_t h1 = prof_bt_memo_hits(tsd->prof_tdata->bt_memo);
	assert_true(h1 - h0 >= NRBP - 2);
	rbp_visit_t v = {0};
	for (unsigned i = 0; i < prof_nshards; i++) {
		prof_shard_lock(i);
		prof_gctx_foreach_locked_shard(i, visit_rbp, &v);
		prof_shard_unlock(i);
	}
	assert_int_equal(v.found, 1);
	mp_free_all(p, NRBP);
#else
	MP_SKIP("the walk memo's frame-pointer case is x86-64's");
#endif
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_spare_tctx_counts, teardown),
		cmocka_unit_test(test_large_list),
		cmocka_unit_test(test_sampled_free_misuse),
		cmocka_unit_test(test_memo_rbp_data),
	};
	return cmocka_run_group_tests(tests, setup, NULL);
}
