/*
 * hook.c: jemalloc's experimental hooks (experimental.hooks.install,
 * .remove and .safety_check_abort, experimental.thread.activity_callback):
 * up to HOOK_MAX sets of alloc / dalloc / expand callbacks, called with
 * jemalloc's hook types and raw arguments by the public functions of
 * malloc.c, the safety-check failure path, and each thread's activity
 * callback.
 *
 * The fast paths stay as they are: no hook test on them.  A thread runs
 * with its fast paths off while any hook is installed (tsd.c's
 * tsd_update_fast asks hook_active), so that every call reaches a slow
 * path, where the hooks are called.  A thread sees an installation or a
 * removal by another thread at its next slow-path allocation or free or
 * its next thread event (hook_thread_check): until then its fast-path
 * calls are not reported.  The installing thread and threads started
 * later see it at once.  jemalloc also forces every thread off its fast
 * path, through a state it writes into the other threads; here no thread
 * writes another's state.
 *
 * A hook that allocates or frees is not called again for that (jemalloc's
 * reentrancy guard), and the public functions built on others (realloc of
 * NULL on malloc, mallocx on malloc...) report once, under their own type.
 */
#include "malloc_prof/internal/internal.h"

/* One slot per installable set, claimed and released by compare-and-
 * swap of its state (no lock: nothing to hold across fork).  The fields
 * are atomics so that a slot can be reused while another thread reads
 * it: a reader copies a live slot between two reads of its sequence
 * number and keeps the copy only if the number is even and unchanged. */
enum { HOOK_FREE = 0, HOOK_WRITING, HOOK_LIVE };
typedef struct hook_slot_s {
	_Atomic unsigned state;
	_Atomic unsigned seq;            /* odd while being written */
	_Atomic(hook_alloc_fn *) alloc_hook;
	_Atomic(hook_dalloc_fn *) dalloc_hook;
	_Atomic(hook_expand_fn *) expand_hook;
	_Atomic(void *) extra;
} hook_slot_t;

static hook_slot_t hook_slots[HOOK_MAX];
/* Installed sets; read relaxed by tsd_update_fast and the slow paths. */
_Atomic unsigned hook_nactive;
/* Changes with each install and remove, so that threads recompute
 * (hook_thread_check, inline in alloc.h). */
_Atomic unsigned hook_gen;
__thread unsigned hook_gen_seen __attribute__((tls_model("initial-exec")));
/* A hook of this thread is running: calls it makes are not reported. */
static __thread bool hook_in
    __attribute__((tls_model("initial-exec")));

static void (*_Atomic hook_safety_abort)(const char *);
static __thread hook_activity_thunk_t hook_activity
    __attribute__((tls_model("initial-exec")));

