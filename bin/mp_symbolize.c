/*
 * bin/mp_symbolize.c - names for the addresses of a profile, read from the
 * ELF files its MAPPED_LIBRARIES section lists, without addr2line, objdump
 * or nm (jeprof shells out to them once per file and is slow and fragile,
 * doc/malloc-prof.md).
 *
 * An address is placed in its file through the mapping that holds it: the
 * file offset is pc - start + offset, and the PT_LOAD segment covering that
 * offset turns it into the address the symbol tables use.  That one rule
 * serves executables, PIE executables and shared libraries alike.  Symbols
 * come from .symtab and .dynsym, or from a separate debug file found by
 * GNU build ID or .gnu_debuglink.  Files are mmapped read-only; each file's
 * functions are sorted once and looked up by binary search.
 *
 * A frame that cannot be named is shown as FILE+0xADDR (the address in the
 * file; for a file that cannot be opened, the file offset), and the file
 * gets one warning saying why and what to do.
 */
#include "malloc-prof.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct {
	uint64_t addr, size;
	const char *name;	/* in the mmapped string table */
	uint8_t rank;		/* lower wins among symbols at one address */
} mp_sym_t;

typedef struct {
	uint64_t offset, filesz, vaddr;
} mp_load_t;

/* An mmapped file (or, from mp_sym_add_image, the caller's bytes). */
typedef struct {
	const uint8_t *data;
	size_t size;
	uint64_t inode;
	bool mapped;		/* ours to munmap */
} mp_blob_t;

struct mp_elf {
	char *key;		/* the path in the profile */
	char *path;		/* the file read (PROGRAM may replace key) */
	int err;		/* errno of a failed open, else 0 */
	const char *bad;	/* why the file is unusable as ELF, or NULL */
	mp_blob_t file, debug;
	mp_load_t *loads;
	size_t nloads;
	mp_sym_t *syms;
	size_t nsyms;
	bool has_symtab;	/* a full symbol table (own or debug file) */
	bool alloc_lib;		/* a shared library defining malloc */
	char build_id[129];	/* hex */
	char *debug_file;
	char *debug_note;	/* why no debug file was used, for warnings */
	bool warned;
	bool inode_checked;
	mp_lines_t *lines;	/* --lines: loaded at the first lookup */
	bool lines_tried;
};

struct mp_symbolizer {
	char *program;		/* PROGRAM, or NULL */
	const char *program_base;
	char *debug_dir;
	bool lines;		/* --lines */
	mp_elf_t **elves;
	size_t nelves, cap;
	mp_elf_t *last;		/* the file of the previous lookup */
	bool warned_deleted_any;
	bool warned_unmapped;	/* an address outside the profile's map */
	char buf[4096];
};

static const char *mp_basename(const char *path) {
	const char *s = strrchr(path, '/');
	return s ? s + 1 : path;
}

static bool mp_blob_open(const char *path, mp_blob_t *b, int *err) {
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		*err = errno;
		return false;
	}
	struct stat st;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size == 0) {
		*err = S_ISREG(st.st_mode) ? EINVAL : EISDIR;
		close(fd);
		return false;
	}
	void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (p == MAP_FAILED) {
		*err = errno;
		return false;
	}
	b->data = p;
	b->size = (size_t)st.st_size;
	b->inode = (uint64_t)st.st_ino;
	b->mapped = true;
	return true;
}

static void mp_blob_close(mp_blob_t *b) {
	if (b->data != NULL && b->mapped)
		munmap((void *)b->data, b->size);
	b->data = NULL;
	b->size = 0;
}

/* Whether [off, off + len) lies inside the blob (no overflow). */
static bool mp_in(const mp_blob_t *b, uint64_t off, uint64_t len) {
	return off <= b->size && len <= b->size - off;
}

