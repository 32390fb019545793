/*
 * test/unit/tcache_remote.h - what the tests of mid-class cache bins grown
 * by cross-thread traffic share (tcache_grow_mid.c, tcache_grown_fill.c):
 * a swing of the main thread's bin of MID-byte blocks through SWING
 * blocks, each checked before its free (a block handed out twice would be
 * overwritten), with optional traffic in another class between its
 * allocations and frees; and a handoff of HANDOFF blocks to a thread that
 * frees them, whose cache's flush at exit returns them to the main
 * thread's slabs (remote frees of the class).  Define MID, SWING and
 * HANDOFF, and include it after test_util.h and internal.h.
 */
#ifndef TEST_UNIT_TCACHE_REMOTE_H
#define TEST_UNIT_TCACHE_REMOTE_H

#include <pthread.h>

/* other > 0: SWING * MID bytes in blocks of `other` bytes between the
 * allocations and the frees, as one class among many sees it. */
static void swing(unsigned round, size_t other) {
	unsigned char *v[SWING];
	for (unsigned i = 0; i < SWING; i++) {
		v[i] = LAUNDER(malloc(MID));
		assert_non_null(v[i]);
		memset(v[i], (int)((round + i) % 251), MID);
	}
	for (size_t i = 0; other != 0 && i < SWING * MID / other; i++)
		free(LAUNDER(malloc(other)));
	for (unsigned i = 0; i < SWING; i++) {
		unsigned char want = (unsigned char)((round + i) % 251);
		MP_ASSERT(v[i][0] == want && v[i][MID - 1] == want,
		    "block %u of round %u at %p overwritten", i, round,
		    (void *)v[i]);
		free(v[i]);
	}
}

static void *free_them(void *arg) {
	void **v = arg;
	for (unsigned i = 0; i < HANDOFF; i++)
		free(v[i]);
	return NULL;
}

static void handoff(void) {
	void *v[HANDOFF];
	for (unsigned i = 0; i < HANDOFF; i++) {
		v[i] = LAUNDER(malloc(MID));
		assert_non_null(v[i]);
	}
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, free_them, v), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
}

#endif
