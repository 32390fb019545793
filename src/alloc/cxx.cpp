/*
 * cxx.cpp: C++'s replaceable allocation functions, operator new and
 * operator delete in every form (plain, array, nothrow, std::align_val_t,
 * sized), so that a C++ program's objects come from this allocator and
 * its sized deletes keep their size.  The one C++ file of the library,
 * built when configure finds a C++ compiler (--disable-cxx leaves it out)
 * and never in a prefixed build, which must not replace the process's
 * allocator.
 *
 * new behaves as libstdc++'s: on failure it calls the new-handler and
 * tries again, and throws std::bad_alloc when there is none; the nothrow
 * forms return nullptr instead (also when the handler throws).  With
 * experimental_infallible_new every form aborts instead, as jemalloc's
 * (through experimental.hooks.safety_check_abort when set, hook.c).
 *
 * The library does not link the C++ runtime: every name of it used here
 * is a weak reference, which the loader binds when the process has one
 * (a C++ program: libstdc++ is among its libraries) and leaves null in a
 * C program, which then does not load libstdc++ because of us (its
 * start-up allocates an exception pool of about 73 KiB in every process
 * that loads it, which would show in C programs' heap profiles and leak
 * reports).  Only a failed new needs the runtime (the handler, the throw;
 * the nothrow forms' catch runs only for an exception thrown): without
 * one, a program that calls the operators under their mangled names from
 * C gets a one-line report and abort() where new would throw.  The work
 * is in malloc.c: operator new jumps to cxx_new, malloc's fast path,
 * whose miss tail-calls cxx_new_slow here; so the frame of cxx_new_slow
 * (of new_other, tail-called by the other forms) returns to the program,
 * and the profiler's backtrace starts there, with the operator's address
 * as frame 0 as malloc's samples have malloc's.  The sized deletes
 * without alignment are defined in malloc.c (the size picks the cache
 * bin, after the debug builds' size check); the aligned sized ones go to
 * malloc.c's sized_free, the others to free.
 */
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <new>

/* The sized operator delete is defined in malloc.c (see "delete" below),
 * which the compiler cannot see from here (a GCC warning; clang has no
 * such group). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wsized-deallocation"
#endif

#define CXX_HIDDEN __attribute__((visibility("hidden")))
#define CXX_EXPORT __attribute__((visibility("default")))

/* The C++ runtime (libstdc++'s libsupc++), weak: see the top.  The
 * compiler's own references (the personality routine, catch(...)'s
 * calls, bad_alloc's type_info, vtable and destructor) are made weak by
 * the assembler; the three below are declared weak so that the null
 * checks are not folded away. */
__asm__(".weak __gxx_personality_v0\n\t"
    ".weak __cxa_begin_catch\n\t"
    ".weak __cxa_end_catch\n\t"
    ".weak _ZTISt9bad_alloc\n\t"
    ".weak _ZTVSt9bad_alloc\n\t"
    ".weak _ZNSt9bad_allocD1Ev");
extern "C" void *__cxa_allocate_exception(std::size_t size) noexcept
    __attribute__((weak));
extern "C" void __cxa_throw(void *obj, void *tinfo, void (*dtor)(void *))
    __attribute__((weak, noreturn));
namespace std {
new_handler get_new_handler() noexcept __attribute__((weak));
}

/* malloc.c's side: the prototypes of internal/alloc.h, which is C11;
 * and sys/util.c's error line. */
extern "C" {
CXX_HIDDEN void mp_error(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));
CXX_HIDDEN void *cxx_new(std::size_t size);
CXX_HIDDEN void *cxx_new_array(std::size_t size);
CXX_HIDDEN void *cxx_new_slow(std::size_t size, unsigned kind);
CXX_HIDDEN void *cxx_alloc(std::size_t size, std::size_t align, void *entry,
    std::uintptr_t fp);
CXX_HIDDEN void cxx_free(void *p) noexcept;
CXX_HIDDEN void cxx_infallible_fail(std::size_t size);
CXX_HIDDEN extern bool opt_experimental_infallible_new;
CXX_HIDDEN void cxx_free_aligned_sized(void *p, std::size_t align,
    std::size_t size) noexcept;
}