/* The ELF header of B if it is a 64-bit ELF file of this byte order. */
static const Elf64_Ehdr *mp_ehdr(const mp_blob_t *b, const char **why) {
	if (b->size < sizeof(Elf64_Ehdr) ||
	    memcmp(b->data, ELFMAG, SELFMAG) != 0) {
		*why = "not an ELF file";
		return NULL;
	}
	const Elf64_Ehdr *eh = (const void *)b->data;
	unsigned char host = (union { uint16_t u; uint8_t c[2]; }){ 1 }.c[0] ?
	    ELFDATA2LSB : ELFDATA2MSB;
	if (eh->e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh->e_ident[EI_DATA] != host) {
		*why = "not a 64-bit ELF file of this machine's byte order";
		return NULL;
	}
	if (eh->e_shentsize != 0 && eh->e_shentsize != sizeof(Elf64_Shdr)) {
		*why = "damaged ELF file (section header size)";
		return NULL;
	}
	if (eh->e_phnum != 0 && eh->e_phentsize != sizeof(Elf64_Phdr)) {
		*why = "damaged ELF file (program header size)";
		return NULL;
	}
	return eh;
}

static const Elf64_Shdr *mp_shdrs(const mp_blob_t *b, const Elf64_Ehdr *eh,
    size_t *n) {
	*n = 0;
	/* Misaligned tables are not from a linker: damaged, not read. */
	if (eh->e_shoff == 0 || eh->e_shoff % 8 != 0 || !mp_in(b, eh->e_shoff,
	    (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr)))
		return NULL;
	*n = eh->e_shnum;
	return (const void *)(b->data + eh->e_shoff);
}

/* Section name, or "" when it cannot be read. */
static const char *mp_shname(const mp_blob_t *b, const Elf64_Ehdr *eh,
    const Elf64_Shdr *sh, size_t nsh, const Elf64_Shdr *s) {
	if (eh->e_shstrndx >= nsh)
		return "";
	const Elf64_Shdr *str = &sh[eh->e_shstrndx];
	if (!mp_in(b, str->sh_offset, str->sh_size) || s->sh_name >= str->sh_size)
		return "";
	const char *name = (const char *)b->data + str->sh_offset + s->sh_name;
	if (memchr(name, '\0', str->sh_size - s->sh_name) == NULL)
		return "";
	return name;
}

/* The GNU build ID from the notes of B, in hex, into OUT (129 bytes). */
static void mp_build_id(const mp_blob_t *b, const Elf64_Ehdr *eh, char *out) {
	out[0] = '\0';
	size_t nsh;
	const Elf64_Shdr *sh = mp_shdrs(b, eh, &nsh);
	for (size_t i = 0; i < nsh; i++) {
		if (sh[i].sh_type != SHT_NOTE || sh[i].sh_offset % 4 != 0 ||
		    !mp_in(b, sh[i].sh_offset, sh[i].sh_size))
			continue;
		const uint8_t *p = b->data + sh[i].sh_offset;
		uint64_t left = sh[i].sh_size;
		while (left >= sizeof(Elf64_Nhdr)) {
			const Elf64_Nhdr *nh = (const void *)p;
			uint64_t namesz = (nh->n_namesz + 3) & ~3u;
			uint64_t descsz = (nh->n_descsz + 3) & ~3u;
			if (sizeof(*nh) + namesz + descsz > left)
				break;
			const char *name = (const char *)(nh + 1);
			const uint8_t *desc = (const uint8_t *)name + namesz;
			if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 &&
			    memcmp(name, "GNU", 4) == 0 && nh->n_descsz <= 64) {
				for (uint32_t k = 0; k < nh->n_descsz; k++)
					sprintf(out + 2 * k, "%02x", desc[k]);
				return;
			}
			p += sizeof(*nh) + namesz + descsz;
			left -= sizeof(*nh) + namesz + descsz;
		}
	}
}

