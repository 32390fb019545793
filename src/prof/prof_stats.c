/*
 * prof_stats.c: prof_stats (jemalloc 5.3's option): per size class, the
 * sampled objects live now and ever sampled, each a {req_sum, count}
 * pair of uint64_t, read through prof.stats.bins.<i>.{live,accum} and
 * prof.stats.lextents.<i>.{live,accum}.  They are counted on the
 * sampling slow path only (prof.c calls in from prof_sample_alloc and
 * the sampled free), so they are raw counts of samples, not estimates of
 * the heap; jemalloc counts the same.  req_sum sums the bytes asked for,
 * as jemalloc's: the sampling hook carries the request (alloc_opts_t's
 * req, set by the slow paths; the malloc fast path never samples) and
 * the sample keeps it (prof_sample_t's req_pad), so that the free takes
 * back what the allocation added.  This file uses nothing of prof.c
 * (prof.c calls it).
 */
#include "malloc_prof/internal/internal.h"

#include <errno.h>

/* ------------------------------------------------------------ prof_stats */

MP_READ_MOSTLY bool opt_prof_stats = false;

/* ------------------------------------------------------------ prof_stats */

typedef struct frag_stats_s {
	_Atomic uint64_t live_req, live_cnt, accum_req, accum_cnt;
} frag_stats_t;
static frag_stats_t frag_stats[SC_NSIZES];

/* jemalloc's prof_stats_t: the value of every prof.stats leaf. */
typedef struct frag_stats_val_s {
	uint64_t req_sum;
	uint64_t count;
} frag_stats_val_t;

void prof_stats_alloc(size_t req, size_t usize) {
	unsigned ind = sz_size2index(usize);
	if (ind >= SC_NSIZES)
		return;
	frag_stats_t *st = &frag_stats[ind];
	atomic_fetch_add_explicit(&st->live_req, req, memory_order_relaxed);
	atomic_fetch_add_explicit(&st->live_cnt, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&st->accum_req, req, memory_order_relaxed);
	atomic_fetch_add_explicit(&st->accum_cnt, 1, memory_order_relaxed);
}

void prof_stats_free(size_t req, size_t usize) {
	unsigned ind = sz_size2index(usize);
	if (ind >= SC_NSIZES)
		return;
	frag_stats_t *st = &frag_stats[ind];
	atomic_fetch_sub_explicit(&st->live_req, req, memory_order_relaxed);
	atomic_fetch_sub_explicit(&st->live_cnt, 1, memory_order_relaxed);
}

/* Indexes exist only with prof_stats on, as jemalloc's index functions
 * say (ENOENT otherwise). */
static bool frag_bin_bad_index(size_t i) {
	return !opt_prof_stats || i >= SC_NBINS;
}

static bool frag_lextent_bad_index(size_t i) {
	return !opt_prof_stats || i >= SC_NLEXTENTS;
}

/* r-: prof.stats.{bins,lextents}.<i>.{live,accum}; node->off: bit 0
 * accum, bit 1 lextents.  EPERM for a write, EINVAL for a wrong size. */
static int frag_ctl_stats(const ctl_node_t *node, const size_t *mib,
    size_t miblen, void *oldp, size_t *oldlenp, void *newp, size_t newlen) {
	if (!opt_prof_stats || miblen < 5)
		return ENOENT;
	if (newp != NULL || newlen != 0)
		return EPERM;
	bool accum = (node->off & 1) != 0, lext = (node->off & 2) != 0;
	size_t i = mib[3];
	if (i >= (lext ? SC_NLEXTENTS : SC_NBINS))
		return EINVAL;
	const frag_stats_t *st = &frag_stats[lext ? SC_NBINS + i : i];
	frag_stats_val_t v;
	v.req_sum = atomic_load_explicit(accum ? &st->accum_req :
	    &st->live_req, memory_order_relaxed);
	v.count = atomic_load_explicit(accum ? &st->accum_cnt :
	    &st->live_cnt, memory_order_relaxed);
	return ctl_read(oldp, oldlenp, &v, sizeof(v));
}

#define FRAG_STATS_LEAF(n, o)						\
	{ .name = (n), .handler = frag_ctl_stats, .off = (o),		\
	  .prof = CTL_PROF_STARTED }

static const ctl_node_t frag_bins_leaves[] = {
	FRAG_STATS_LEAF("live", 0), FRAG_STATS_LEAF("accum", 1),
};
static const ctl_node_t frag_lext_leaves[] = {
	FRAG_STATS_LEAF("live", 2), FRAG_STATS_LEAF("accum", 3),
};
static const ctl_node_t frag_bins_i[] = {
	{ .name = "", CTL_CHILDREN(frag_bins_leaves) },
};
static const ctl_node_t frag_lext_i[] = {
	{ .name = "", CTL_CHILDREN(frag_lext_leaves) },
};

const ctl_node_t prof_frag_ctl_stats[PROF_FRAG_NSTATS] = {
	{ .name = "bins", .kind = CTL_INDEXED, .bad_index = frag_bin_bad_index,
	  CTL_CHILDREN(frag_bins_i) },
	{ .name = "lextents", .kind = CTL_INDEXED,
	  .bad_index = frag_lextent_bad_index, CTL_CHILDREN(frag_lext_i) },
};
