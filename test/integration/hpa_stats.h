/*
 * test/integration/hpa_stats.h - what the hpa tests (hpa, hpa_sec,
 * hpa_deferred, hpa_arenas) read of the allocator: the calling thread's
 * arena, one stats.arenas.<i>.* value after an epoch, and whether the
 * kernel has transparent huge pages at all.
 */
#ifndef MP_TEST_HPA_STATS_H
#define MP_TEST_HPA_STATS_H

#include "../test_util.h"

static inline unsigned hpa_arena_ind(void) {
	unsigned a = 0;
	MALLCTL_READ("thread.arena", a);
	return a;
}

/* stats.arenas.<a>.<name>, of size_t or uint64_t (v's size). */
static inline void hpa_stat_read(unsigned a, const char *name, void *v,
    size_t size) {
	size_t sz = size;
	mp_epoch();
	int r = mallctl_fmt(v, &sz, NULL, 0, "stats.arenas.%u.%s", a, name);
	MP_ASSERT(r == 0 && sz == size, "stats.arenas.%u.%s: %d", a, name,
	    r);
}

static inline size_t hpa_stat_size(unsigned a, const char *name) {
	size_t v = 0;
	hpa_stat_read(a, name, &v, sizeof(v));
	return v;
}

static inline uint64_t hpa_stat_u64(unsigned a, const char *name) {
	uint64_t v = 0;
	hpa_stat_read(a, name, &v, sizeof(v));
	return v;
}

static inline bool hpa_thp_available(void) {
	return access("/sys/kernel/mm/transparent_hugepage/enabled", F_OK) ==
	    0;
}

#endif /* MP_TEST_HPA_STATS_H */