/* Appends the functions of symbol table section S (SYMTAB or DYNSYM). */
static void mp_add_syms(mp_elf_t *e, const mp_blob_t *b, const Elf64_Shdr *sh,
    size_t nsh, const Elf64_Shdr *s, size_t *cap) {
	if (s->sh_entsize != sizeof(Elf64_Sym) || s->sh_link >= nsh ||
	    s->sh_offset % 8 != 0 || !mp_in(b, s->sh_offset, s->sh_size))
		return;
	const Elf64_Shdr *str = &sh[s->sh_link];
	if (!mp_in(b, str->sh_offset, str->sh_size) || str->sh_size == 0)
		return;
	const char *strtab = (const char *)b->data + str->sh_offset;
	if (strtab[str->sh_size - 1] != '\0')
		return;	/* names could run off the table */
	const Elf64_Sym *sym = (const void *)(b->data + s->sh_offset);
	size_t n = s->sh_size / sizeof(Elf64_Sym);
	for (size_t i = 0; i < n; i++) {
		unsigned type = ELF64_ST_TYPE(sym[i].st_info);
		if ((type != STT_FUNC && type != STT_GNU_IFUNC) ||
		    sym[i].st_shndx == SHN_UNDEF || sym[i].st_value == 0 ||
		    sym[i].st_name == 0 || sym[i].st_name >= str->sh_size)
			continue;
		if (e->nsyms == *cap) {
			*cap = *cap ? 2 * *cap : 1024;
			e->syms = mp_xrealloc(e->syms, *cap * sizeof(*e->syms));
		}
		unsigned bind = ELF64_ST_BIND(sym[i].st_info);
		/* At one address prefer a sized global name over a weak or
		 * local alias, and a plain name over a reserved one
		 * (malloc, not __libc_malloc): it is what the program's
		 * source calls it. */
		const char *name = strtab + sym[i].st_name;
		e->syms[e->nsyms++] = (mp_sym_t){
			.addr = sym[i].st_value,
			.size = sym[i].st_size,
			.name = name,
			.rank = (uint8_t)((sym[i].st_size == 0) * 8 +
			    (name[0] == '_') * 4 +
			    (bind == STB_GLOBAL ? 0 : bind == STB_WEAK ? 1 : 2)),
		};
	}
}

static int mp_sym_cmp(const void *a, const void *b) {
	const mp_sym_t *x = a, *y = b;
	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	if (x->rank != y->rank)
		return x->rank < y->rank ? -1 : 1;
	return strcmp(x->name, y->name);
}

/* Separate debug file of E, checked against E's build ID. */
static bool mp_try_debug(mp_elf_t *e, const char *path) {
	mp_blob_t b;
	int err;
	if (strcmp(path, e->path) == 0 || !mp_blob_open(path, &b, &err))
		return false;
	const char *why;
	const Elf64_Ehdr *eh = mp_ehdr(&b, &why);
	char id[129];
	if (eh == NULL) {
		mp_blob_close(&b);
		return false;
	}
	mp_build_id(&b, eh, id);
	if (e->build_id[0] != '\0' && id[0] != '\0' &&
	    strcmp(id, e->build_id) != 0) {
		mp_warn("warning: debug file \"%s\" has build ID %s but \"%s\" "
		    "has %s: it belongs to another build and is not used",
		    path, id, e->path, e->build_id);
		mp_blob_close(&b);
		return false;
	}
	size_t nsh, cap = e->nsyms;
	const Elf64_Shdr *sh = mp_shdrs(&b, eh, &nsh);
	size_t before = e->nsyms;
	for (size_t i = 0; i < nsh; i++)
		if (sh[i].sh_type == SHT_SYMTAB)
			mp_add_syms(e, &b, sh, nsh, &sh[i], &cap);
	if (e->nsyms == before) {
		mp_blob_close(&b);
		return false;
	}
	e->debug = b;
	e->debug_file = mp_xstrdup(path);
	e->has_symtab = true;
	return true;
}

static void mp_find_debug(mp_symbolizer_t *sym, mp_elf_t *e, const mp_blob_t *b,
    const Elf64_Ehdr *eh, const Elf64_Shdr *sh, size_t nsh) {
	char path[4096];
	if (e->build_id[0] != '\0' && strlen(e->build_id) > 2) {
		snprintf(path, sizeof(path), "%s/.build-id/%.2s/%s.debug",
		    sym->debug_dir, e->build_id, e->build_id + 2);
		if (mp_try_debug(e, path))
			return;
	}
	const char *link = NULL;
	for (size_t i = 0; i < nsh; i++) {
		if (strcmp(mp_shname(b, eh, sh, nsh, &sh[i]), ".gnu_debuglink")
		    != 0 || !mp_in(b, sh[i].sh_offset, sh[i].sh_size) ||
		    sh[i].sh_size < 2)
			continue;
		link = (const char *)b->data + sh[i].sh_offset;
		if (memchr(link, '\0', sh[i].sh_size) == NULL ||
		    strchr(link, '/') != NULL)
			link = NULL;
		/* A file name, shown in warnings: a control character
		 * (a newline would split the warning) is damage. */
		for (const char *c = link; c != NULL && *c != '\0'; c++)
			if ((unsigned char)*c < 0x20 || *c == 0x7f)
				link = NULL;
	}
	if (link != NULL) {
		/* GDB's search order for a debug link. */
		const char *base = mp_basename(e->path);
		int dirlen = (int)(base - e->path);
		snprintf(path, sizeof(path), "%.*s%s", dirlen, e->path, link);
		if (mp_try_debug(e, path))
			return;
		snprintf(path, sizeof(path), "%.*s.debug/%s", dirlen, e->path,
		    link);
		if (mp_try_debug(e, path))
			return;
		snprintf(path, sizeof(path), "%s/%.*s%s", sym->debug_dir,
		    dirlen, e->path, link);
		if (mp_try_debug(e, path))
			return;
	}
	if (e->build_id[0] != '\0')
		snprintf(path, sizeof(path), "no debug file %s/.build-id/%.2s/"
		    "%s.debug%s%s", sym->debug_dir, e->build_id,
		    e->build_id + 2, link ? " nor " : "", link ? link : "");
	else if (link != NULL)
		snprintf(path, sizeof(path), "no debug file %s", link);
	else
		snprintf(path, sizeof(path), "no build ID and no debug link");
	e->debug_note = mp_xstrdup(path);
}

