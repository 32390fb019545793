/*
 * test/integration/prof_nofp.c - callers built without frame pointers.
 *
 * prof_nofp.conf: prof:true,lg_prof_sample:0,prof_unwind:fp (the
 * frame-pointer walk alone: test/integration/prof_cfi has the others).
 * The profiler walks frame pointers from the allocator's entry point.  A caller compiled without
 * them may leave anything in rbp, and the walk must neither fault nor
 * loop: it stops at the first saved frame pointer that is not a plausible
 * frame of this thread's stack (outside it, misaligned, or not above the
 * previous one).  The sample is still recorded, with the return address
 * into the caller as frame 1.
 *
 * call_with_rbp() (x86-64 only) calls malloc with rbp set to a chosen
 * value, the way code that uses rbp as a general register does:
 * garbage, 0, a misaligned value, a heap address, a stack slot that
 * points to itself, and a well-formed chain of fake frames on the stack,
 * which the walk must follow exactly.  Also: a recursion compiled with
 * -fomit-frame-pointer, and the same cases in a second thread (whose
 * stack bounds come from its pthread attributes).
 *
 * The walk also stops at a return address outside every executable
 * mapping: a chain of fake frames whose return addresses are code ends at
 * the first that is a small number (what libtsan's thread start leaves)
 * or a data address.  test_garbage_outer_frame calls a site (with frame
 * pointers) the way a thread start routine built without them does,
 * with rbp left pointing at a "frame" whose return address changes from
 * call to call: every call must land in one stack, which ends at the
 * routine's frame.
 */
#include "../test_util.h"

static char tmpdir[256];

typedef void *malloc_fn_t(size_t);

void *nofp_recurse(int depth, size_t size);

/* A recursion without frame pointers: malloc's caller and its callers
 * leave rbp to the last function that kept one. */
