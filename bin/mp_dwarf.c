/*
 * bin/mp_dwarf.c - file:line for malloc-prof --lines, from the DWARF line
 * table (.debug_line, versions 2 to 5) of an ELF file or its debug file.
 *
 * Every unit's line program is run once and its rows (address, file,
 * line) are kept in one array sorted by address; a lookup is a binary
 * search.  Only what a name needs is kept: no columns, no is_stmt, no
 * views.  Sequences starting at address 0 are dropped: they are functions
 * the linker discarded, and would shadow real code at low addresses.
 * Sections compressed with zlib (SHF_COMPRESSED, as in Debian's debug
 * packages) are read when the tool was built with zlib.
 */
#include "malloc-prof.h"
#include "malloc_prof/internal/config.h"

#include <elf.h>
#include <stdlib.h>
#include <string.h>

#if MP_HAVE_ZLIB
#include <zlib.h>
#endif

typedef struct {
	uint64_t addr;
	uint32_t file;		/* index in files; UINT32_MAX: end of a sequence */
	uint32_t line;
} mp_lrow_t;

struct mp_lines {
	mp_lrow_t *rows;
	size_t nrows, cap_rows;
	char **files;
	size_t nfiles, cap_files;
};

/* A bounded reader: any read past END sets bad and returns 0. */
typedef struct {
	const uint8_t *p, *end;
	bool bad;
} mp_rd_t;

static uint64_t mp_rd_fixed(mp_rd_t *r, unsigned n) {
	if (r->bad || (size_t)(r->end - r->p) < n) {
		r->bad = true;
		return 0;
	}
	uint64_t v = 0;
	for (unsigned i = 0; i < n; i++)	/* little-endian files only */
		v |= (uint64_t)r->p[i] << (8 * i);
	r->p += n;
	return v;
}

static uint64_t mp_rd_uleb(mp_rd_t *r) {
	uint64_t v = 0;
	for (unsigned shift = 0;; shift += 7) {
		if (r->bad || r->p >= r->end) {
			r->bad = true;
			return 0;
		}
		uint8_t b = *r->p++;
		if (shift < 64)
			v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80))
			return v;
	}
}

static int64_t mp_rd_sleb(mp_rd_t *r) {
	/* Unsigned arithmetic: a sign extended from bit 63 must not
	 * shift into the sign of an int64_t (undefined behaviour). */
	uint64_t v = 0;
	unsigned shift = 0;
	uint8_t b;
	do {
		if (r->bad || r->p >= r->end) {
			r->bad = true;
			return 0;
		}
		b = *r->p++;
		if (shift < 64)
			v |= (uint64_t)(b & 0x7f) << shift;
		shift += 7;
	} while (b & 0x80);
	if (shift < 64 && (b & 0x40))
		v |= ~(uint64_t)0 << shift;
	return (int64_t)v;
}

static const char *mp_rd_str(mp_rd_t *r) {
	const uint8_t *nul = r->bad ? NULL : memchr(r->p, 0,
	    (size_t)(r->end - r->p));
	if (nul == NULL) {
		r->bad = true;
		return "";
	}
	const char *s = (const char *)r->p;
	r->p = nul + 1;
	return s;
}

static void mp_rd_skip(mp_rd_t *r, uint64_t n) {
	if (r->bad || (uint64_t)(r->end - r->p) < n) {
		r->bad = true;
		return;
	}
	r->p += n;
}

/* A section's bytes, decompressed if need be (*owned is then to free). */
typedef struct {
	const uint8_t *data;
	size_t size;
	void *owned;
} mp_sect_t;

static bool mp_sect_get(const uint8_t *img, size_t size, const Elf64_Shdr *s,
    mp_sect_t *out, const char **why) {
	memset(out, 0, sizeof(*out));
	if (s->sh_type == SHT_NOBITS || s->sh_offset > size ||
	    s->sh_size > size - s->sh_offset) {
		*why = "damaged section header";
		return false;
	}
	const uint8_t *p = img + s->sh_offset;
	if (!(s->sh_flags & SHF_COMPRESSED)) {
		out->data = p;
		out->size = s->sh_size;
		return true;
	}
	if (s->sh_size < sizeof(Elf64_Chdr)) {
		*why = "damaged compressed section";
		return false;
	}
	Elf64_Chdr ch;
	memcpy(&ch, p, sizeof(ch));
#if MP_HAVE_ZLIB
	if (ch.ch_type != ELFCOMPRESS_ZLIB) {
		*why = "compressed with an unknown method (not zlib)";
		return false;
	}
	/* Deflate expands at most 1032 times: a larger size is damage,
	 * and must not be allocated (a header can claim 16 EiB). */
	if (ch.ch_size > ((size_t)1 << 34) ||
	    ch.ch_size / 1032 > s->sh_size - sizeof(ch)) {
		*why = "damaged compressed section";
		return false;
	}
	uLongf len = (uLongf)ch.ch_size;
	void *buf = mp_xmalloc(len ? len : 1);
	if (uncompress(buf, &len, p + sizeof(ch),
	    (uLong)(s->sh_size - sizeof(ch))) != Z_OK || len != ch.ch_size) {
		free(buf);
		*why = "damaged compressed section";
		return false;
	}
	out->data = buf;
	out->size = len;
	out->owned = buf;
	return true;
#else
	(void)ch;
	*why = "its DWARF sections are compressed and malloc-prof was built "
	    "without zlib (install zlib1g-dev and rebuild)";
	return false;
#endif
}