/* Reads the ELF image in e->file (the program headers, the build ID and
 * the symbols); e->bad says why it cannot be used. */
static void mp_elf_parse(mp_symbolizer_t *sym, mp_elf_t *e) {
	const mp_blob_t *b = &e->file;
	const Elf64_Ehdr *eh = mp_ehdr(b, &e->bad);
	if (eh == NULL)
		return;
	if (eh->e_phnum == 0 || eh->e_phoff % 8 != 0 || !mp_in(b, eh->e_phoff,
	    (uint64_t)eh->e_phnum * sizeof(Elf64_Phdr))) {
		e->bad = "no program headers (not a loadable ELF file)";
		return;
	}
	const Elf64_Phdr *ph = (const void *)(b->data + eh->e_phoff);
	e->loads = mp_xcalloc(eh->e_phnum, sizeof(*e->loads));
	bool interp = false;
	for (size_t i = 0; i < eh->e_phnum; i++) {
		if (ph[i].p_type == PT_LOAD)
			e->loads[e->nloads++] = (mp_load_t){ ph[i].p_offset,
			    ph[i].p_filesz, ph[i].p_vaddr };
		interp |= ph[i].p_type == PT_INTERP;
	}
	mp_build_id(b, eh, e->build_id);

	size_t nsh, cap = 0;
	const Elf64_Shdr *sh = mp_shdrs(b, eh, &nsh);
	for (size_t i = 0; i < nsh; i++) {
		if (sh[i].sh_type == SHT_SYMTAB) {
			size_t before = e->nsyms;
			mp_add_syms(e, b, sh, nsh, &sh[i], &cap);
			e->has_symtab = e->nsyms > before;
		}
	}
	for (size_t i = 0; i < nsh; i++)
		if (sh[i].sh_type == SHT_DYNSYM)
			mp_add_syms(e, b, sh, nsh, &sh[i], &cap);
	/* The debug file has the symbols a stripped file lacks, and the
	 * line table when --lines asks for one the file does not have. */
	bool has_lines = false;
	for (size_t i = 0; i < nsh; i++)
		has_lines |= sh[i].sh_type == SHT_PROGBITS &&
		    strcmp(mp_shname(b, eh, sh, nsh, &sh[i]), ".debug_line") == 0;
	if (!e->has_symtab || (sym->lines && !has_lines))
		mp_find_debug(sym, e, b, eh, sh, nsh);
	/* A shared library (ET_DYN without an interpreter, unlike a PIE
	 * executable) that defines malloc is an allocator: see
	 * mp_sym_in_alloc_lib.  (Before the aliases are merged below.) */
	if (eh->e_type == ET_DYN && !interp) {
		for (size_t i = 0; i < e->nsyms && !e->alloc_lib; i++)
			e->alloc_lib = strcmp(e->syms[i].name, "malloc") == 0 ||
			    strcmp(e->syms[i].name, "mp_malloc") == 0 ||
			    strcmp(e->syms[i].name, "je_malloc") == 0;
	}
	if (e->nsyms > 0)
		qsort(e->syms, e->nsyms, sizeof(*e->syms), mp_sym_cmp);
	/* One entry per address: the best-ranked name, sorted first. */
	size_t n = 0;
	for (size_t i = 0; i < e->nsyms; i++)
		if (n == 0 || e->syms[n - 1].addr != e->syms[i].addr)
			e->syms[n++] = e->syms[i];
	e->nsyms = n;
}

