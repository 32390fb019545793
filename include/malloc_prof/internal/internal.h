/*
 * internal.h: the one header every library source includes.  It only
 * includes the subsystems' headers, in their dependency order (each also
 * includes what it needs, so one can be included alone):
 *   types.h  every struct and constant, the lock ranks
 *   sys.h    src/sys/: output, assertions, the OS, mutexes
 *   alloc.h  src/alloc/: the allocator
 *   ctl.h    src/ctl/: options, mallctl, statistics printing
 *   prof.h   src/prof/: the heap profiler
 * Conventions: a `bool` return means "true on error" unless said
 * otherwise; functions named *_locked expect the named lock to be held.
 */
#ifndef MP_INTERNAL_H
#define MP_INTERNAL_H

#include "malloc_prof/internal/types.h"
#include "malloc_prof/internal/sys.h"
#include "malloc_prof/internal/alloc.h"
#include "malloc_prof/internal/ctl.h"
#include "malloc_prof/internal/prof.h"

#endif /* MP_INTERNAL_H */