/* "a/b/../c" -> "a/c", "./" dropped, in place (PATH holds 4096 bytes):
 * compilers write build-relative paths such as "../../src/x.c". */
static void mp_normalize(char *path) {
	char buf[4096];
	const char *seg[512];
	size_t n = 0;
	bool abs = path[0] == '/';
	char *save = NULL;
	snprintf(buf, sizeof(buf), "%s", path);
	for (char *t = strtok_r(buf, "/", &save); t != NULL;
	    t = strtok_r(NULL, "/", &save)) {
		if (strcmp(t, ".") == 0)
			continue;
		if (strcmp(t, "..") == 0) {
			if (n > 0 && strcmp(seg[n - 1], "..") != 0) {
				n--;
				continue;
			}
			if (abs)
				continue;	/* "/.." is "/" */
		}
		if (n < sizeof(seg) / sizeof(seg[0]))
			seg[n++] = t;
	}
	size_t len = 0;
	if (abs)
		path[len++] = '/';
	for (size_t i = 0; i < n; i++) {
		int w = snprintf(path + len, 4096 - len, "%s%s", i ? "/" : "",
		    seg[i]);
		if (w < 0 || (size_t)w >= 4096 - len)
			break;
		len += (size_t)w;
	}
	if (len == 0)
		path[len++] = '.';
	path[len] = '\0';
}

static uint32_t mp_lines_add_file(mp_lines_t *l, const char *dir,
    const char *name) {
	char path[4096];
	if (name[0] == '/' || dir == NULL || dir[0] == '\0')
		snprintf(path, sizeof(path), "%s", name);
	else
		snprintf(path, sizeof(path), "%s/%s", dir, name);
	mp_normalize(path);
	if (l->nfiles == l->cap_files) {
		l->cap_files = l->cap_files ? 2 * l->cap_files : 64;
		l->files = mp_xrealloc(l->files, l->cap_files * sizeof(*l->files));
	}
	l->files[l->nfiles] = mp_xstrdup(path);
	return (uint32_t)l->nfiles++;
}

static void mp_lines_row(mp_lines_t *l, uint64_t addr, uint32_t file,
    uint32_t line) {
	if (l->nrows == l->cap_rows) {
		l->cap_rows = l->cap_rows ? 2 * l->cap_rows : 4096;
		l->rows = mp_xrealloc(l->rows, l->cap_rows * sizeof(*l->rows));
	}
	l->rows[l->nrows++] = (mp_lrow_t){ addr, file, line };
}

/* DWARF 5 forms that may appear in a line table header. */
enum {
	MP_FORM_block2 = 0x03, MP_FORM_block4 = 0x04, MP_FORM_data2 = 0x05,
	MP_FORM_data4 = 0x06, MP_FORM_data8 = 0x07, MP_FORM_string = 0x08,
	MP_FORM_block = 0x09, MP_FORM_block1 = 0x0a, MP_FORM_data1 = 0x0b,
	MP_FORM_sdata = 0x0d, MP_FORM_strp = 0x0e, MP_FORM_udata = 0x0f,
	MP_FORM_data16 = 0x1e, MP_FORM_line_strp = 0x1f,
};

/* Reads one attribute of FORM: a string into *str, a number into *num.
 * False for forms a line table header cannot use here (strx). */