namespace {

/* Which operator new was called: bit 0 array (CXX_NEW_ARRAY in
 * alloc.h), bit 1 nothrow, bit 2 aligned. */
enum cxx_kind_t : unsigned {
	KIND_NEW = 0,
	KIND_ARRAY = 1,
	KIND_NOTHROW = 2,
	KIND_ALIGNED = 4,
};

/* The operator the program called: frame 0 of a profiler sample. */
void *cxx_entry(unsigned kind) {
	using plain_t = void *(*)(std::size_t);
	using nothrow_t = void *(*)(std::size_t, const std::nothrow_t &);
	using aligned_t = void *(*)(std::size_t, std::align_val_t);
	using aligned_nothrow_t = void *(*)(std::size_t, std::align_val_t,
	    const std::nothrow_t &);
	switch (kind) {
	case KIND_NEW:
		return reinterpret_cast<void *>(
		    static_cast<plain_t>(&::operator new));
	case KIND_ARRAY:
		return reinterpret_cast<void *>(
		    static_cast<plain_t>(&::operator new[]));
	case KIND_NOTHROW:
		return reinterpret_cast<void *>(
		    static_cast<nothrow_t>(&::operator new));
	case KIND_ARRAY | KIND_NOTHROW:
		return reinterpret_cast<void *>(
		    static_cast<nothrow_t>(&::operator new[]));
	case KIND_ALIGNED:
		return reinterpret_cast<void *>(
		    static_cast<aligned_t>(&::operator new));
	case KIND_ALIGNED | KIND_ARRAY:
		return reinterpret_cast<void *>(
		    static_cast<aligned_t>(&::operator new[]));
	case KIND_ALIGNED | KIND_NOTHROW:
		return reinterpret_cast<void *>(
		    static_cast<aligned_nothrow_t>(&::operator new));
	default:
		return reinterpret_cast<void *>(
		    static_cast<aligned_nothrow_t>(&::operator new[]));
	}
}

/*
 * Allocate until it works or there is no new-handler, as libstdc++'s
 * operator new does.  fp is the frame whose return address is the
 * program's call site.  Only the throwing forms come here.
 */
void *new_loop(std::size_t size, std::size_t align, unsigned kind,
    std::uintptr_t fp) {
	void *entry = cxx_entry(kind);
	for (;;) {
		void *p = cxx_alloc(size, align, entry, fp);
		if (p != nullptr)
			return p;
		/* jemalloc's experimental_infallible_new: no handler, no
		 * throw (nothrow forms too); nullptr if the program's
		 * safety_check_abort hook returns. */
		if (opt_experimental_infallible_new) {
			cxx_infallible_fail(size);
			return nullptr;
		}
		std::new_handler handler = &std::get_new_handler != nullptr ?
		    std::get_new_handler() : nullptr;
		if (handler != nullptr) {
			handler();
			continue;
		}
		if (&__cxa_allocate_exception == nullptr ||
		    &__cxa_throw == nullptr) {
			mp_error("operator new: out of memory for %zu bytes, "
			    "and no C++ runtime in the process to throw "
			    "std::bad_alloc", size);
			std::abort();
		}
		throw std::bad_alloc();
	}
}

/* The nothrow forms: libstdc++'s call the throwing form and return
 * nullptr for any exception, the handler's included. */
void *new_loop_nothrow(std::size_t size, std::size_t align, unsigned kind,
    std::uintptr_t fp) noexcept {
	try {
		return new_loop(size, align, kind, fp);
	} catch (...) {
		return nullptr;
	}
}

/* The result, after an empty asm: the caller of frame_result keeps its
 * frame (no tail call) while new_loop reads the backtrace from it. */
inline void *frame_result(void *p) {
	__asm__ volatile("" : "+r"(p));
	return p;
}

/* The forms without a fast path.  Not inlined, and tail-called by their
 * operator: this frame returns to the program. */
__attribute__((noinline)) void *new_other(std::size_t size,
    std::size_t align, unsigned kind) {
	return frame_result(new_loop(size, align, kind,
	    reinterpret_cast<std::uintptr_t>(__builtin_frame_address(0))));
}

__attribute__((noinline)) void *new_other_nothrow(std::size_t size,
    std::size_t align, unsigned kind) noexcept {
	return frame_result(new_loop_nothrow(size, align, kind,
	    reinterpret_cast<std::uintptr_t>(__builtin_frame_address(0))));
}

} // namespace

