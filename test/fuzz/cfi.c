/*
 * test/fuzz/cfi.c - libFuzzer target: the profiler's .eh_frame reader
 * and unwind step (src/prof/prof_cfi.c: prof_cfi_obj_init,
 * prof_cfi_find, prof_cfi_apply, prof_cfi_step).
 *
 * Each input is: a flags byte (bit 0: the pc is absolute, else relative
 * to the tables; bit 1: the pc is an innermost frame's, else a return
 * address; bit 2: no .eh_frame_hdr, so .eh_frame is scanned), 2 bytes
 * (little-endian) N, 8 bytes pc, 8 bytes rbp, then N bytes of
 * .eh_frame_hdr directly followed by .eh_frame (the rest).  The tables
 * are copied into one heap block of exactly their size, so that a read
 * past them is an ASan report; a few pcs around the given one are looked
 * up, and each row found is applied to a stack made of the input's
 * first bytes.  Nothing may crash, read out of bounds or hang; a row
 * must hold its pc, and a step must move up the stack.  Built and run
 * by scripts/fuzz.sh (doc/reliability.md).
 */
#include "malloc_prof/internal/internal.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint64_t le64(const uint8_t *p) {
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
	if (size < 19)
		return 0;
	uint8_t flags = data[0];
	size_t n = (size_t)(data[1] | data[2] << 8);
	uint64_t pc0 = le64(data + 3), rbp0 = le64(data + 11);
	data += 19;
	size -= 19;
	if (n > size)
		n = size;
	uint8_t *block = malloc(size != 0 ? size : 1);
	if (block == NULL)
		return 0;
	memcpy(block, data, size);
	prof_cfi_obj_t obj = {
		.hdr = (flags & 4) != 0 || n == 0 ? NULL : block,
		.hdr_end = block + n,
		.eh = block + n,
		.eh_end = block + size,
	};
	/* The loader's view: the header and the segment around it. */
	prof_cfi_obj_t from_hdr;
	if (n != 0 && !prof_cfi_obj_init(&from_hdr, block, n,
	    (uintptr_t)block, (uintptr_t)block + size)) {
		if (from_hdr.eh < block || from_hdr.eh >= block + size)
			abort();
	}
	/* A stack of 64 words from the input. */
	uintptr_t stack[64];
	memset(stack, 0, sizeof(stack));
	memcpy(stack, data, size < sizeof(stack) ? size : sizeof(stack));
	uintptr_t lo = (uintptr_t)stack, hi = (uintptr_t)(stack + 64);
	uintptr_t base = (flags & 1) != 0 ? 0 : (uintptr_t)block;
	for (uintptr_t d = 0; d < 4; d++) {
		uintptr_t pc = base + (uintptr_t)pc0 + d * 3;
		prof_cfi_rule_t r;
		prof_cfi_err_t e = prof_cfi_find(&obj, pc, &r);
		if (e > PROF_CFI_END)
			abort();
		if (e != PROF_CFI_OK)
			continue;
		if (pc < r.lo || pc >= r.hi)
			abort();
		prof_cfi_regs_t g = {pc, lo + (uintptr_t)(rbp0 >> 56) % 64 * 8,
		    (rbp0 & 1) != 0 ? (uintptr_t)rbp0 : lo + (uintptr_t)rbp0 %
		    512};
		prof_cfi_regs_t before = g;
		e = prof_cfi_apply(&r, &g, lo, hi);
		if (e == PROF_CFI_OK && g.rsp <= before.rsp)
			abort();
		if (e != PROF_CFI_OK && memcmp(&g, &before, sizeof(g)) != 0)
			abort();
		g = before;
		g.rip = pc + ((flags & 2) != 0 ? 0 : 1);
		(void)prof_cfi_step(&obj, &g, (flags & 2) != 0, lo, hi);
	}
	free(block);
	return 0;
}