static bool mp_rd_form(mp_rd_t *r, uint64_t form, unsigned offsz,
    const mp_sect_t *str, const mp_sect_t *line_str, const char **s,
    uint64_t *num) {
	*s = NULL;
	*num = 0;
	uint64_t off;
	const mp_sect_t *tab;
	switch (form) {
	case MP_FORM_string: *s = mp_rd_str(r); return true;
	case MP_FORM_strp:
	case MP_FORM_line_strp:
		off = mp_rd_fixed(r, offsz);
		tab = form == MP_FORM_strp ? str : line_str;
		if (tab->data == NULL || off >= tab->size ||
		    memchr(tab->data + off, 0, tab->size - off) == NULL) {
			*s = "?";
			return true;
		}
		*s = (const char *)tab->data + off;
		return true;
	case MP_FORM_udata: *num = mp_rd_uleb(r); return true;
	case MP_FORM_sdata: *num = (uint64_t)mp_rd_sleb(r); return true;
	case MP_FORM_data1: *num = mp_rd_fixed(r, 1); return true;
	case MP_FORM_data2: *num = mp_rd_fixed(r, 2); return true;
	case MP_FORM_data4: *num = mp_rd_fixed(r, 4); return true;
	case MP_FORM_data8: *num = mp_rd_fixed(r, 8); return true;
	case MP_FORM_data16: mp_rd_skip(r, 16); return true;
	case MP_FORM_block1: mp_rd_skip(r, mp_rd_fixed(r, 1)); return true;
	case MP_FORM_block2: mp_rd_skip(r, mp_rd_fixed(r, 2)); return true;
	case MP_FORM_block4: mp_rd_skip(r, mp_rd_fixed(r, 4)); return true;
	case MP_FORM_block: mp_rd_skip(r, mp_rd_uleb(r)); return true;
	default: return false;
	}
}

/* The v5 directory or file table: entries of (content type, form) pairs.
 * Fills names/dirs (directory indexes) for N entries. */
static bool mp_rd_entries(mp_rd_t *r, unsigned offsz, const mp_sect_t *str,
    const mp_sect_t *line_str, const char ***names, uint64_t **dirs,
    uint64_t *n) {
	uint8_t nfmt = (uint8_t)mp_rd_fixed(r, 1);
	uint64_t fmt[32][2];
	if (nfmt > 32)
		return false;
	for (unsigned i = 0; i < nfmt; i++) {
		fmt[i][0] = mp_rd_uleb(r);
		fmt[i][1] = mp_rd_uleb(r);
	}
	*n = mp_rd_uleb(r);
	if (r->bad || *n > (uint64_t)(r->end - r->p))
		return false;
	*names = mp_xcalloc(*n ? *n : 1, sizeof(**names));
	*dirs = mp_xcalloc(*n ? *n : 1, sizeof(**dirs));
	for (uint64_t e = 0; e < *n; e++) {
		(*names)[e] = "?";
		for (unsigned i = 0; i < nfmt; i++) {
			const char *s;
			uint64_t num;
			if (!mp_rd_form(r, fmt[i][1], offsz, str, line_str, &s,
			    &num))
				return false;
			if (fmt[i][0] == 1 && s != NULL)	/* DW_LNCT_path */
				(*names)[e] = s;
			else if (fmt[i][0] == 2)	/* DW_LNCT_directory_index */
				(*dirs)[e] = num;
		}
	}
	return !r->bad;
}

