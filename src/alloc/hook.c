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
 * (hook_thread_check, inline in alloc.h).  The first of mp_read_mostly's
 * variables in link order (Makefile.am): aligned, it starts the section
 * on a line of its own, and the section's 145 bytes take 3 lines, not 4
 * (test/unit/prof_paths checks the span). */
MP_READ_MOSTLY _Alignas(CACHELINE) _Atomic unsigned hook_gen;
__thread unsigned hook_gen_seen __attribute__((tls_model("initial-exec")));
/*
 * realloc's shortcuts (malloc.c: a block staying in its class, a small
 * block moving through the fast paths) are off with junk:alloc, which junks
 * every new block, and while hooks are installed, which must see the
 * call (ralloc_impl reports it).  One flag for both, so that realloc
 * tests one byte, as it tested opt_junk_alloc alone: the hook test cost
 * 1% of the instructions of bench's realloc and reallocgrow.  Set by
 * conf.c (junk) and here (install, remove); kept here, not in malloc.c,
 * so that the two files depend one way (malloc.c on this one).
 */
_Atomic bool realloc_shortcut_off;

void realloc_shortcut_update(void) {
	atomic_store_explicit(&realloc_shortcut_off, opt_junk_alloc ||
	    hook_active(), memory_order_relaxed);
}

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

/* ------------------------------------------ extent hooks: reentrancy */

/*
 * A custom extent hook is called with its arena's mtx held (extent.c), so
 * a hook that calls malloc or free must not need that lock, nor (debug
 * builds check it) any lock of a rank not above it.  An arena with custom
 * hooks holds a wrapper instead of the program's extent_hooks_t: the
 * wrapper's trampolines raise hook_extent_depth (and reentrancy: nothing
 * inside is sampled) around the program's function, which gets the
 * program's pointer.  malloc.c then serves the hook's slow-path
 * allocations from the hook arena, with no thread cache, and returns
 * small blocks as remote frees.  A hook's fast-path calls touch only its
 * thread's cache bins, which take no lock.  What a hook still cannot do:
 * free a large block of the hook's own arena (its lock is held), or call
 * mallctl.
 */
__thread unsigned hook_extent_depth __attribute__((tls_model("initial-exec")));
/* hook_extent_arena is arena.c's (its fork handler reads it), set here. */

typedef struct hook_extent_wrapper_s {
	extent_hooks_t tramp;    /* first: what the arena holds */
	extent_hooks_t *user;
	struct hook_extent_wrapper_s *next;
} hook_extent_wrapper_t;
/* Wrappers are kept for good (metadata), one per hooks pointer. */
static _Atomic(hook_extent_wrapper_t *) hook_extent_wrappers;

static extent_hooks_t *hook_extent_user(extent_hooks_t *h) {
	return ((hook_extent_wrapper_t *)h)->user;
}

static void hook_extent_in(void) {
	hook_extent_depth++;
	mp_tsd.reentrancy++;
}

static void hook_extent_out(void) {
	mp_tsd.reentrancy--;
	hook_extent_depth--;
}

static void *hook_tr_alloc(extent_hooks_t *h, void *new_addr, size_t size,
    size_t align, bool *zero, bool *commit, unsigned ind) {
	extent_hooks_t *u = hook_extent_user(h);
	extent_alloc_t *fn = u->alloc;
	if (fn == NULL)
		return NULL;
	hook_extent_in();
	void *p = fn(u, new_addr, size, align, zero, commit, ind);
	hook_extent_out();
	return p;
}

static bool hook_tr_dalloc(extent_hooks_t *h, void *addr, size_t size,
    bool committed, unsigned ind) {
	extent_hooks_t *u = hook_extent_user(h);
	extent_dalloc_t *fn = u->dalloc;
	if (fn == NULL)
		return true;
	hook_extent_in();
	bool r = fn(u, addr, size, committed, ind);
	hook_extent_out();
	return r;
}

static void hook_tr_destroy(extent_hooks_t *h, void *addr, size_t size,
    bool committed, unsigned ind) {
	extent_hooks_t *u = hook_extent_user(h);
	extent_destroy_t *fn = u->destroy;
	if (fn == NULL)
		return;
	hook_extent_in();
	fn(u, addr, size, committed, ind);
	hook_extent_out();
}

/* commit, decommit and both purges share one signature. */
typedef bool hook_range_fn(extent_hooks_t *, void *, size_t, size_t,
    size_t, unsigned);
static bool hook_tr_range(hook_range_fn *fn, extent_hooks_t *u, void *addr,
    size_t size, size_t off, size_t len, unsigned ind) {
	if (fn == NULL)
		return true;
	hook_extent_in();
	bool r = fn(u, addr, size, off, len, ind);
	hook_extent_out();
	return r;
}

static bool hook_tr_commit(extent_hooks_t *h, void *addr, size_t size,
    size_t off, size_t len, unsigned ind) {
	extent_hooks_t *u = hook_extent_user(h);
	return hook_tr_range(u->commit, u, addr, size, off, len, ind);
}

static bool hook_tr_decommit(extent_hooks_t *h, void *addr, size_t size,
    size_t off, size_t len, unsigned ind) {
	extent_hooks_t *u = hook_extent_user(h);
	return hook_tr_range(u->decommit, u, addr, size, off, len, ind);
}

static bool hook_tr_purge_lazy(extent_hooks_t *h, void *addr, size_t size,
    size_t off, size_t len, unsigned ind) {
	extent_hooks_t *u = hook_extent_user(h);
	return hook_tr_range(u->purge_lazy, u, addr, size, off, len, ind);
}