mp_symbolizer_t *mp_sym_new(const char *program, const char *debug_dir,
    bool lines) {
	mp_symbolizer_t *sym = mp_xcalloc(1, sizeof(*sym));
	sym->lines = lines;
	if (program != NULL) {
		sym->program = mp_xstrdup(program);
		sym->program_base = mp_basename(sym->program);
	}
	sym->debug_dir = mp_xstrdup(debug_dir);
	return sym;
}

void mp_sym_free(mp_symbolizer_t *sym) {
	for (size_t i = 0; i < sym->nelves; i++) {
		mp_elf_t *e = sym->elves[i];
		mp_blob_close(&e->file);
		mp_blob_close(&e->debug);
		free(e->key);
		free(e->path);
		free(e->loads);
		free(e->syms);
		free(e->debug_file);
		free(e->debug_note);
		mp_lines_free(e->lines);
		free(e);
	}
	free(sym->elves);
	free(sym->program);
	free(sym->debug_dir);
	free(sym);
}

/* heap_v2 dumps carry no build IDs, but the memory map has each file's
 * inode: a different one at the same path means the file was rebuilt or
 * replaced since (or this is another machine), and names may be wrong.
 * A pprof mapping has the build ID instead, which says the same surely.
 * Not checked for PROGRAM, which the user chose. */
static void mp_check_inode(mp_elf_t *e, const mp_mapping_t *m) {
	if (e->inode_checked || e->file.data == NULL ||
	    strcmp(e->path, e->key) != 0)
		return;
	if (m->build_id != NULL && m->build_id[0] != '\0' &&
	    e->build_id[0] != '\0') {
		e->inode_checked = true;
		if (strcmp(m->build_id, e->build_id) != 0)
			mp_warn("warning: \"%s\" is not the file the program "
			    "mapped (build ID %s in the profile, %s now): it "
			    "was rebuilt or replaced since, or this is another "
			    "machine; its names are right only if it is the "
			    "same build", e->path, m->build_id, e->build_id);
		return;
	}
	if (m->inode == 0)
		return;
	e->inode_checked = true;
	if (e->file.inode != m->inode)
		mp_warn("warning: \"%s\" is not the file the program mapped "
		    "(inode %" PRIu64 " in the profile, %" PRIu64 " now): it "
		    "was rebuilt or replaced since, or this is another "
		    "machine; its names are right only if it is the same "
		    "build", e->path, m->inode, e->file.inode);
}

static mp_elf_t *mp_elf_add(mp_symbolizer_t *sym, mp_elf_t *e);

static mp_elf_t *mp_elf_get(mp_symbolizer_t *sym, const char *key) {
	if (sym->last != NULL && strcmp(sym->last->key, key) == 0)
		return sym->last;
	for (size_t i = 0; i < sym->nelves; i++) {
		if (strcmp(sym->elves[i]->key, key) == 0)
			return sym->last = sym->elves[i];
	}
	mp_elf_t *e = mp_xcalloc(1, sizeof(*e));
	e->key = mp_xstrdup(key);
	/* PROGRAM stands in for the mapped file of the same name: the
	 * unstripped copy of a stripped binary, or a binary moved since. */
	if (sym->program != NULL &&
	    strcmp(mp_basename(key), sym->program_base) == 0)
		e->path = mp_xstrdup(sym->program);
	else
		e->path = mp_xstrdup(key);
	if (mp_blob_open(e->path, &e->file, &e->err))
		mp_elf_parse(sym, e);
	return mp_elf_add(sym, e);
}

static mp_elf_t *mp_elf_add(mp_symbolizer_t *sym, mp_elf_t *e) {
	if (sym->nelves == sym->cap) {
		sym->cap = sym->cap ? 2 * sym->cap : 16;
		sym->elves = mp_xrealloc(sym->elves,
		    sym->cap * sizeof(*sym->elves));
	}
	sym->elves[sym->nelves++] = e;
	return sym->last = e;
}