#if defined(__GNUC__) && !defined(__clang__)
__attribute__((optimize("omit-frame-pointer")))
#endif
MP_SITE void *nofp_recurse(int depth, size_t size) {
	void *p = depth == 0 ? malloc(size) : nofp_recurse(depth - 1, size);
	__asm__ volatile("" : : "r"(p) : "memory");
	return p;
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define HAVE_CALL_WITH_RBP 1

void *call_with_rbp(malloc_fn_t *fn, size_t size, uintptr_t rbp);

/*
 * fn(size) called with rbp = `rbp`.  rbp is declared clobbered (allowed:
 * this function has no frame pointer), so the compiler saves and
 * restores it and keeps the operands elsewhere.  The call is made below
 * the red zone, 16-byte aligned; rbx keeps the stack pointer.
 */
__attribute__((optimize("omit-frame-pointer")))
MP_SITE void *call_with_rbp(malloc_fn_t *fn, size_t size, uintptr_t rbp) {
	void *ret;
	__asm__ volatile(
	    "mov %%rsp, %%rbx\n\t"
	    "sub $128, %%rsp\n\t"
	    "and $-16, %%rsp\n\t"
	    "mov %[rbp], %%rbp\n\t"
	    "call *%[fn]\n\t"
	    "mov %%rbx, %%rsp\n\t"
	    : "=a"(ret), "+D"(size)
	    : [fn] "r"(fn), [rbp] "r"(rbp)
	    : "rbx", "rbp", "rcx", "rdx", "rsi", "r8", "r9", "r10", "r11",
	      "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7",
	      "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14",
	      "xmm15", "memory", "cc");
	return ret;
}
#endif

static malloc_fn_t *malloc_ptr(void) {
	malloc_fn_t *f = malloc;
	return LAUNDER(f);
}

/* Dumps and returns a copy of the stack whose first program frame
 * (frame 1) is in fn (nframes 0 if none); *nstacks gets how many such
 * stacks there are, *user the index of that frame (1, unless the library
 * recorded frames of its own: prof_callsite checks that). */
static mp_heap_stack_t stack_of(const void *fn, const char *tag,
    size_t *nstacks, size_t *user) {
	char path[512];
	snprintf(path, sizeof(path), "%s/%s.heap", tmpdir, tag);
	mp_heap_stack_t out;
	memset(&out, 0, sizeof(out));
	*nstacks = 0;
	if (mp_prof_dump(path) != 0) {
		return out;
	}
	mp_heap_t h;
	if (!mp_heap_parse(path, &h)) {
		print_message("# %s: %s\n", path, h.err);
		return out;
	}
	uintptr_t lo, hi;
	mp_fn_range(fn, &lo, &hi);
	for (size_t i = 0; i < h.nstacks; i++) {
		mp_heap_stack_t *s = &h.stacks[i];
		size_t u = mp_heap_user_frame(s);
		if (s->nframes > u && mp_ra_in(s->frames[u], lo, hi)) {
			(*nstacks)++;
			*user = u;
			out = *s;
			out.frames = malloc(s->nframes * sizeof(uintptr_t));
			memcpy(out.frames, s->frames, s->nframes *
			    sizeof(uintptr_t));
			out.thr = NULL;
			out.nthr = 0;
		}
	}
	mp_heap_free(&h);
	return out;
}

static void test_recursion(void **state) {
	(void)state;
	void *p = nofp_recurse(30, 777);
	assert_non_null(p);
	size_t n, u = 1;
	mp_heap_stack_t s = stack_of((void *)nofp_recurse, "recursion", &n,
	    &u);
	MP_ASSERT(n == 1, "%zu stacks with frame 1 in nofp_recurse", n);
	assert_int_equal(s.total.co, 1);
	assert_int_equal(s.total.cb, malloc_usable_size(p));
	assert_true(mp_heap_entry_is(&s, (void *)malloc));
	print_message("# recursion without frame pointers: %zu frames\n",
	    s.nframes);
	free(s.frames);
	free(p);
}

#ifdef HAVE_CALL_WITH_RBP
/* A fake frame: saved rbp, then the return address. */
typedef struct {
	uintptr_t next, ret;
} fake_frame_t;

#define NFAKE 6

typedef struct {
	const char *name;
	uintptr_t rbp;
	size_t want_frames;	/* frames in all (frame 1 the program's) */
	const uintptr_t *want_tail;	/* frames from 2 on, or NULL */
} rbp_case_t;

/* i-th return address inside this program's text (in rbp_cases). */
static void rbp_cases(const char *who);

static uintptr_t code_addr(unsigned i) {
	return (uintptr_t)LAUNDER(&rbp_cases) + 1 + i;
}

/* Runs the cases; failures counted with MP_CHECK (any thread). */
static void rbp_cases(const char *who) {
	/* On this function's stack, above call_with_rbp's frame. */
	fake_frame_t self[1];
	self[0].next = (uintptr_t)&self[0];
	self[0].ret = code_addr(0x34);
	fake_frame_t chain[NFAKE + 1];
	uintptr_t chain_rets[NFAKE];
	for (int i = 0; i < NFAKE; i++) {
		chain[i].next = (uintptr_t)&chain[i + 1];
		chain[i].ret = chain_rets[i] = code_addr((unsigned)i);
	}
	chain[NFAKE].next = 0;
	chain[NFAKE].ret = 0;	/* a zero return address ends the walk */
	fake_frame_t beyond[1];
	beyond[0].next = (uintptr_t)-4096;	/* far outside the stack */
	beyond[0].ret = code_addr(0x78);
	fake_frame_t *heap = malloc(sizeof(fake_frame_t) * 2);
	heap[0].next = (uintptr_t)&heap[1];
	heap[0].ret = code_addr(0x9a);
	heap[1].next = 0;
	heap[1].ret = 0;
	/* Code, code, code, then return addresses that are no code: a
	 * small number (libtsan's thread start leaves such), then a data
	 * address (the heap block), then code again. */
	fake_frame_t small[NFAKE], data[NFAKE];
	for (int i = 0; i < NFAKE; i++) {
		small[i].next = (uintptr_t)&small[i + 1];
		small[i].ret = code_addr((unsigned)i);
		data[i].next = (uintptr_t)&data[i + 1];
		data[i].ret = code_addr((unsigned)i);
	}
	small[3].ret = 0x2304;
	data[3].ret = (uintptr_t)heap + 8;
	small[NFAKE - 1].next = data[NFAKE - 1].next = 0;
	__asm__ volatile("" : : "r"(self), "r"(chain), "r"(beyond), "r"(heap),
	    "r"(small), "r"(data) : "memory");
	const uintptr_t self_tail[] = {self[0].ret};
	const uintptr_t beyond_tail[] = {beyond[0].ret};

	const rbp_case_t cases[] = {
		{"garbage", 0xdeadbeefdeadbeefULL, 2, NULL},
		{"zero", 0, 2, NULL},
		{"one", 1, 2, NULL},
		{"misaligned", (uintptr_t)&chain[0] + 3, 2, NULL},
		{"heap", (uintptr_t)heap, 2, NULL},
		{"self-loop", (uintptr_t)&self[0], 3, self_tail},
		{"beyond", (uintptr_t)&beyond[0], 3, beyond_tail},
		{"chain", (uintptr_t)&chain[0], 2 + NFAKE, chain_rets},
		{"small return address", (uintptr_t)&small[0], 2 + 3,
		    chain_rets},
		{"data return address", (uintptr_t)&data[0], 2 + 3,
		    chain_rets},
	};
	for (size_t i = 0; i < MP_ARRAY_SIZE(cases); i++) {
		const rbp_case_t *c = &cases[i];
		void *p = call_with_rbp(malloc_ptr(), 1111, c->rbp);
		MP_CHECK(p != NULL, "%s %s: malloc failed", who, c->name);
		char tag[64];
		snprintf(tag, sizeof(tag), "%s-%s", who, c->name);
		size_t n, u = 1;
		mp_heap_stack_t s = stack_of((void *)call_with_rbp, tag, &n,
		    &u);
		MP_CHECK(n == 1, "%s %s: %zu stacks with frame 1 in "
		    "call_with_rbp", who, c->name, n);
		if (n == 1) {
			MP_CHECK(mp_heap_entry_is(&s, (void *)malloc), "%s %s: "
			    "frame 0", who, c->name);
			MP_CHECK(s.total.co == 1 && s.total.cb ==
			    malloc_usable_size(p), "%s %s: "
			    "%" PRIu64 ": %" PRIu64, who, c->name, s.total.co,
			    s.total.cb);
			/* want_frames counts frame 0 and 1: u - 1 more if
			 * the library recorded frames of its own. */
			size_t want = c->want_frames + u - 1;
			MP_CHECK(s.nframes == want, "%s %s: %zu frames, want "
			    "%zu", who, c->name, s.nframes, want);
			for (size_t k = u + 1; c->want_tail != NULL &&
			    k < s.nframes && k < want; k++) {
				MP_CHECK(s.frames[k] == c->want_tail[k - u - 1],
				    "%s %s: frame %zu is %#lx, want %#lx", who,
				    c->name, k, (unsigned long)s.frames[k],
				    (unsigned long)c->want_tail[k - u - 1]);
			}
		}
		free(s.frames);
		free(p);
	}
	free(heap);
}

static void *rbp_thread(void *arg) {
	(void)arg;
	rbp_cases("thread");
	return NULL;
}

static void test_clobbered_rbp(void **state) {
	(void)state;
	rbp_cases("main");
	assert_int_equal(atomic_load(&mp_failures), 0);
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, rbp_thread, NULL), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(atomic_load(&mp_failures), 0);
}