/* One unit at R (which ends at the unit's end). */
static void mp_lines_unit(mp_lines_t *l, mp_rd_t *r, unsigned offsz,
    const mp_sect_t *str, const mp_sect_t *line_str) {
	unsigned version = (unsigned)mp_rd_fixed(r, 2);
	if (version < 2 || version > 5)
		return;
	unsigned addrsz = 8;
	if (version >= 5) {
		addrsz = (unsigned)mp_rd_fixed(r, 1);
		mp_rd_fixed(r, 1);	/* segment selector size */
	}
	uint64_t hlen = mp_rd_fixed(r, offsz);
	if (r->bad || hlen > (uint64_t)(r->end - r->p))
		return;
	mp_rd_t prog = { r->p + hlen, r->end, false };
	unsigned min_inst = (unsigned)mp_rd_fixed(r, 1);
	if (version >= 4)
		mp_rd_fixed(r, 1);	/* max ops per instruction: no VLIW */
	mp_rd_fixed(r, 1);		/* default is_stmt */
	int line_base = (int8_t)mp_rd_fixed(r, 1);
	unsigned line_range = (unsigned)mp_rd_fixed(r, 1);
	unsigned opcode_base = (unsigned)mp_rd_fixed(r, 1);
	uint8_t oplen[256] = { 0 };
	for (unsigned i = 1; i < opcode_base; i++)
		oplen[i] = (uint8_t)mp_rd_fixed(r, 1);
	if (r->bad || line_range == 0 || opcode_base == 0 ||
	    (addrsz != 4 && addrsz != 8))
		return;

	/* Files of this unit, as indexes into l->files. */
	uint32_t *fidx = NULL;
	uint64_t nf = 0;
	uint32_t first_file = 0;	/* v5 numbers from 0, older from 1 */
	if (version >= 5) {
		const char **dnames = NULL, **fnames = NULL;
		uint64_t *ddirs = NULL, *fdirs = NULL, nd = 0;
		if (mp_rd_entries(r, offsz, str, line_str, &dnames, &ddirs,
		    &nd) && mp_rd_entries(r, offsz, str, line_str, &fnames,
		    &fdirs, &nf)) {
			fidx = mp_xcalloc(nf ? nf : 1, sizeof(*fidx));
			for (uint64_t i = 0; i < nf; i++) {
				const char *dir = fdirs[i] < nd ?
				    dnames[fdirs[i]] : NULL;
				char buf[4096];
				/* Relative directories are relative to the
				 * compilation directory, entry 0. */
				if (dir != NULL && dir[0] != '/' && fdirs[i] != 0 &&
				    nd > 0) {
					snprintf(buf, sizeof(buf), "%s/%s",
					    dnames[0], dir);
					dir = buf;
				}
				fidx[i] = mp_lines_add_file(l, dir, fnames[i]);
			}
		} else {
			nf = 0;
		}
		free(dnames);
		free(ddirs);
		free(fnames);
		free(fdirs);
		if (fidx == NULL)
			return;
	} else {
		const char *dirs[256];
		unsigned nd = 0;
		for (;;) {
			const char *d = mp_rd_str(r);
			if (r->bad || d[0] == '\0')
				break;
			if (nd < 256)
				dirs[nd++] = d;
		}
		size_t cap = 0;
		first_file = 1;
		for (;;) {
			const char *name = mp_rd_str(r);
			if (r->bad || name[0] == '\0')
				break;
			uint64_t d = mp_rd_uleb(r);
			mp_rd_uleb(r);	/* mtime */
			mp_rd_uleb(r);	/* length */
			if (nf == cap) {
				cap = cap ? 2 * cap : 32;
				fidx = mp_xrealloc(fidx, cap * sizeof(*fidx));
			}
			/* Directory 0 is the compilation directory, which
			 * only .debug_info has: the name stays relative. */
			fidx[nf++] = mp_lines_add_file(l, d >= 1 && d <= nd ?
			    dirs[d - 1] : NULL, name);
		}
		if (r->bad) {
			free(fidx);
			return;
		}
	}

	/* The line program. */
	uint64_t addr = 0, file = 1, line = 1;
	size_t seq_first = l->nrows;
	uint64_t seq_addr = 0;
	bool seq_started = false;
#define MP_EMIT() do {							\
		if (!seq_started) {					\
			seq_started = true;				\
			seq_addr = addr;				\
		}							\
		uint64_t fi = file - first_file;			\
		mp_lines_row(l, addr, fi < nf ? fidx[fi] : UINT32_MAX - 1, \
		    (uint32_t)line);					\
	} while (0)
	while (!prog.bad && prog.p < prog.end) {
		unsigned op = (unsigned)mp_rd_fixed(&prog, 1);
		if (op >= opcode_base) {
			unsigned adj = op - opcode_base;
			addr += (uint64_t)(adj / line_range) * min_inst;
			line += (uint64_t)(int64_t)(line_base +
			    (int)(adj % line_range));
			MP_EMIT();
			continue;
		}
		switch (op) {
		case 0: {	/* extended */
			uint64_t len = mp_rd_uleb(&prog);
			if (prog.bad || len == 0 ||
			    len > (uint64_t)(prog.end - prog.p)) {
				prog.bad = true;
				break;
			}
			const uint8_t *next = prog.p + len;
			unsigned sub = (unsigned)mp_rd_fixed(&prog, 1);
			if (sub == 1) {		/* end_sequence */
				if (seq_started && seq_addr == 0)
					l->nrows = seq_first;	/* discarded */
				else
					mp_lines_row(l, addr, UINT32_MAX, 0);
				addr = 0;
				file = 1;
				line = 1;
				seq_started = false;
				seq_first = l->nrows;
			} else if (sub == 2 && len - 1 == addrsz) {
				addr = mp_rd_fixed(&prog, addrsz);
			}
			prog.p = next;
			break;
		}
		case 1: MP_EMIT(); break;			/* copy */
		case 2: addr += mp_rd_uleb(&prog) * min_inst; break;
		case 3: line += (uint64_t)mp_rd_sleb(&prog); break;
		case 4: file = mp_rd_uleb(&prog); break;
		case 8:					/* const_add_pc */
			addr += (uint64_t)((255 - opcode_base) / line_range) *
			    min_inst;
			break;
		case 9: addr += mp_rd_fixed(&prog, 2); break;
		default:
			/* Other standard opcodes: skip their arguments. */
			for (unsigned i = 0; i < oplen[op]; i++)
				mp_rd_uleb(&prog);
		}
	}