/* cxx_new / cxx_new_array missed (malloc.c tail-calls this). */
extern "C" CXX_HIDDEN void *cxx_new_slow(std::size_t size, unsigned kind) {
	return frame_result(new_loop(size, 0, kind,
	    reinterpret_cast<std::uintptr_t>(__builtin_frame_address(0))));
}

/* ------------------------------------------------------------------ new */

CXX_EXPORT void *operator new(std::size_t size) {
	return cxx_new(size);
}

CXX_EXPORT void *operator new[](std::size_t size) {
	return cxx_new_array(size);
}

CXX_EXPORT void *operator new(std::size_t size,
    const std::nothrow_t &) noexcept {
	return new_other_nothrow(size, 0, KIND_NOTHROW);
}

CXX_EXPORT void *operator new[](std::size_t size,
    const std::nothrow_t &) noexcept {
	return new_other_nothrow(size, 0, KIND_ARRAY | KIND_NOTHROW);
}

CXX_EXPORT void *operator new(std::size_t size, std::align_val_t al) {
	return new_other(size, static_cast<std::size_t>(al), KIND_ALIGNED);
}

CXX_EXPORT void *operator new[](std::size_t size, std::align_val_t al) {
	return new_other(size, static_cast<std::size_t>(al),
	    KIND_ALIGNED | KIND_ARRAY);
}

CXX_EXPORT void *operator new(std::size_t size, std::align_val_t al,
    const std::nothrow_t &) noexcept {
	return new_other_nothrow(size, static_cast<std::size_t>(al),
	    KIND_ALIGNED | KIND_NOTHROW);
}

CXX_EXPORT void *operator new[](std::size_t size, std::align_val_t al,
    const std::nothrow_t &) noexcept {
	return new_other_nothrow(size, static_cast<std::size_t>(al),
	    KIND_ALIGNED | KIND_ARRAY | KIND_NOTHROW);
}

/* --------------------------------------------------------------- delete */

CXX_EXPORT void operator delete(void *p) noexcept {
	cxx_free(p);
}

CXX_EXPORT void operator delete[](void *p) noexcept {
	cxx_free(p);
}

CXX_EXPORT void operator delete(void *p, const std::nothrow_t &) noexcept {
	cxx_free(p);
}

CXX_EXPORT void operator delete[](void *p, const std::nothrow_t &) noexcept {
	cxx_free(p);
}

/* operator delete(void *, std::size_t) and its array form are in malloc.c
 * (cxx_delete_sized, under their mangled names): the sized fast path,
 * reached from the program's call without a jump in between. */

CXX_EXPORT void operator delete(void *p, std::align_val_t) noexcept {
	cxx_free(p);
}

CXX_EXPORT void operator delete[](void *p, std::align_val_t) noexcept {
	cxx_free(p);
}

CXX_EXPORT void operator delete(void *p, std::size_t size,
    std::align_val_t al) noexcept {
	cxx_free_aligned_sized(p, static_cast<std::size_t>(al), size);
}

CXX_EXPORT void operator delete[](void *p, std::size_t size,
    std::align_val_t al) noexcept {
	cxx_free_aligned_sized(p, static_cast<std::size_t>(al), size);
}

CXX_EXPORT void operator delete(void *p, std::align_val_t,
    const std::nothrow_t &) noexcept {
	cxx_free(p);
}

CXX_EXPORT void operator delete[](void *p, std::align_val_t,
    const std::nothrow_t &) noexcept {
	cxx_free(p);
}
