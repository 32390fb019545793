/*
 * test/fuzz/elf.c - libFuzzer target: malloc-prof's ELF reader
 * (bin/mp_symbolize.c: headers, program headers, build ID notes, symbol
 * tables, debug links; with --lines, the DWARF line table through
 * bin/mp_dwarf.c).
 *
 * Each input is a whole ELF file, given to the symbolizer in memory
 * (mp_sym_add_image) as the file a profile's one mapping maps at
 * 0x10000000, offset 0; the frames at the start of each loadable
 * segment, its middle, its last byte and at every function symbol are
 * named (mp_sym_frame_line, --lines on).  Nothing may crash or read out
 * of bounds, and every lookup stays in the image: each symbol's name
 * lies inside the file, NUL-terminated there; the symbols are sorted
 * with one per address; a symbol found for an address starts at or
 * before it; every name returned is the symbolizer's buffer, a string
 * shorter than it; warnings are one line.  This file includes
 * bin/mp_symbolize.c to see the symbol table.  Built with the other bin/
 * sources and test/fuzz/bin_stubs.c, run by scripts/fuzz.sh
 * (doc/reliability.md).
 */
#include "malloc-prof.h"

#include "../../bin/mp_symbolize.c"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bin_stubs.h"

#define FUZZ_BASE 0x10000000u

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fuzz_name(mp_symbolizer_t *sym, const mp_profile_t *prof,
    uint64_t off) {
	const char *file;
	unsigned line;
	const char *name = mp_sym_frame_line(sym, prof, FUZZ_BASE + off, true,
	    &file, &line);
	if (name != sym->buf || memchr(name, '\0', sizeof(sym->buf)) == NULL ||
	    (file == NULL && line != 0) || (file != NULL && line == 0))
		abort();
	if (file != NULL)
		(void)strlen(file);	/* a string (ASan checks it) */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
	mp_symbolizer_t *sym = mp_sym_new(NULL, "/nonexistent/fuzz-debug",
	    true);
	mp_elf_t *e = (mp_elf_t *)mp_sym_add_image(sym, "/nonexistent/fuzz.so",
	    data, size);
	/* The symbols: names in the image, sorted, one per address. */
	for (size_t i = 0; i < e->nsyms; i++) {
		const mp_sym_t *s = &e->syms[i];
		const uint8_t *n = (const uint8_t *)s->name;
		if (n < data || n >= data + size ||
		    memchr(n, '\0', (size_t)(data + size - n)) == NULL)
			abort();
		if (i > 0 && e->syms[i - 1].addr >= s->addr)
			abort();
		const mp_sym_t *f = mp_sym_lookup(e, s->addr);
		if (f != s)
			abort();
	}
	mp_mapping_t map = { .start = FUZZ_BASE, .end = FUZZ_BASE +
	    (size ? size : 1), .offset = 0, .perms = "r-xp",
	    .path = (char *)"/nonexistent/fuzz.so" };
	mp_profile_t prof = { .file = "fuzz", .maps = &map, .nmaps = 1,
	    .have_maps = true, .format = "heap_v2" };
	const char *why;
	const mp_elf_t *f = mp_sym_file(sym, &map, &why);
	if (f != NULL ? f != e : why == NULL)
		abort();
	(void)mp_sym_in_alloc_lib(sym, &prof, FUZZ_BASE);
	/* Frames at each loadable segment and at each function (the first
	 * 64): names from the table, file:line from the line table. */
	for (size_t i = 0; i < e->nloads && i < 16; i++) {
		const mp_load_t *ld = &e->loads[i];
		if (ld->offset >= size)
			continue;
		uint64_t last = ld->filesz ? ld->filesz - 1 : 0;
		fuzz_name(sym, &prof, ld->offset);
		if (last / 2 < size - ld->offset)
			fuzz_name(sym, &prof, ld->offset + last / 2);
		if (last < size - ld->offset)
			fuzz_name(sym, &prof, ld->offset + last);
		for (size_t k = 0; k < e->nsyms && k < 64; k++) {
			uint64_t a = e->syms[k].addr;
			if (a >= ld->vaddr && a - ld->vaddr < ld->filesz &&
			    a - ld->vaddr < size - ld->offset)
				fuzz_name(sym, &prof, a - ld->vaddr + ld->offset);
		}
	}
	mp_sym_free(sym);
	return 0;
}