#undef MP_EMIT
	/* A sequence without its end (damaged unit) is dropped. */
	if (seq_started)
		l->nrows = seq_first;
	free(fidx);
}

static int mp_lrow_cmp(const void *a, const void *b) {
	const mp_lrow_t *x = a, *y = b;
	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	/* At one address a sequence's end comes before the next one's
	 * first row, so that the lookup finds the row. */
	bool xe = x->file == UINT32_MAX, ye = y->file == UINT32_MAX;
	return (int)ye - (int)xe;
}

mp_lines_t *mp_lines_load(const uint8_t *img, size_t size, const char **why) {
	*why = NULL;
	if (size < sizeof(Elf64_Ehdr))
		return NULL;
	const Elf64_Ehdr *eh = (const void *)img;
	if (eh->e_shoff == 0 || eh->e_shoff % 8 != 0 || eh->e_shoff > size ||
	    (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr) > size - eh->e_shoff ||
	    eh->e_shstrndx >= eh->e_shnum)
		return NULL;
	const Elf64_Shdr *sh = (const void *)(img + eh->e_shoff);
	const Elf64_Shdr *names = &sh[eh->e_shstrndx];
	if (names->sh_offset > size || names->sh_size > size - names->sh_offset)
		return NULL;
	const Elf64_Shdr *line = NULL, *str = NULL, *line_str = NULL;
	for (size_t i = 0; i < eh->e_shnum; i++) {
		if (sh[i].sh_name >= names->sh_size)
			continue;
		const char *n = (const char *)img + names->sh_offset + sh[i].sh_name;
		if (memchr(n, 0, names->sh_size - sh[i].sh_name) == NULL)
			continue;
		if (strcmp(n, ".debug_line") == 0)
			line = &sh[i];
		else if (strcmp(n, ".debug_str") == 0)
			str = &sh[i];
		else if (strcmp(n, ".debug_line_str") == 0)
			line_str = &sh[i];
	}
	if (line == NULL || line->sh_type == SHT_NOBITS)
		return NULL;
	mp_sect_t sl, ss = { 0 }, sls = { 0 };
	if (!mp_sect_get(img, size, line, &sl, why))
		return NULL;
	if (str != NULL && !mp_sect_get(img, size, str, &ss, why))
		memset(&ss, 0, sizeof(ss));
	if (line_str != NULL && !mp_sect_get(img, size, line_str, &sls, why))
		memset(&sls, 0, sizeof(sls));
	*why = NULL;

	mp_lines_t *l = mp_xcalloc(1, sizeof(*l));
	mp_rd_t r = { sl.data, sl.data + sl.size, false };
	while (!r.bad && r.p < r.end) {
		unsigned offsz = 4;
		uint64_t len = mp_rd_fixed(&r, 4);
		if (len == 0xffffffffu) {
			offsz = 8;
			len = mp_rd_fixed(&r, 8);
		} else if (len >= 0xfffffff0u) {
			break;	/* reserved lengths: not DWARF we know */
		}
		if (r.bad || len > (uint64_t)(r.end - r.p))
			break;
		mp_rd_t unit = { r.p, r.p + len, false };
		mp_lines_unit(l, &unit, offsz, &ss, &sls);
		r.p += len;
	}
	free(sl.owned);
	free(ss.owned);
	free(sls.owned);
	if (l->nrows > 0)
		qsort(l->rows, l->nrows, sizeof(*l->rows), mp_lrow_cmp);
	return l;
}

bool mp_lines_find(const mp_lines_t *l, uint64_t addr, const char **file,
    unsigned *line) {
	size_t lo = 0, hi = l->nrows;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (l->rows[mid].addr <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return false;
	const mp_lrow_t *row = &l->rows[lo - 1];
	if (row->file >= l->nfiles || row->line == 0)
		return false;
	*file = l->files[row->file];
	*line = row->line;
	return true;
}

void mp_lines_free(mp_lines_t *l) {
	if (l == NULL)
		return;
	for (size_t i = 0; i < l->nfiles; i++)
		free(l->files[i]);
	free(l->files);
	free(l->rows);
	free(l);
}