/*
 * A thread start routine built without frame pointers (libtsan's, say)
 * calls the thread function with its own rbp, a stack address whose
 * "frame" holds whatever the routine stored there last.  Here
 * call_with_rbp plays the routine and garbage_site the thread function,
 * NGARBAGE times, each time with another non-code return address in the
 * fake frame: a small number or a data address.
 */
#define NGARBAGE 40

void *garbage_site(size_t size);

MP_SITE void *garbage_site(size_t size) {
	void *p = malloc(size);
	__asm__ volatile("" : : "r"(p) : "memory");
	return p;
}

static void test_garbage_outer_frame(void **state) {
	(void)state;
	void *objs[NGARBAGE];
	static char data[NGARBAGE * 16];
	for (unsigned i = 0; i < NGARBAGE; i++) {
		fake_frame_t fake[2];
		fake[0].next = (uintptr_t)&fake[1];
		fake[0].ret = i % 2 == 0 ? 0x2000 + 0x10 * (uintptr_t)i :
		    (uintptr_t)&data[16 * i];
		fake[1].next = 0;
		fake[1].ret = code_addr(i);
		__asm__ volatile("" : : "r"(fake) : "memory");
		objs[i] = call_with_rbp((malloc_fn_t *)LAUNDER(&garbage_site),
		    700, (uintptr_t)&fake[0]);
		assert_non_null(objs[i]);
	}
	size_t n, u = 1;
	mp_heap_stack_t s = stack_of((void *)garbage_site, "garbage", &n, &u);
	MP_ASSERT(n == 1, "%zu stacks with frame 1 in garbage_site, want 1 "
	    "(a garbage outer frame splits the site)", n);
	if (n == 1) {
		assert_int_equal(s.total.co, NGARBAGE);
		/* garbage_site, call_with_rbp, and no frame after it. */
		uintptr_t lo, hi;
		mp_fn_range((void *)call_with_rbp, &lo, &hi);
		MP_ASSERT(s.nframes == u + 2, "%zu frames, want %zu",
		    s.nframes, u + 2);
		assert_true(mp_ra_in(s.frames[u + 1], lo, hi));
	}
	free(s.frames);
	for (unsigned i = 0; i < NGARBAGE; i++) {
		free(objs[i]);
	}
}
#else
static void test_garbage_outer_frame(void **state) {
	(void)state;
	MP_SKIP("needs x86-64 and GCC inline assembly");
}

static void test_clobbered_rbp(void **state) {
	(void)state;
	MP_SKIP("needs x86-64 and GCC inline assembly");
}
#endif

static void test_no_profiler(void **state) {
	(void)state;
	/* The allocator itself does not care about rbp. */
	void *p = nofp_recurse(30, 777);
	assert_non_null(p);
	free(p);
#ifdef HAVE_CALL_WITH_RBP
	p = call_with_rbp(malloc_ptr(), 1111, 0xdeadbeefdeadbeefULL);
	assert_non_null(p);
	free(p);
#endif
	assert_int_equal(mallctl("prof.dump", NULL, NULL, NULL, 0), ENOENT);
}

int main(void) {
	mp_test_init(300);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_recursion),
		cmocka_unit_test(test_clobbered_rbp),
		cmocka_unit_test(test_garbage_outer_frame),
	};
	return mp_prof_test_main("mp_prof_nofp", test_no_profiler, tests);
}