void *hook_install(const hook_set_t *set) {
	hook_slot_t *slot = NULL;
	for (unsigned i = 0; i < HOOK_MAX && slot == NULL; i++) {
		unsigned expect = HOOK_FREE;
		if (atomic_compare_exchange_strong(&hook_slots[i].state,
		    &expect, HOOK_WRITING))
			slot = &hook_slots[i];
	}
	if (slot == NULL)
		return NULL;
	atomic_fetch_add_explicit(&slot->seq, 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
	atomic_store_explicit(&slot->alloc_hook, set->alloc_hook,
	    memory_order_relaxed);
	atomic_store_explicit(&slot->dalloc_hook, set->dalloc_hook,
	    memory_order_relaxed);
	atomic_store_explicit(&slot->expand_hook, set->expand_hook,
	    memory_order_relaxed);
	atomic_store_explicit(&slot->extra, set->extra, memory_order_relaxed);
	atomic_fetch_add_explicit(&slot->seq, 1, memory_order_release);
	atomic_store_explicit(&slot->state, HOOK_LIVE, memory_order_release);
	atomic_fetch_add(&hook_nactive, 1);
	atomic_fetch_add(&hook_gen, 1);
	realloc_shortcut_update();
	hook_thread_check(tsd_fetch());
	return slot;
}

bool hook_remove(void *handle) {
	/* Compared as integers: the handle may point anywhere. */
	uintptr_t off = (uintptr_t)handle - (uintptr_t)hook_slots;
	if (off >= sizeof(hook_slots) || off % sizeof(hook_slot_t) != 0)
		return true;
	hook_slot_t *slot = &hook_slots[off / sizeof(hook_slot_t)];
	unsigned expect = HOOK_LIVE;
	if (!atomic_compare_exchange_strong(&slot->state, &expect, HOOK_FREE))
		return true;
	atomic_fetch_sub(&hook_nactive, 1);
	atomic_fetch_add(&hook_gen, 1);
	realloc_shortcut_update();
	hook_thread_check(tsd_fetch());
	return false;
}

void hook_thread_check_slow(tsd_t *tsd) {
	if (tsd->state != TSD_NOMINAL)
		return;
	hook_gen_seen = atomic_load_explicit(&hook_gen, memory_order_relaxed);
	tsd_fast_recompute(tsd);
}

/* A consistent copy of slot i; false if it is not in use. */
static bool hook_read(unsigned i, hook_set_t *out) {
	hook_slot_t *slot = &hook_slots[i];
	for (;;) {
		if (atomic_load_explicit(&slot->state, memory_order_acquire) !=
		    HOOK_LIVE)
			return false;
		unsigned seq = atomic_load_explicit(&slot->seq,
		    memory_order_acquire);
		if (seq & 1)
			continue;
		out->alloc_hook = atomic_load_explicit(&slot->alloc_hook,
		    memory_order_relaxed);
		out->dalloc_hook = atomic_load_explicit(&slot->dalloc_hook,
		    memory_order_relaxed);
		out->expand_hook = atomic_load_explicit(&slot->expand_hook,
		    memory_order_relaxed);
		out->extra = atomic_load_explicit(&slot->extra,
		    memory_order_relaxed);
		atomic_thread_fence(memory_order_acquire);
		if (atomic_load_explicit(&slot->seq, memory_order_relaxed) ==
		    seq)
			return true;
	}
}

bool hook_enter(void) {
	if (hook_in)
		return false;
	hook_in = true;
	return true;
}

void hook_exit(void) {
	hook_in = false;
}

void hook_call_alloc(int type, void *result, uintptr_t result_raw,
    uintptr_t args[3]) {
	if (!hook_enter())
		return;
	hook_set_t h;
	for (unsigned i = 0; i < HOOK_MAX; i++) {
		if (hook_read(i, &h) && h.alloc_hook != NULL)
			h.alloc_hook(h.extra, type, result, result_raw, args);
	}
	hook_exit();
}

void hook_call_dalloc(int type, void *address, uintptr_t args[3]) {
	if (!hook_enter())
		return;
	hook_set_t h;
	for (unsigned i = 0; i < HOOK_MAX; i++) {
		if (hook_read(i, &h) && h.dalloc_hook != NULL)
			h.dalloc_hook(h.extra, type, address, args);
	}
	hook_exit();
}

void hook_call_expand(int type, void *address, size_t old_usize,
    size_t new_usize, uintptr_t result_raw, uintptr_t args[4]) {
	if (!hook_enter())
		return;
	hook_set_t h;
	for (unsigned i = 0; i < HOOK_MAX; i++) {
		if (hook_read(i, &h) && h.expand_hook != NULL)
			h.expand_hook(h.extra, type, address, old_usize,
			    new_usize, result_raw, args);
	}
	hook_exit();
}

/* ------------------------------------------------------ safety checks */

void hook_safety_abort_set(void (*fn)(const char *)) {
	atomic_store_explicit(&hook_safety_abort, fn, memory_order_release);
}

/*
 * A failed safety check: the program's experimental.hooks.safety_check_
 * abort function if it set one (given jemalloc's text of the message, on
 * which programs written for jemalloc match: its own tests do), which
 * may return; else our line on stderr and abort().
 */
void hook_safety_check_fail(const char *jemalloc_msg, const char *ours) {
	void (*fn)(const char *) = atomic_load_explicit(&hook_safety_abort,
	    memory_order_acquire);
	if (fn != NULL) {
		fn(jemalloc_msg);
		return;
	}
	mp_abort("%s", ours);
}

/* experimental_infallible_new: C++'s operator new failed (cxx.cpp). */
void cxx_infallible_fail(size_t size) {
	char ours[160];
	mp_snprintf(ours, sizeof(ours), "operator new: allocation of %zu "
	    "bytes failed and experimental_infallible_new is true; aborting",
	    size);
	hook_safety_check_fail("<jemalloc>: Allocation failed and "
	    "opt.experimental_infallible_new is true. Aborting.\n", ours);
}

/* -------------------------------------------------- activity callback */

hook_activity_thunk_t hook_activity_get(void) {
	return hook_activity;
}

void hook_activity_set(hook_activity_thunk_t t) {
	hook_activity = t;
}

/* A thread event (tsd_event): the thread's activity callback, if any,
 * with its counters, as jemalloc calls it at its peak events. */
void hook_activity_event(tsd_t *tsd) {
	if (hook_activity.callback != NULL && hook_enter()) {
		hook_activity.callback(hook_activity.uctx, tsd->allocated,
		    tsd->deallocated);
		hook_exit();
	}
}