const mp_elf_t *mp_sym_add_image(mp_symbolizer_t *sym, const char *path,
    const uint8_t *data, size_t size) {
	mp_elf_t *e = mp_xcalloc(1, sizeof(*e));
	e->key = mp_xstrdup(path);
	e->path = mp_xstrdup(path);
	e->file = (mp_blob_t){ .data = data, .size = size };
	if (size == 0)
		e->err = EINVAL;	/* as an empty file */
	else
		mp_elf_parse(sym, e);
	return mp_elf_add(sym, e);
}

static const mp_sym_t *mp_sym_lookup(const mp_elf_t *e, uint64_t addr) {
	size_t lo = 0, hi = e->nsyms;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (e->syms[mid].addr <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return NULL;
	const mp_sym_t *s = &e->syms[lo - 1];
	if (s->size != 0 && addr - s->addr >= s->size)
		return NULL;
	return s;
}

static void mp_warn_file(mp_symbolizer_t *sym, mp_elf_t *e, const char *base) {
	if (e->warned)
		return;
	e->warned = true;
	if (e->err != 0) {
		mp_warn("warning: cannot open \"%s\": %s: its frames are shown "
		    "as %s+0xOFFSET (file offsets); run malloc-prof where the "
		    "file exists, or give a copy as PROGRAM", e->path,
		    strerror(e->err), base);
	} else if (e->bad != NULL) {
		mp_warn("warning: \"%s\": %s: its frames are shown as "
		    "%s+0xOFFSET (file offsets)", e->path, e->bad, base);
	} else {
		mp_warn("warning: \"%s\" has no symbol table (stripped) and %s: "
		    "its frames are shown as %s+0xADDR; install its debug file "
		    "or give an unstripped copy as PROGRAM", e->path,
		    e->debug_note ? e->debug_note : "no debug file", base);
	}
}

/* The line table of E: its own, else its debug file's; one warning if
 * it cannot be read. */
static const mp_lines_t *mp_elf_lines(mp_elf_t *e) {
	if (e->lines_tried)
		return e->lines;
	e->lines_tried = true;
	const char *why = NULL, *why2 = NULL;
	e->lines = mp_lines_load(e->file.data, e->file.size, &why);
	if (e->lines == NULL && e->debug.data != NULL)
		e->lines = mp_lines_load(e->debug.data, e->debug.size, &why2);
	if (e->lines == NULL && (why != NULL || why2 != NULL))
		mp_warn("warning: no line numbers for \"%s\": %s", e->debug_file ?
		    e->debug_file : e->path, why2 ? why2 : why);
	return e->lines;
}

const char *mp_sym_frame(mp_symbolizer_t *sym, const mp_profile_t *prof,
    uint64_t pc, bool leaf) {
	const char *file;
	unsigned line;
	const char *name = mp_sym_frame_line(sym, prof, pc, leaf, &file, &line);
	if (file != NULL) {
		size_t len = strlen(sym->buf);
		snprintf(sym->buf + len, sizeof(sym->buf) - len, " %s:%u", file,
		    line);
	}
	return name;
}

const char *mp_sym_frame_line(mp_symbolizer_t *sym, const mp_profile_t *prof,
    uint64_t pc, bool leaf, const char **filep, unsigned *linep) {
	*filep = NULL;
	*linep = 0;
	/* A return address points after the call: look up the byte before
	 * it, or a call ending a function would be named after the next
	 * one (jeprof's FixCallerAddresses).  Frame 0 is an exact PC. */
	uint64_t addr = leaf || pc == 0 ? pc : pc - 1;
	const mp_mapping_t *m = mp_profile_mapping(prof, addr);
	if (m == NULL && sym->program != NULL) {
		/* No mapping holds it (a profile without MAPPED_LIBRARIES):
		 * as jeprof, take it as an address of PROGRAM, which is
		 * right for a program that is not position-independent. */
		mp_elf_t *e = mp_elf_get(sym, sym->program);
		bool loaded = false;
		for (size_t i = 0; i < e->nloads && !loaded; i++)
			loaded = addr >= e->loads[i].vaddr &&
			    addr - e->loads[i].vaddr < e->loads[i].filesz;
		const mp_sym_t *s = loaded ? mp_sym_lookup(e, addr) : NULL;
		if (s != NULL) {
			snprintf(sym->buf, sizeof(sym->buf), "%s", s->name);
			return sym->buf;
		}
	}
	if (m == NULL || m->path[0] == '\0' || m->path[0] == '[') {
		/* Anonymous memory (JIT code), [vdso], or an address the map
		 * does not cover: nothing to read names from. */
		if (m != NULL && m->path[0] == '[')
			snprintf(sym->buf, sizeof(sym->buf), "%s+0x%" PRIx64,
			    m->path, addr - m->start);
		else
			snprintf(sym->buf, sizeof(sym->buf), "0x%" PRIx64, addr);
		if (m == NULL && prof->have_maps && pc != 0 &&
		    !sym->warned_unmapped) {
			sym->warned_unmapped = true;
			mp_warn("warning: frame address 0x%" PRIx64 " (and maybe "
			    "others) lies outside every mapping of the "
			    "profile's memory map: its code was unmapped before "
			    "the dump (a library unloaded with dlclose, by a "
			    "profiler that does not keep such mappings), so "
			    "such frames are shown as bare addresses", addr);
		}
		return sym->buf;
	}
	const char *base = mp_basename(m->path);
	uint64_t off = addr - m->start + m->offset;
	if (m->deleted) {
		mp_elf_t *e = mp_elf_get(sym, m->path);
		if (!e->warned) {
			e->warned = true;
			mp_warn("warning: \"%s\" was deleted or replaced after "
			    "the program mapped it (\"(deleted)\" in the "
			    "profile's memory map): its frames are shown as "
			    "%s+0xOFFSET (file offsets)", m->path, base);
		}
		snprintf(sym->buf, sizeof(sym->buf), "%s+0x%" PRIx64, base, off);
		return sym->buf;
	}
	mp_elf_t *e = mp_elf_get(sym, m->path);
	mp_check_inode(e, m);
	if (e->err != 0 || e->bad != NULL) {
		mp_warn_file(sym, e, base);
		snprintf(sym->buf, sizeof(sym->buf), "%s+0x%" PRIx64, base, off);
		return sym->buf;
	}
	const mp_load_t *ld = NULL;
	for (size_t i = 0; i < e->nloads; i++) {
		if (off >= e->loads[i].offset &&
		    off - e->loads[i].offset < e->loads[i].filesz) {
			ld = &e->loads[i];
			break;
		}
	}
	if (ld == NULL) {
		snprintf(sym->buf, sizeof(sym->buf), "%s+0x%" PRIx64, base, off);
		return sym->buf;
	}
	uint64_t vaddr = off - ld->offset + ld->vaddr;
	const mp_sym_t *s = mp_sym_lookup(e, vaddr);
	if (s != NULL) {
		const char *file;
		unsigned line;
		if (sym->lines && mp_elf_lines(e) != NULL &&
		    mp_lines_find(e->lines, vaddr, &file, &line)) {
			*filep = file;
			*linep = line;
		}
		snprintf(sym->buf, sizeof(sym->buf), "%s", s->name);
		return sym->buf;
	}
	if (!e->has_symtab)
		mp_warn_file(sym, e, base);
	snprintf(sym->buf, sizeof(sym->buf), "%s+0x%" PRIx64, base, vaddr);
	return sym->buf;
}

const mp_elf_t *mp_sym_in_alloc_lib(mp_symbolizer_t *sym,
    const mp_profile_t *prof, uint64_t pc) {
	const mp_mapping_t *m = mp_profile_mapping(prof, pc);
	if (m == NULL || m->deleted || m->path[0] != '/')
		return NULL;
	mp_elf_t *e = mp_elf_get(sym, m->path);
	return e->alloc_lib ? e : NULL;
}

const mp_elf_t *mp_sym_file(mp_symbolizer_t *sym, const mp_mapping_t *map,
    const char **why) {
	if (map->deleted) {
		*why = "deleted after it was mapped";
		return NULL;
	}
	mp_elf_t *e = mp_elf_get(sym, map->path);
	mp_check_inode(e, map);
	if (e->err != 0) {
		*why = strerror(e->err);
		return NULL;
	}
	if (e->bad != NULL) {
		*why = e->bad;
		return NULL;
	}
	return e;
}

const char *mp_elf_path(const mp_elf_t *elf) {
	return elf->path;
}

const char *mp_elf_build_id(const mp_elf_t *elf) {
	return elf->build_id;
}

size_t mp_elf_nsyms(const mp_elf_t *elf) {
	return elf->nsyms;
}

const char *mp_elf_debug_file(const mp_elf_t *elf) {
	return elf->debug_file;
}