static bool hook_tr_purge_forced(extent_hooks_t *h, void *addr, size_t size,
    size_t off, size_t len, unsigned ind) {
	extent_hooks_t *u = hook_extent_user(h);
	return hook_tr_range(u->purge_forced, u, addr, size, off, len, ind);
}

static bool hook_tr_split(extent_hooks_t *h, void *addr, size_t size,
    size_t size_a, size_t size_b, bool committed, unsigned ind) {
	extent_hooks_t *u = hook_extent_user(h);
	extent_split_t *fn = u->split;
	if (fn == NULL)
		return true;
	hook_extent_in();
	bool r = fn(u, addr, size, size_a, size_b, committed, ind);
	hook_extent_out();
	return r;
}

static bool hook_tr_merge(extent_hooks_t *h, void *addr_a, size_t size_a,
    void *addr_b, size_t size_b, bool committed, unsigned ind) {
	extent_hooks_t *u = hook_extent_user(h);
	extent_merge_t *fn = u->merge;
	if (fn == NULL)
		return true;
	hook_extent_in();
	bool r = fn(u, addr_a, size_a, addr_b, size_b, committed, ind);
	hook_extent_out();
	return r;
}

/* The hook arena: made once, before the first wrapper is handed out (no
 * lock is held here; inside a hook the arenas' locks are, and making an
 * arena takes arenas_mtx).  Its locks get the ranks above every other
 * arena's before any block comes from it. */
static bool hook_extent_arena_make(void) {
	/* Ranked below arenas_mtx, which arena_create takes; reached from
	 * mallctl with no lock held. */
	static mp_mutex_t make_mtx = MP_MUTEX_INITIALIZER(LOCK_RANK_CTL);
	if (atomic_load_explicit(&hook_extent_arena, memory_order_acquire) !=
	    NULL)
		return false;
	mp_mutex_lock(&make_mtx);
	bool failed = false;
	if (atomic_load(&hook_extent_arena) == NULL) {
		unsigned ind;
		arena_t *a = NULL;
		if (!arena_create(&ind))
			a = arena_get(ind, false);
		if (a != NULL) {
			mp_mutex_init(&a->shared_mtx,
			    LOCK_RANK_HOOK_ARENA_SHARED);
			mp_mutex_init_lite(&a->prof_cache_mtx,
			    LOCK_RANK_HOOK_ARENA_PROF_CACHE);
			mp_mutex_init(&a->orphans_mtx,
			    LOCK_RANK_HOOK_ARENA_ORPHANS);
			mp_mutex_init(&a->mtx, LOCK_RANK_HOOK_ARENA);
			atomic_store_explicit(&hook_extent_arena, a,
			    memory_order_release);
		}
		failed = a == NULL;
	}
	mp_mutex_unlock(&make_mtx);
	return failed;
}

static void hook_extent_fill(hook_extent_wrapper_t *w);

extent_hooks_t *hook_extent_wrap(extent_hooks_t *user) {
	if (user == NULL || user == &extent_hooks_default)
		return user;
	for (hook_extent_wrapper_t *w = atomic_load_explicit(
	    &hook_extent_wrappers, memory_order_acquire); w != NULL;
	    w = w->next) {
		if (&w->tramp == user)
			return user;
		if (w->user == user) {
			hook_extent_fill(w);
			return &w->tramp;
		}
	}
	if (hook_extent_arena_make())
		return NULL;
	hook_extent_wrapper_t *w = base_alloc(sizeof(*w));
	if (w == NULL)
		return NULL;
	w->user = user;
	hook_extent_fill(w);
	hook_extent_wrapper_t *head = atomic_load(&hook_extent_wrappers);
	do {
		w->next = head;
	} while (!atomic_compare_exchange_weak(&hook_extent_wrappers, &head,
	    w));
	return &w->tramp;
}

/*
 * The wrapper's members follow the program's at each install (a NULL
 * member stays NULL: "cannot", which the extent code may act on before
 * calling, as for split).  The program may change its structure after;
 * the trampolines read its members at each call, and one it set to NULL
 * since answers "cannot", which is what the extent code does for NULL.
 */
static void hook_extent_fill(hook_extent_wrapper_t *w) {
	extent_hooks_t *user = w->user;
	w->tramp.alloc = user->alloc != NULL ? hook_tr_alloc : NULL;
	w->tramp.dalloc = user->dalloc != NULL ? hook_tr_dalloc : NULL;
	w->tramp.destroy = user->destroy != NULL ? hook_tr_destroy : NULL;
	w->tramp.commit = user->commit != NULL ? hook_tr_commit : NULL;
	w->tramp.decommit = user->decommit != NULL ? hook_tr_decommit : NULL;
	w->tramp.purge_lazy = user->purge_lazy != NULL ? hook_tr_purge_lazy :
	    NULL;
	w->tramp.purge_forced = user->purge_forced != NULL ?
	    hook_tr_purge_forced : NULL;
	w->tramp.split = user->split != NULL ? hook_tr_split : NULL;
	w->tramp.merge = user->merge != NULL ? hook_tr_merge : NULL;
}

extent_hooks_t *hook_extent_unwrap(extent_hooks_t *h) {
	for (hook_extent_wrapper_t *w = atomic_load_explicit(
	    &hook_extent_wrappers, memory_order_acquire); w != NULL;
	    w = w->next) {
		if (&w->tramp == h)
			return w->user;
	}
	return h;
}
