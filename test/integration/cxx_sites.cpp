/*
 * test/integration/cxx_sites.cpp: the C++ half of the operator tests
 * (cxx_new.c, cxx_prof.c), which are cmocka programs in C: each operator
 * form, the new-handler and bad_alloc, behind extern "C" functions.
 * Every call goes through a function pointer or an escaping result, so
 * that the compiler neither elides a new/delete pair nor calls its own
 * idea of the operator.
 */
#include <cstddef>
#include <cstdint>
#include <new>

#include "cxx_sites.h"

#define USE(p) __asm__ volatile("" : : "r"(p) : "memory")

namespace {

using plain_t = void *(*)(std::size_t);
using nothrow_t = void *(*)(std::size_t, const std::nothrow_t &);
using aligned_t = void *(*)(std::size_t, std::align_val_t);
using aligned_nothrow_t = void *(*)(std::size_t, std::align_val_t,
    const std::nothrow_t &);

int handler_calls;
int handler_limit;
bool handler_throws;

/* Counts its calls; after handler_limit of them it removes itself (new
 * then throws) or, with handler_throws, throws bad_alloc itself. */
void counting_handler() {
	handler_calls++;
	if (handler_calls >= handler_limit) {
		if (handler_throws)
			throw std::bad_alloc();
		std::set_new_handler(nullptr);
	}
}

} // namespace

extern "C" {

void *cxxt_entry(int form) {
	switch (form) {
	case CXXT_NEW:
		return reinterpret_cast<void *>(
		    static_cast<plain_t>(&::operator new));
	case CXXT_NEW_ARRAY:
		return reinterpret_cast<void *>(
		    static_cast<plain_t>(&::operator new[]));
	case CXXT_NEW_NOTHROW:
		return reinterpret_cast<void *>(
		    static_cast<nothrow_t>(&::operator new));
	case CXXT_NEW_ARRAY_NOTHROW:
		return reinterpret_cast<void *>(
		    static_cast<nothrow_t>(&::operator new[]));
	case CXXT_NEW_ALIGNED:
		return reinterpret_cast<void *>(
		    static_cast<aligned_t>(&::operator new));
	case CXXT_NEW_ARRAY_ALIGNED:
		return reinterpret_cast<void *>(
		    static_cast<aligned_t>(&::operator new[]));
	case CXXT_NEW_ALIGNED_NOTHROW:
		return reinterpret_cast<void *>(
		    static_cast<aligned_nothrow_t>(&::operator new));
	default:
		return reinterpret_cast<void *>(
		    static_cast<aligned_nothrow_t>(&::operator new[]));
	}
}

void *cxxt_new(int form, size_t size, size_t align) {
	std::align_val_t al = static_cast<std::align_val_t>(align);
	void *p;
	switch (form) {
	case CXXT_NEW:
		p = ::operator new(size);
		break;
	case CXXT_NEW_ARRAY:
		p = ::operator new[](size);
		break;
	case CXXT_NEW_NOTHROW:
		p = ::operator new(size, std::nothrow);
		break;
	case CXXT_NEW_ARRAY_NOTHROW:
		p = ::operator new[](size, std::nothrow);
		break;
	case CXXT_NEW_ALIGNED:
		p = ::operator new(size, al);
		break;
	case CXXT_NEW_ARRAY_ALIGNED:
		p = ::operator new[](size, al);
		break;
	case CXXT_NEW_ALIGNED_NOTHROW:
		p = ::operator new(size, al, std::nothrow);
		break;
	default:
		p = ::operator new[](size, al, std::nothrow);
		break;
	}
	USE(p);
	return p;
}

void cxxt_delete(int form, void *p, size_t size, size_t align) {
	std::align_val_t al = static_cast<std::align_val_t>(align);
	USE(p);
	switch (form) {
	case CXXT_DELETE:
		::operator delete(p);
		break;
	case CXXT_DELETE_ARRAY:
		::operator delete[](p);
		break;
	case CXXT_DELETE_NOTHROW:
		::operator delete(p, std::nothrow);
		break;
	case CXXT_DELETE_ARRAY_NOTHROW:
		::operator delete[](p, std::nothrow);
		break;
	case CXXT_DELETE_SIZED:
		::operator delete(p, size);
		break;
	case CXXT_DELETE_ARRAY_SIZED:
		::operator delete[](p, size);
		break;
	case CXXT_DELETE_ALIGNED:
		::operator delete(p, al);
		break;
	case CXXT_DELETE_ARRAY_ALIGNED:
		::operator delete[](p, al);
		break;
	case CXXT_DELETE_SIZED_ALIGNED:
		::operator delete(p, size, al);
		break;
	case CXXT_DELETE_ARRAY_SIZED_ALIGNED:
		::operator delete[](p, size, al);
		break;
	case CXXT_DELETE_ALIGNED_NOTHROW:
		::operator delete(p, al, std::nothrow);
		break;
	default:
		::operator delete[](p, al, std::nothrow);
		break;
	}
}

int cxxt_try_new(int form, size_t size, size_t align, int calls,
    int throws) {
	handler_calls = 0;
	handler_limit = calls;
	handler_throws = throws != 0;
	std::set_new_handler(calls > 0 ? counting_handler : nullptr);
	int result;
	try {
		void *p = cxxt_new(form, size, align);
		if (p == nullptr) {
			result = CXXT_GOT_NULL;
		} else {
			result = CXXT_GOT_MEMORY;
			::operator delete(p);
		}
	} catch (const std::bad_alloc &) {
		result = CXXT_GOT_BAD_ALLOC;
	} catch (...) {
		result = CXXT_GOT_OTHER;
	}
	std::set_new_handler(nullptr);
	return result;
}

int cxxt_handler_calls(void) {
	return handler_calls;
}

/* Call sites of the profiler test: a new-expression (the compiler's
 * call, sized delete included) and explicit operator calls. */
struct cxxt_obj {
	char bytes[CXXT_OBJ_SIZE];
};

struct alignas(256) cxxt_aligned_obj {
	char bytes[CXXT_ALIGNED_OBJ_SIZE];
};

CXXT_SITE void *cxxt_site_new_expr(size_t size) {
	(void)size;
	cxxt_obj *o = new cxxt_obj;
	USE(o);
	return o;
}

CXXT_SITE void cxxt_site_delete_expr(void *p) {
	delete static_cast<cxxt_obj *>(p);
}

CXXT_SITE void *cxxt_site_new_array(size_t size) {
	char *p = new char[size];
	USE(p);
	return p;
}

CXXT_SITE void *cxxt_site_new_aligned_expr(size_t size) {
	(void)size;
	cxxt_aligned_obj *o = new cxxt_aligned_obj;
	USE(o);
	return o;
}

CXXT_SITE void cxxt_site_delete_aligned_expr(void *p) {
	delete static_cast<cxxt_aligned_obj *>(p);
}

CXXT_SITE void *cxxt_site_new_nothrow(size_t size) {
	void *p = ::operator new(size, std::nothrow);
	USE(p);
	return p;
}

} // extern "C"
