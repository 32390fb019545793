/*
 * test/fuzz/dwarf.c - libFuzzer target: malloc-prof's DWARF line-table
 * reader (bin/mp_dwarf.c: mp_lines_load, mp_lines_find; versions 2 to 5).
 *
 * Each input is: 2 bytes (little-endian) N, then N bytes that are both
 * .debug_str and .debug_line_str, then the .debug_line section; the
 * target wraps them in a minimal ELF file (section headers and names
 * only) and loads its line table, so that the fuzzer spends its time on
 * the line programs rather than on finding the sections (the elf target
 * covers damaged ELF files).  Nothing may crash or read out of bounds,
 * and the table must hold: rows sorted by address, each naming a file of
 * the table, a sequence's end or no file; a lookup at each row's address
 * finds a row at or before it, and its file is one of the table's
 * strings.  This file includes bin/mp_dwarf.c to see the table.  Built
 * with test/fuzz/bin_stubs.c, run by scripts/fuzz.sh (doc/reliability.md).
 */
#include "malloc-prof.h"

#include "../../bin/mp_dwarf.c"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bin_stubs.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char fuzz_names[] =
    "\0.shstrtab\0.debug_line\0.debug_str\0.debug_line_str";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
	if (size < 2)
		return 0;
	size_t nstr = (size_t)(data[0] | data[1] << 8);
	data += 2;
	size -= 2;
	if (nstr > size)
		nstr = size;
	/* ELF header, names, strings, line table, section headers. */
	size_t names = sizeof(Elf64_Ehdr), str = names + sizeof(fuzz_names);
	size_t line = str + nstr, shoff = (line + size - nstr + 7) & ~(size_t)7;
	size_t total = shoff + 5 * sizeof(Elf64_Shdr);
	uint8_t *img = calloc(1, total);
	if (img == NULL)
		abort();
	Elf64_Ehdr *eh = (Elf64_Ehdr *)img;
	memcpy(eh->e_ident, ELFMAG, SELFMAG);
	eh->e_ident[EI_CLASS] = ELFCLASS64;
	eh->e_ident[EI_DATA] = ELFDATA2LSB;
	eh->e_shoff = shoff;
	eh->e_shentsize = sizeof(Elf64_Shdr);
	eh->e_shnum = 5;
	eh->e_shstrndx = 1;
	memcpy(img + names, fuzz_names, sizeof(fuzz_names));
	memcpy(img + str, data, nstr);
	memcpy(img + line, data + nstr, size - nstr);
	Elf64_Shdr sh[5] = {
		[1] = { .sh_name = 1, .sh_type = SHT_STRTAB,
			.sh_offset = names, .sh_size = sizeof(fuzz_names) },
		[2] = { .sh_name = 11, .sh_type = SHT_PROGBITS,
			.sh_offset = line, .sh_size = size - nstr },
		[3] = { .sh_name = 23, .sh_type = SHT_PROGBITS,
			.sh_offset = str, .sh_size = nstr },
		[4] = { .sh_name = 34, .sh_type = SHT_PROGBITS,
			.sh_offset = str, .sh_size = nstr },
	};
	memcpy(img + shoff, sh, sizeof(sh));

	const char *why;
	mp_lines_t *l = mp_lines_load(img, total, &why);
	if (l == NULL)
		abort();	/* the table exists: never NULL */
	for (size_t i = 0; i < l->nfiles; i++)
		(void)strlen(l->files[i]);
	for (size_t i = 0; i < l->nrows; i++) {
		const mp_lrow_t *r = &l->rows[i];
		if (i > 0 && l->rows[i - 1].addr > r->addr)
			abort();
		if (r->file >= l->nfiles && r->file < UINT32_MAX - 1)
			abort();
		const char *file;
		unsigned ln;
		if (mp_lines_find(l, r->addr, &file, &ln)) {
			bool known = false;
			for (size_t k = 0; k < l->nfiles && !known; k++)
				known = file == l->files[k];
			if (!known || ln == 0)
				abort();
		}
	}
	mp_lines_free(l);
	free(img);
	return 0;
}
