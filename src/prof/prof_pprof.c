/*
 * prof_pprof.c: heap profiles in pprof's format (profile.proto, gzipped),
 * written from the same snapshot as heap_v2 dumps (prof_snap.c).
 *
 * Two pieces: the profile builder (string table, mappings from
 * /proc/self/maps with GNU build IDs read from each ELF file's notes,
 * locations, samples) and the optional symbolizer (prof_symbolize:
 * function names from each file's .symtab or .dynsym).  The protobuf
 * encoder, its buffers, CRC-32 and the gzip writer are pprof_enc.c,
 * shared with the malloc-prof tool.
 *
 * Everything runs under prof_dump_mtx with the thread's reentrancy
 * raised, so nothing here may call malloc or stdio: buffers come from
 * base_malloc, files are read with open/pread/read.  The buffers are kept
 * in `pprof_state` and reused by the next dump; each grows to what the
 * largest profile needed and never past PPROF_MAX_BYTES.
 */
#include "malloc_prof/internal/internal.h"
#include "malloc_prof/internal/pprof_enc.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* No buffer of the encoder grows past this: a profile this large is a
 * bug or a runaway, not something to write. */
#define PPROF_MAX_BYTES ((size_t)256 << 20)
/* Mappings kept (executable ones only); more are dropped. */
#define PPROF_MAPS_MAX 1024
#define PPROF_PATH_MAX 4096

bool opt_prof_symbolize = false;

/* ---------------------------------------------------------------- state */

/* One string of the string table: its bytes in `strs` at off. */
typedef struct pprof_str_s {
	uint32_t off, len;
} pprof_str_t;

typedef struct sym_file_s sym_file_t;

/* One executable mapping of /proc/self/maps.  Sorted by start (the file
 * is); `id` is its 1-based pprof id (the main program's is 1). */
typedef struct pprof_map_s {
	uintptr_t start, limit, offset;
	uint64_t name;           /* string index of the file name */
	uint64_t build_id;       /* string index; 0 if none */
	uint64_t id;
	bool self;               /* the file holding the allocator */
	bool sym_tried;          /* prof_symbolize: symf looked up */
	bool has_functions;      /* some location of it was named */
	const sym_file_t *symf;  /* its symbols, or NULL */
} pprof_map_t;

/*
 * Everything the writer keeps between dumps (prof_dump_mtx).  Invariant
 * outside prof_pprof_write: every len is 0; caps and pointers are what
 * earlier dumps grew them to.
 */
typedef struct pprof_state_s {
	pprof_buf_t prof;        /* the encoded Profile */
	pprof_buf_t sub;         /* one nested message being built */
	pprof_buf_t packed;      /* a packed repeated field being built */
	pprof_buf_t strs;        /* string bytes */
	pprof_buf_t stab;        /* pprof_str_t, by string index */
	pprof_buf_t shash;       /* uint32_t: index + 1 (0 empty) */
	size_t shash_n;          /* slots in shash */
	pprof_buf_t maps;        /* pprof_map_t */
	pprof_buf_t lhash;       /* pprof_loc_slot_t */
	size_t lhash_n;
	pprof_buf_t locs;        /* uintptr_t address, by location id - 1 */
	pprof_buf_t fhash;       /* pprof_loc_slot_t: function key -> id */
	size_t fhash_n;
	pprof_buf_t funcs;       /* uint64_t name string index, by id - 1 */
	pprof_buf_t text;        /* /proc/self/maps */
	pprof_gzip_t gz;         /* the gzip writer's tables */
} pprof_state_t;

/* Profiler memory: base_malloc never recurses into the allocator. */
static const pprof_mem_t pprof_mem = {base_malloc, base_free,
    PPROF_MAX_BYTES};

static pprof_state_t pprof_state = {.gz = {.mem = &pprof_mem}};

static bool pprof_any_oom(const pprof_state_t *st) {
	return st->prof.oom || st->sub.oom || st->packed.oom || st->strs.oom ||
	    st->stab.oom || st->shash.oom || st->maps.oom || st->lhash.oom ||
	    st->locs.oom || st->text.oom || st->fhash.oom || st->funcs.oom;
}

/* -------------------------------------------------------- string table */

static uint64_t pprof_hash_bytes(const void *data, size_t len) {
	const uint8_t *p = data;
	uint64_t h = 0xcbf29ce484222325ULL;     /* FNV-1a */
	for (size_t i = 0; i < len; i++) {
		h ^= p[i];
		h *= 0x100000001b3ULL;
	}
	return h;
}

static size_t pprof_nstrings(const pprof_state_t *st) {
	return st->stab.len / sizeof(pprof_str_t);
}

static bool str_eq(const pprof_state_t *st, uint32_t idx, const char *s,
    size_t len) {
	const pprof_str_t *e = (const pprof_str_t *)st->stab.p + idx;
	return e->len == len && memcmp(st->strs.p + e->off, s, len) == 0;
}

/* Re-hash every string into a table of n slots (a power of 2). */
static bool str_rehash(pprof_state_t *st, size_t n) {
	st->shash.len = 0;
	if (pprof_buf_reserve(&st->shash, n * sizeof(uint32_t)))
		return true;
	uint32_t *slots = (uint32_t *)st->shash.p;
	memset(slots, 0, n * sizeof(uint32_t));
	st->shash.len = n * sizeof(uint32_t);
	st->shash_n = n;
	size_t cnt = pprof_nstrings(st);
	for (size_t i = 0; i < cnt; i++) {
		const pprof_str_t *e = (const pprof_str_t *)st->stab.p + i;
		size_t h = (size_t)pprof_hash_bytes(st->strs.p + e->off,
		    e->len) & (n - 1);
		while (slots[h] != 0)
			h = (h + 1) & (n - 1);
		slots[h] = (uint32_t)i + 1;
	}
	return false;
}

/* The index of string s[0..len) in the string table, added if new.
 * 0 (the empty string) on OOM, which pprof_any_oom reports later. */
static uint64_t str_index_n(pprof_state_t *st, const char *s, size_t len) {
	size_t cnt = pprof_nstrings(st);
	if ((cnt + 1) * 2 > st->shash_n &&
	    str_rehash(st, st->shash_n == 0 ? 256 : st->shash_n * 2))
		return 0;
	uint32_t *slots = (uint32_t *)st->shash.p;
	size_t mask = st->shash_n - 1;
	size_t h = (size_t)pprof_hash_bytes(s, len) & mask;
	while (slots[h] != 0) {
		if (str_eq(st, slots[h] - 1, s, len))
			return slots[h] - 1;
		h = (h + 1) & mask;
	}
	pprof_str_t e = {(uint32_t)st->strs.len, (uint32_t)len};
	pprof_buf_put(&st->strs, s, len);
	pprof_buf_put(&st->stab, &e, sizeof(e));
	if (pprof_any_oom(st))
		return 0;
	slots[h] = (uint32_t)cnt + 1;
	return cnt;
}

static uint64_t str_index(pprof_state_t *st, const char *s) {
	return str_index_n(st, s, strlen(s));
}

/* ------------------------------------------------------------ build IDs */

static bool pprof_pread_all(int fd, void *buf, size_t len, uint64_t off) {
	uint8_t *p = buf;
	while (len > 0) {
		ssize_t n = pread(fd, p, len, (off_t)off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return false;
		p += n;
		len -= (size_t)n;
		off += (uint64_t)n;
	}
	return true;
}

/* open(path) for reading, again when a signal interrupts it. */
static int pprof_open(const char *path) {
	int fd;
	do {
		fd = open(path, O_RDONLY | O_CLOEXEC);
	} while (fd < 0 && errno == EINTR);
	return fd;
}

/*
 * The GNU build ID of the 64-bit ELF file at path, as lower-case hex in
 * hex[] (NUL-terminated, "" if none): the NT_GNU_BUILD_ID note of a
 * PT_NOTE segment.  Read with pread only; a file that is not ELF, or is
 * unreadable, simply has none.
 */
static void pprof_build_id(const char *path, char *hex, size_t hexsize) {
	hex[0] = '\0';
	int fd = pprof_open(path);
	if (fd < 0)
		return;
	Elf64_Ehdr eh;
	if (!pprof_pread_all(fd, &eh, sizeof(eh), 0) ||
	    memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
	    eh.e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phnum > 256) {
		close(fd);
		return;
	}
	for (unsigned i = 0; i < eh.e_phnum && hex[0] == '\0'; i++) {
		Elf64_Phdr ph;
		if (!pprof_pread_all(fd, &ph, sizeof(ph),
		    eh.e_phoff + (uint64_t)i * sizeof(ph)))
			break;
		if (ph.p_type != PT_NOTE)
			continue;
		uint8_t notes[4096];
		size_t size = ph.p_filesz < sizeof(notes) ?
		    (size_t)ph.p_filesz : sizeof(notes);
		if (!pprof_pread_all(fd, notes, size, ph.p_offset))
			continue;
		size_t align = ph.p_align == 8 ? 8 : 4;
		size_t off = 0;
		while (off + sizeof(Elf64_Nhdr) <= size) {
			Elf64_Nhdr nh;
			memcpy(&nh, notes + off, sizeof(nh));
			size_t name_at = off + sizeof(nh);
			size_t desc_at = name_at +
			    ALIGNMENT_CEILING((size_t)nh.n_namesz, align);
			size_t next = desc_at +
			    ALIGNMENT_CEILING((size_t)nh.n_descsz, align);
			if (nh.n_namesz > size || nh.n_descsz > size ||
			    next > size)
				break;
			if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 &&
			    memcmp(notes + name_at, "GNU", 4) == 0 &&
			    nh.n_descsz * 2 < hexsize) {
				static const char digits[] = "0123456789abcdef";
				for (size_t k = 0; k < nh.n_descsz; k++) {
					uint8_t c = notes[desc_at + k];
					hex[2 * k] = digits[c >> 4];
					hex[2 * k + 1] = digits[c & 15];
				}
				hex[2 * nh.n_descsz] = '\0';
				break;
			}
			off = next;
		}
	}
	close(fd);
}

/* ----------------------------------------------------------- symbolizer */

/*
 * prof_symbolize: function names from the ELF symbol tables of the mapped
 * files.  Each file is mapped read-only once (its pages are the page
 * cache's, shared with the process's own mapping) and its function
 * symbols are copied, sorted by address, into an anonymous mapping of
 * their own; both are kept for every later dump.  Nothing here comes
 * from the profiled heap.  Bounded: at most SYM_FILES_MAX files and
 * SYM_BYTES_MAX bytes of tables; files past either are left unnamed.
 */
#define SYM_FILES_MAX 256
#define SYM_BYTES_MAX ((size_t)64 << 20)
#define SYM_FILE_SIZE_MAX ((size_t)2 << 30)
#define SYM_LOADS_MAX 16

typedef struct sym_ent_s {
	uint64_t value;
	uint32_t size;
	uint32_t name;           /* offset in the file's string table */
} sym_ent_t;

/* One file, built once (under prof_dump_mtx) and then only read.  A file
 * that could not be read is kept too (nsyms 0), so that it is not tried
 * again at every dump. */
struct sym_file_s {
	uint64_t hash;           /* of the path */
	const char *path;        /* in block */
	const uint8_t *image;    /* the file, mapped read-only */
	size_t image_size;
	const char *strtab;
	size_t strtab_size;
	sym_ent_t *syms;         /* in block, by value */
	size_t nsyms;
	void *block;
	size_t block_size;
	Elf64_Phdr loads[SYM_LOADS_MAX];
	unsigned nloads;
};

static sym_file_t sym_files[SYM_FILES_MAX];
static size_t sym_nfiles;
static size_t sym_bytes;

static bool sym_ent_less(const sym_ent_t *a, const sym_ent_t *b) {
	return a->value < b->value;
}

/* In-place heapsort: libc's qsort may allocate. */
static void sym_sift(sym_ent_t *v, size_t root, size_t n) {
	for (;;) {
		size_t c = 2 * root + 1;
		if (c >= n)
			return;
		if (c + 1 < n && sym_ent_less(&v[c], &v[c + 1]))
			c++;
		if (!sym_ent_less(&v[root], &v[c]))
			return;
		sym_ent_t t = v[root];
		v[root] = v[c];
		v[c] = t;
		root = c;
	}
}

static void sym_sort(sym_ent_t *v, size_t n) {
	for (size_t i = n / 2; i-- > 0;)
		sym_sift(v, i, n);
	for (size_t end = n; end > 1; end--) {
		sym_ent_t t = v[0];
		v[0] = v[end - 1];
		v[end - 1] = t;
		sym_sift(v, 0, end - 1);
	}
}

static bool sym_is_func(const Elf64_Sym *s, size_t strtab_size) {
	unsigned type = ELF64_ST_TYPE(s->st_info);
	return (type == STT_FUNC || type == STT_GNU_IFUNC) &&
	    s->st_shndx != SHN_UNDEF && s->st_value != 0 &&
	    s->st_name != 0 && s->st_name < strtab_size;
}

/* The function symbols of section `symsec` (SHT_SYMTAB or SHT_DYNSYM)
 * into f; false if there is no such section or it has none. */
static bool sym_load_table(sym_file_t *f, const Elf64_Ehdr *eh,
    const Elf64_Shdr *sh, uint32_t symsec, size_t pathlen) {
	const Elf64_Shdr *ss = NULL;
	for (unsigned i = 0; i < eh->e_shnum; i++) {
		if (sh[i].sh_type == symsec) {
			ss = &sh[i];
			break;
		}
	}
	if (ss == NULL || ss->sh_link >= eh->e_shnum ||
	    ss->sh_entsize != sizeof(Elf64_Sym) ||
	    ss->sh_offset > f->image_size ||
	    ss->sh_size > f->image_size - ss->sh_offset)
		return false;
	const Elf64_Shdr *st = &sh[ss->sh_link];
	if (st->sh_offset > f->image_size ||
	    st->sh_size > f->image_size - st->sh_offset)
		return false;
	const Elf64_Sym *syms = (const Elf64_Sym *)(f->image + ss->sh_offset);
	size_t n = ss->sh_size / sizeof(Elf64_Sym);
	size_t cnt = 0;
	for (size_t i = 0; i < n; i++)
		cnt += sym_is_func(&syms[i], st->sh_size);
	if (cnt == 0)
		return false;
	size_t bytes = PAGE_CEILING(cnt * sizeof(sym_ent_t) + pathlen + 1);
	if (bytes > SYM_BYTES_MAX - sym_bytes)
		return false;
	void *block = os_map(bytes, PAGE);
	if (block == NULL)
		return false;
	sym_bytes += bytes;
	f->block = block;
	f->block_size = bytes;
	f->syms = block;
	f->strtab = (const char *)(f->image + st->sh_offset);
	f->strtab_size = st->sh_size;
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		if (!sym_is_func(&syms[i], st->sh_size))
			continue;
		f->syms[k].value = syms[i].st_value;
		f->syms[k].size = syms[i].st_size > UINT32_MAX ? UINT32_MAX :
		    (uint32_t)syms[i].st_size;
		f->syms[k].name = syms[i].st_name;
		k++;
	}
	f->nsyms = cnt;
	sym_sort(f->syms, cnt);
	return true;
}

/* Map path and read its function symbols into f (f->nsyms stays 0 on
 * any failure). */
static void sym_file_build(sym_file_t *f, const char *path, size_t pathlen) {
	int fd = pprof_open(path);
	if (fd < 0)
		return;
	struct stat sb;
	if (fstat(fd, &sb) != 0 || sb.st_size < (off_t)sizeof(Elf64_Ehdr) ||
	    (uint64_t)sb.st_size > SYM_FILE_SIZE_MAX) {
		close(fd);
		return;
	}
	void *img = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE,
	    fd, 0);
	close(fd);
	if (img == MAP_FAILED)
		return;
	f->image = img;
	f->image_size = (size_t)sb.st_size;
	const Elf64_Ehdr *eh = img;
	if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 ||
	    eh->e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh->e_shentsize != sizeof(Elf64_Shdr) ||
	    eh->e_phentsize != sizeof(Elf64_Phdr) ||
	    eh->e_shoff > f->image_size ||
	    (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr) >
	    f->image_size - eh->e_shoff ||
	    eh->e_phoff > f->image_size ||
	    (uint64_t)eh->e_phnum * sizeof(Elf64_Phdr) >
	    f->image_size - eh->e_phoff)
		goto fail;
	const Elf64_Phdr *ph = (const Elf64_Phdr *)(f->image + eh->e_phoff);
	for (unsigned i = 0; i < eh->e_phnum && f->nloads < SYM_LOADS_MAX;
	    i++) {
		if (ph[i].p_type == PT_LOAD)
			f->loads[f->nloads++] = ph[i];
	}
	const Elf64_Shdr *sh = (const Elf64_Shdr *)(f->image + eh->e_shoff);
	if (!sym_load_table(f, eh, sh, SHT_SYMTAB, pathlen) &&
	    !sym_load_table(f, eh, sh, SHT_DYNSYM, pathlen))
		goto fail;
	char *p = (char *)f->block + f->nsyms * sizeof(sym_ent_t);
	memcpy(p, path, pathlen);
	p[pathlen] = '\0';
	f->path = p;
	return;
fail:
	munmap((void *)f->image, f->image_size);
	f->image = NULL;
	f->image_size = 0;
	f->nsyms = 0;
}

/* The symbol tables of path, built at the first call; NULL if the file
 * has none or the bounds are reached. */
static const sym_file_t *sym_file_get(const char *path, size_t pathlen) {
	uint64_t h = pprof_hash_bytes(path, pathlen);
	for (size_t i = 0; i < sym_nfiles; i++) {
		sym_file_t *f = &sym_files[i];
		if (f->hash != h)
			continue;
		/* A failed file keeps no path: same hash is taken as the
		 * same file then (a collision only loses names). */
		if (f->nsyms == 0)
			return NULL;
		if (strlen(f->path) == pathlen &&
		    memcmp(f->path, path, pathlen) == 0)
			return f;
	}
	if (sym_nfiles == SYM_FILES_MAX)
		return NULL;
	sym_file_t *f = &sym_files[sym_nfiles++];
	memset(f, 0, sizeof(*f));
	f->hash = h;
	sym_file_build(f, path, pathlen);
	return f->nsyms != 0 ? f : NULL;
}

/* The function containing the file offset `off` of f: its name (in the
 * file's string table) and length; NULL if no symbol covers it. */
static const char *sym_lookup(const sym_file_t *f, uint64_t off,
    size_t *lenp) {
	uint64_t vaddr = 0;
	bool found = false;
	for (unsigned i = 0; i < f->nloads; i++) {
		const Elf64_Phdr *l = &f->loads[i];
		if (off >= l->p_offset && off - l->p_offset < l->p_filesz) {
			vaddr = off - l->p_offset + l->p_vaddr;
			found = true;
			break;
		}
	}
	if (!found)
		return NULL;
	/* The last symbol at or below vaddr. */
	size_t lo = 0, hi = f->nsyms;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (f->syms[mid].value <= vaddr)
			lo = mid + 1;
		else
			hi = mid;
	}
	/* Aliases share a value, and a symbol of size 0 may sit inside a
	 * function: look at the few symbols below for one that covers. */
	for (size_t i = lo; i-- > 0 && lo - i <= 8;) {
		const sym_ent_t *s = &f->syms[i];
		if (vaddr - s->value < s->size) {
			const char *name = f->strtab + s->name;
			*lenp = strnlen(name, f->strtab_size - s->name);
			return name;
		}
	}
	return NULL;
}

/* ------------------------------------------------------------- mappings */

static bool pprof_read_file(pprof_buf_t *b, const char *path) {
	b->len = 0;
	int fd = pprof_open(path);
	if (fd < 0)
		return true;
	for (;;) {
		if (pprof_buf_reserve(b, 16384))
			break;
		ssize_t n = read(fd, b->p + b->len, b->cap - b->len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		b->len += (size_t)n;
	}
	close(fd);
	return b->oom;
}

static uintptr_t pprof_hex(const char **pp, const char *end) {
	uintptr_t v = 0;
	const char *p = *pp;
	for (; p < end; p++) {
		char c = *p;
		unsigned d;
		if (c >= '0' && c <= '9')
			d = (unsigned)(c - '0');
		else if (c >= 'a' && c <= 'f')
			d = (unsigned)(c - 'a' + 10);
		else
			break;
		v = (v << 4) | d;
	}
	*pp = p;
	return v;
}

static const char *pprof_skip_field(const char *p, const char *end) {
	while (p < end && *p != ' ')
		p++;
	while (p < end && *p == ' ')
		p++;
	return p;
}

/*
 * The executable file mappings of /proc/self/maps, with their build IDs.
 * The main program's first mapping gets id 1 (pprof takes the first
 * mapping as the main binary); the file holding this code is marked
 * `self`.  A process whose maps cannot be read gets no mappings.
 */
static pprof_map_t *pprof_find_map(const pprof_state_t *st,
    uintptr_t addr);

/* The executable segments of objects unloaded since samples were taken
 * in them (dlclose: /proc/self/maps lists them no more) that frames of s
 * point into, as mappings of their own, kept in start order; none that
 * overlaps a mapping of the file. */
static void pprof_add_unloaded(pprof_state_t *st, const dump_snap_t *s) {
	prof_sys_unloaded_t u[PROF_SYS_UNLOADED_MAX];
	size_t nu = prof_sys_unloaded(s, u, PROF_SYS_UNLOADED_MAX);
	char hex[256];
	for (size_t i = 0; i < nu; i++) {
		if (st->maps.len / sizeof(pprof_map_t) >= PPROF_MAPS_MAX ||
		    pprof_find_map(st, u[i].lo) != NULL ||
		    pprof_find_map(st, u[i].hi - 1) != NULL)
			continue;
		pprof_map_t m;
		memset(&m, 0, sizeof(m));
		m.start = u[i].lo;
		m.limit = u[i].hi;
		m.offset = u[i].offset;
		m.name = str_index(st, u[i].name);
		pprof_build_id(u[i].name, hex, sizeof(hex));
		m.build_id = hex[0] != '\0' ? str_index(st, hex) : 0;
		pprof_buf_put(&st->maps, &m, sizeof(m));
		if (st->maps.oom)
			return;
		pprof_map_t *maps = (pprof_map_t *)st->maps.p;
		size_t j = st->maps.len / sizeof(pprof_map_t) - 1;
		for (; j > 0 && maps[j - 1].start > m.start; j--)
			maps[j] = maps[j - 1];
		maps[j] = m;
	}
}

static void pprof_collect_maps(pprof_state_t *st, const dump_snap_t *s) {
	char exe[PPROF_PATH_MAX];
	ssize_t elen = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	exe[elen > 0 ? elen : 0] = '\0';
	if (pprof_read_file(&st->text, "/proc/self/maps"))
		return;
	uintptr_t here = (uintptr_t)(void *)pprof_collect_maps;
	const char *p = (const char *)st->text.p;
	const char *end = p + st->text.len;
	size_t n = 0;
	uint64_t self_name = 0, exe_name = 0;
	uint64_t last_name = 0, last_build = 0;
	char path[PPROF_PATH_MAX];
	char hex[256];
	while (p < end && n < PPROF_MAPS_MAX) {
		const char *eol = memchr(p, '\n', (size_t)(end - p));
		if (eol == NULL)
			eol = end;
		const char *q = p;
		pprof_map_t m;
		memset(&m, 0, sizeof(m));
		m.start = pprof_hex(&q, eol);
		if (q < eol && *q == '-')
			q++;
		m.limit = pprof_hex(&q, eol);
		q = pprof_skip_field(q, eol);
		bool exec = eol - q >= 4 && q[2] == 'x';
		q = pprof_skip_field(q, eol);
		m.offset = pprof_hex(&q, eol);
		q = pprof_skip_field(q, eol);          /* past offset */
		q = pprof_skip_field(q, eol);          /* past dev */
		q = pprof_skip_field(q, eol);          /* past inode */
		size_t plen = (size_t)(eol - q);
		p = eol + 1;
		if (!exec || plen == 0 || q[0] != '/' ||
		    plen >= sizeof(path))
			continue;
		memcpy(path, q, plen);
		path[plen] = '\0';
		m.name = str_index_n(st, path, plen);
		if (m.name != last_name) {
			pprof_build_id(path, hex, sizeof(hex));
			last_build = hex[0] != '\0' ? str_index(st, hex) : 0;
			last_name = m.name;
		}
		m.build_id = last_build;
		if (here >= m.start && here < m.limit)
			self_name = m.name;
		if (exe_name == 0 && strcmp(path, exe) == 0)
			exe_name = m.name;
		pprof_buf_put(&st->maps, &m, sizeof(m));
		n++;
	}
	pprof_add_unloaded(st, s);
	/* Ids: the main program first, then the others in address order. */
	pprof_map_t *maps = (pprof_map_t *)st->maps.p;
	n = st->maps.len / sizeof(pprof_map_t);
	uint64_t id = 1;
	for (size_t i = 0; i < n; i++) {
		if (exe_name != 0 && maps[i].name == exe_name)
			maps[i].id = id++;
	}
	for (size_t i = 0; i < n; i++) {
		if (maps[i].id == 0)
			maps[i].id = id++;
		/* Linked into the program itself, the allocator shares its
		 * file: only frame 0 is known to be ours then. */
		maps[i].self = self_name != 0 && self_name != exe_name &&
		    maps[i].name == self_name;
	}
}

static pprof_map_t *pprof_find_map(const pprof_state_t *st,
    uintptr_t addr) {
	pprof_map_t *maps = (pprof_map_t *)st->maps.p;
	size_t lo = 0, hi = st->maps.len / sizeof(pprof_map_t);
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (addr < maps[mid].start)
			hi = mid;
		else if (addr >= maps[mid].limit)
			lo = mid + 1;
		else
			return &maps[mid];
	}
	return NULL;
}

static void pprof_emit_maps(pprof_state_t *st) {
	const pprof_map_t *maps = (const pprof_map_t *)st->maps.p;
	size_t n = st->maps.len / sizeof(pprof_map_t);
	/* By id, so that the main program comes first. */
	for (uint64_t id = 1; id <= n; id++) {
		for (size_t i = 0; i < n; i++) {
			if (maps[i].id != id)
				continue;
			st->sub.len = 0;
			pprof_pb_uint(&st->sub, 1, maps[i].id);
			pprof_pb_uint(&st->sub, 2, maps[i].start);
			pprof_pb_uint(&st->sub, 3, maps[i].limit);
			pprof_pb_uint(&st->sub, 4, maps[i].offset);
			pprof_pb_uint(&st->sub, 5, maps[i].name);
			pprof_pb_uint(&st->sub, 6, maps[i].build_id);
			pprof_pb_uint(&st->sub, 7, maps[i].has_functions);
			pprof_pb_bytes(&st->prof, 3, st->sub.p, st->sub.len);
			break;
		}
	}
}

/* ------------------------------------------------------------ locations */

typedef struct pprof_loc_slot_s {
	uintptr_t addr;
	uint64_t id;             /* 0: empty */
} pprof_loc_slot_t;

static bool loc_table_init(pprof_state_t *st, size_t nframes) {
	size_t n = 64;
	while (n < nframes * 2)
		n *= 2;
	st->lhash.len = 0;
	if (pprof_buf_reserve(&st->lhash, n * sizeof(pprof_loc_slot_t)))
		return true;
	memset(st->lhash.p, 0, n * sizeof(pprof_loc_slot_t));
	st->lhash.len = n * sizeof(pprof_loc_slot_t);
	st->lhash_n = n;
	return false;
}

/*
 * The id of `key` in an open-addressed table of mask + 1 slots (at most
 * half full, so a free slot is always found), made if new: the 8-byte
 * `value` is appended to `out`, and the id is its 1-based index there.  0
 * when `out` ran out of memory (the profile is then abandoned).
 */
static uint64_t id_get(pprof_buf_t *table, size_t mask, uintptr_t key,
    pprof_buf_t *out, uint64_t value) {
	pprof_loc_slot_t *slots = (pprof_loc_slot_t *)table->p;
	size_t h = (size_t)((key * 0x9e3779b97f4a7c15ULL) >> 20) & mask;
	while (slots[h].id != 0) {
		if (slots[h].addr == key)
			return slots[h].id;
		h = (h + 1) & mask;
	}
	pprof_buf_put(out, &value, sizeof(value));
	if (out->oom)
		return 0;
	slots[h].addr = key;
	slots[h].id = out->len / sizeof(value);
	return slots[h].id;
}

/* The location id of addr, made if new. */
static uint64_t loc_id(pprof_state_t *st, uintptr_t addr) {
	return id_get(&st->lhash, st->lhash_n - 1, addr, &st->locs, addr);
}

/* prof_symbolize: the function id of the symbol covering addr in m,
 * made if new; 0 if none.  Functions are keyed by (name, file). */
static uint64_t pprof_function(pprof_state_t *st, pprof_map_t *m,
    uintptr_t addr) {
	if (!m->sym_tried) {
		const pprof_str_t *e = (const pprof_str_t *)st->stab.p +
		    m->name;
		char path[PPROF_PATH_MAX];
		if (e->len < sizeof(path)) {
			memcpy(path, st->strs.p + e->off, e->len);
			path[e->len] = '\0';
			m->symf = sym_file_get(path, e->len);
		}
		/* Every mapping of the file shares its symbols. */
		pprof_map_t *maps = (pprof_map_t *)st->maps.p;
		size_t n = st->maps.len / sizeof(pprof_map_t);
		for (size_t i = 0; i < n; i++) {
			if (maps[i].name == m->name) {
				maps[i].symf = m->symf;
				maps[i].sym_tried = true;
			}
		}
	}
	if (m->symf == NULL)
		return 0;
	size_t len;
	const char *name = sym_lookup(m->symf, addr - m->start + m->offset,
	    &len);
	if (name == NULL)
		return 0;
	uint64_t sidx = str_index_n(st, name, len);
	if (sidx == 0)
		return 0;
	uintptr_t key = (uintptr_t)(sidx | (m->name << 32));
	uint64_t id = id_get(&st->fhash, st->fhash_n - 1, key, &st->funcs,
	    sidx);
	if (id != 0)
		m->has_functions = true;
	return id;
}

static void pprof_emit_locations(pprof_state_t *st) {
	const uintptr_t *addrs = (const uintptr_t *)st->locs.p;
	size_t n = st->locs.len / sizeof(uintptr_t);
	bool sym = opt_prof_symbolize;
	if (sym) {
		/* At most one function per location. */
		size_t fn = 64;
		while (fn < n * 2)
			fn *= 2;
		if (pprof_buf_reserve(&st->fhash, fn * sizeof(pprof_loc_slot_t)))
			return;
		memset(st->fhash.p, 0, fn * sizeof(pprof_loc_slot_t));
		st->fhash.len = fn * sizeof(pprof_loc_slot_t);
		st->fhash_n = fn;
	}
	for (size_t i = 0; i < n; i++) {
		pprof_map_t *m = pprof_find_map(st, addrs[i]);
		uint64_t fid = sym && m != NULL ?
		    pprof_function(st, m, addrs[i]) : 0;
		st->sub.len = 0;
		pprof_pb_uint(&st->sub, 1, i + 1);
		pprof_pb_uint(&st->sub, 2, m != NULL ? m->id : 0);
		pprof_pb_uint(&st->sub, 3, addrs[i]);
		if (fid != 0) {
			uint8_t line[12];
			line[0] = (1 << 3) | 0;
			size_t ln = 1 + pprof_pb_varint(line + 1, fid);
			pprof_pb_bytes(&st->sub, 4, line, ln);
		}
		pprof_pb_bytes(&st->prof, 4, st->sub.p, st->sub.len);
	}
	const uint64_t *names = (const uint64_t *)st->funcs.p;
	size_t nf = st->funcs.len / sizeof(uint64_t);
	for (size_t i = 0; i < nf; i++) {
		st->sub.len = 0;
		pprof_pb_uint(&st->sub, 1, i + 1);
		pprof_pb_uint(&st->sub, 2, names[i]);
		pprof_pb_uint(&st->sub, 3, names[i]);
		pprof_pb_bytes(&st->prof, 5, st->sub.p, st->sub.len);
	}
}

/* -------------------------------------------------------------- samples */

static uint64_t pprof_round(double v) {
	if (!(v > 0.0))
		return 0;
	if (v >= 9223372036854775807.0)
		return INT64_MAX;
	return (uint64_t)util_llround(v);
}

/*
 * What jeprof computes for one stack of a heap_v2 dump at rate R: the
 * printed (count, bytes) of prof_snap_unbias scaled by 1/(1 - e^(-x/R)),
 * x the average size (no scaling at R = 1, as in jeprof).  Starting from
 * the printed numbers makes a pprof dump and a heap_v2 dump of the same
 * moment agree to the byte.
 */
static void pprof_values_of(uint64_t a, uint64_t b, bool raw, double R,
    uint64_t *objs, uint64_t *space);

static void pprof_values(uint64_t shifted, uint64_t bytes, double R,
    uint64_t *objs, uint64_t *space) {
	pprof_values_of(shifted, bytes, false, R, objs, space);
}

/* The same from (shifted, bytes), or with raw from the sampled counts
 * (objects, bytes) themselves, which heap_v2 prints with prof_unbias:false
 * (prof_snap_printed). */
static void pprof_values_of(uint64_t a, uint64_t b, bool raw, double R,
    uint64_t *objs, uint64_t *space) {
	uint64_t n, s;
	/* A delta's decrease (prof_snap_delta: two's complement): the
	 * values of its magnitude, negated, as Go's deltas print them. */
	if ((int64_t)a < 0 || (int64_t)b < 0) {
		bool no = (int64_t)a < 0, ns = (int64_t)b < 0;
		pprof_values_of(no ? -a : a, ns ? -b : b, raw, R, objs, space);
		*objs = no ? -*objs : *objs;
		*space = ns ? -*space : *space;
		return;
	}
	if (raw) {
		n = a;
		s = b;
	} else {
		prof_snap_unbias(a, b, R, &n, &s);
	}
	if (n == 0 || R <= 1.0) {
		*objs = n;
		*space = s;
		return;
	}
	double scale = 1.0 / (1.0 - util_exp(-(((double)s / (double)n) / R)));
	*objs = pprof_round((double)n * scale);
	*space = pprof_round((double)s * scale);
}

/* The first frame to keep: frame 0 is the allocator entry the program
 * called; frames after it in the allocator's own file (none are expected)
 * go too.  Frames are return addresses: the location is the byte before,
 * inside the call instruction, so that it symbolises to the caller. */
static uint32_t pprof_first_frame(const pprof_state_t *st,
    void *const *frames, uint32_t nframes) {
	uint32_t k = 1;
	while (k + 1 < nframes) {
		const pprof_map_t *m = pprof_find_map(st,
		    (uintptr_t)frames[k] - 1);
		if (m == NULL || !m->self)
			break;
		k++;
	}
	return k < nframes ? k : nframes;
}

/* Label field 3 of a Sample: key and value, both string table indexes.
 * String labels, as Go's runtime/pprof writes them: a number label of
 * value 0 (the first thread's id) is dropped by Go's reader. */
static void pprof_label(pprof_state_t *st, uint64_t key, uint64_t str) {
	uint8_t label[24];
	size_t n = 0;
	label[n++] = (1 << 3) | 0;
	n += pprof_pb_varint(label + n, key);
	label[n++] = (2 << 3) | 0;
	n += pprof_pb_varint(label + n, str);
	pprof_pb_bytes(&st->sub, 3, label, n);
}

/* One string label per pair of an interned label set (thread.prof.label),
 * whose canonical form is "k1=v1,k2=v2" (a key holds no '=' or ',', a
 * value no ','). */
static void pprof_set_labels(pprof_state_t *st, const prof_labels_t *l) {
	const char *p = l->str, *end = l->str + l->len;
	while (p < end) {
		const char *stop = memchr(p, ',', (size_t)(end - p));
		if (stop == NULL)
			stop = end;
		const char *eq = memchr(p, '=', (size_t)(stop - p));
		if (eq != NULL)
			pprof_label(st, str_index_n(st, p, (size_t)(eq - p)),
			    str_index_n(st, eq + 1, (size_t)(stop - eq - 1)));
		p = stop + 1;
	}
}

/* part of whole, in proportion part_of / whole_of (the last share takes
 * the rest, so that the shares add up to whole exactly). */
static uint64_t pprof_share(uint64_t whole, uint64_t part_of,
    uint64_t whole_of) {
	if (whole_of == 0 || part_of >= whole_of)
		return whole_of == 0 ? 0 : whole;
	return (uint64_t)((double)whole * ((double)part_of /
	    (double)whole_of));
}

/* A stack's location ids, packed, as the start of st->packed (its
 * length returned): each of the stack's samples repeats them. */
static size_t pprof_pack_locations(pprof_state_t *st, void *const *frames,
    uint32_t nframes) {
	st->packed.len = 0;
	uint32_t first = pprof_first_frame(st, frames, nframes);
	if (first == nframes && nframes > 0)
		first = nframes - 1;
	for (uint32_t k = first; k < nframes; k++) {
		uintptr_t a = (uintptr_t)frames[k];
		pprof_pb_raw_varint(&st->packed, loc_id(st, k == 0 ? a :
		    a - 1));
	}
	return st->packed.len;
}

/*
 * One Sample per (stack, thread, label set): the stack's values are
 * computed as jeprof computes them from the heap_v2 stack line (so that a
 * pprof dump and a heap_v2 dump of the same moment agree to the byte per
 * stack), then shared among its (thread, label set) pairs in proportion
 * to their unbiased counts.  Each carries the labels thread_id (the N of
 * heap_v2's tN, in decimal), for a named thread thread_name, and one per
 * pair of the label set the thread had when it took those samples.
 */
static void pprof_emit_samples(pprof_state_t *st, const dump_snap_t *s) {
	uint64_t name_key = str_index(st, "thread_name");
	uint64_t id_key = str_index(st, "thread_id");
	double R = (double)((uint64_t)1 << s->lg_sample);
	const char *p = s->gbuf;
	for (size_t i = 0; i < s->ngctx; i++) {
		const dump_gctx_t *g = (const dump_gctx_t *)p;
		p += sizeof(*g);
		void *const *frames = (void *const *)p;
		p += dump_frames_size(g->nframes);
		const dump_tctx_t *tr = (const dump_tctx_t *)p;
		p += g->ntctx * sizeof(dump_tctx_t);

		/* The locations, kept for each of the stack's samples. */
		size_t locs_len = pprof_pack_locations(st, frames, g->nframes);

		uint64_t v[4], left[4];
		bool raw = !opt_prof_unbias && !s->raw;
		pprof_values_of(raw ? g->cnt.curobjs :
		    g->cnt.curobjs_shifted_unbiased, raw ? g->cnt.curbytes :
		    g->cnt.curbytes_unbiased, raw, R, &v[0], &v[1]);
		if (s->raw) {
			v[0] = (g->cnt.curobjs_shifted_unbiased + 4) / 8;
			v[1] = g->cnt.curbytes_unbiased;
		}
		unsigned nv = 2;
		if (s->accum) {
			pprof_values_of(raw ? g->cnt.accumobjs :
			    g->cnt.accumobjs_shifted_unbiased, raw ?
			    g->cnt.accumbytes : g->cnt.accumbytes_unbiased, raw,
			    R, &v[2], &v[3]);
			nv = 4;
		}
		const uint64_t of[4] = {g->cnt.curobjs_shifted_unbiased,
		    g->cnt.curbytes_unbiased, g->cnt.accumobjs_shifted_unbiased,
		    g->cnt.accumbytes_unbiased};
		memcpy(left, v, sizeof(left));
		uint32_t nt = g->ntctx > 0 ? g->ntctx : 1;
		for (uint32_t k = 0; k < nt; k++) {
			uint64_t w[4];
			if (g->ntctx == 0) {
				memcpy(w, v, sizeof(w));
			} else {
				const prof_cnt_t *c = &tr[k].cnt;
				const uint64_t part[4] = {
				    c->curobjs_shifted_unbiased,
				    c->curbytes_unbiased,
				    c->accumobjs_shifted_unbiased,
				    c->accumbytes_unbiased};
				for (unsigned j = 0; j < nv; j++) {
					w[j] = k + 1 == nt ? left[j] :
					    pprof_share(v[j], part[j], of[j]);
					if (w[j] > left[j])
						w[j] = left[j];
					left[j] -= w[j];
				}
			}
			bool any = false;
			for (unsigned j = 0; j < nv; j++)
				any |= w[j] != 0;
			if (!any && nt > 1)
				continue;
			st->sub.len = 0;
			pprof_pb_bytes(&st->sub, 1, st->packed.p, locs_len);
			/* The values go after the locations, for a moment. */
			for (unsigned j = 0; j < nv; j++)
				pprof_pb_raw_varint(&st->packed, w[j]);
			pprof_pb_bytes(&st->sub, 2, st->packed.p + locs_len,
			    st->packed.len - locs_len);
			st->packed.len = locs_len;
			if (g->ntctx > 0) {
				char id[24];
				mp_snprintf(id, sizeof(id), "%" PRIu64,
				    tr[k].uid);
				pprof_label(st, id_key, str_index(st, id));
				const dump_thread_t *t =
				    prof_snap_thread_find(s, tr[k].uid);
				if (t != NULL && t->name[0] != '\0')
					pprof_label(st, name_key, str_index_n(st,
					    t->name, strnlen(t->name,
					    PROF_THREAD_NAME_MAX)));
				if (tr[k].labels != NULL)
					pprof_set_labels(st, tr[k].labels);
			}
			pprof_pb_bytes(&st->prof, 2, st->sub.p, st->sub.len);
		}
	}
}

/*
 * The lifetime profile (prof_lifetime_collect's snapshot): one Sample per
 * (stack, bucket) with the values alloc_objects and alloc_space (the
 * stack's sampled allocations, unbiased as the heap
 * profile's), the string label lifetime (the bucket: "<1ms" ... ">1s",
 * "live"; a live one also age, the same buckets' names for the objects'
 * age at the dump) and, when the stack had samples freed, the numeric labels
 * lifetime_min, lifetime_mean and lifetime_max of those, in nanoseconds:
 * `go tool pprof -tagfocus lifetime=<1ms` keeps the short-lived bytes of
 * every stack, `-tags` prints the buckets' shares and the lifetimes with
 * their units (1.20ms), and -tagfocus accepts ranges of them
 * (lifetime_max=0:10ms).
 */
static void pprof_num_label(pprof_state_t *st, uint64_t key, uint64_t v,
    uint64_t unit) {
	uint8_t label[40];
	size_t n = 0;
	label[n++] = (1 << 3) | 0;
	n += pprof_pb_varint(label + n, key);
	label[n++] = (3 << 3) | 0;
	n += pprof_pb_varint(label + n, v);
	label[n++] = (4 << 3) | 0;
	n += pprof_pb_varint(label + n, unit);
	pprof_pb_bytes(&st->sub, 3, label, n);
}

static void pprof_emit_lifetimes(pprof_state_t *st, const dump_snap_t *s) {
	uint64_t life_key = str_index(st, "lifetime");
	uint64_t age_key = str_index(st, "age");
	uint64_t min_key = str_index(st, "lifetime_min");
	uint64_t mean_key = str_index(st, "lifetime_mean");
	uint64_t max_key = str_index(st, "lifetime_max");
	uint64_t ns_unit = str_index(st, "nanoseconds");
	double R = (double)((uint64_t)1 << s->lg_sample);
	const char *p = s->gbuf;
	for (size_t i = 0; i < s->ngctx; i++) {
		const dump_gctx_t *g = (const dump_gctx_t *)p;
		p += sizeof(*g);
		void *const *frames = (void *const *)p;
		p += dump_frames_size(g->nframes);
		const dump_tctx_t *tr = (const dump_tctx_t *)p;
		p += g->ntctx * sizeof(dump_tctx_t);
		/* The locations, kept for each of the stack's samples. */
		size_t locs_len = pprof_pack_locations(st, frames, g->nframes);
		for (uint32_t k = 0; k < g->ntctx; k++) {
			const prof_cnt_t *c = &tr[k].cnt;
			uint64_t v[2];
			pprof_values(c->curobjs_shifted_unbiased,
			    c->curbytes_unbiased, R, &v[0], &v[1]);
			st->sub.len = 0;
			pprof_pb_bytes(&st->sub, 1, st->packed.p, locs_len);
			pprof_pb_raw_varint(&st->packed, v[0]);
			pprof_pb_raw_varint(&st->packed, v[1]);
			pprof_pb_bytes(&st->sub, 2, st->packed.p + locs_len,
			    st->packed.len - locs_len);
			st->packed.len = locs_len;
			uint64_t b = tr[k].uid < PROF_LIFE_LIVE ?
			    tr[k].uid : PROF_LIFE_LIVE;
			pprof_label(st, life_key, str_index(st,
			    prof_lifetime_bucket_names[b]));
			/* A live bucket: the objects' age at the dump. */
			if (tr[k].uid >= PROF_LIFE_LIVE &&
			    tr[k].uid < PROF_LIFE_NUIDS)
				pprof_label(st, age_key, str_index(st,
				    prof_lifetime_bucket_names[tr[k].uid -
				    PROF_LIFE_LIVE]));
			if (g->cnt.accumobjs != 0) {
				pprof_num_label(st, min_key, c->accumobjs,
				    ns_unit);
				pprof_num_label(st, mean_key,
				    c->accumobjs_shifted_unbiased, ns_unit);
				pprof_num_label(st, max_key, c->accumbytes,
				    ns_unit);
			}
			pprof_pb_bytes(&st->prof, 2, st->sub.p, st->sub.len);
		}
	}
}

static void pprof_value_type(pprof_state_t *st, unsigned field,
    const char *type, const char *unit) {
	uint8_t vt[24];
	size_t n = 0;
	vt[n++] = (1 << 3) | 0;
	n += pprof_pb_varint(vt + n, str_index(st, type));
	vt[n++] = (2 << 3) | 0;
	n += pprof_pb_varint(vt + n, str_index(st, unit));
	pprof_pb_bytes(&st->prof, field, vt, n);
}

/* ------------------------------------------------------------- profile */

static void pprof_reset(pprof_state_t *st) {
	pprof_buf_t *bufs[] = {&st->prof, &st->sub, &st->packed, &st->strs,
	    &st->stab, &st->shash, &st->maps, &st->lhash, &st->locs,
	    &st->text, &st->fhash, &st->funcs};
	for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++) {
		bufs[i]->len = 0;
		bufs[i]->oom = false;
		bufs[i]->mem = &pprof_mem;
	}
	st->shash_n = 0;
	st->lhash_n = 0;
	st->fhash_n = 0;
}

/* Encode the whole Profile message into st->prof; true on OOM. */
static bool pprof_encode(pprof_state_t *st, const dump_snap_t *s,
    const char *sample_type) {
	pprof_reset(st);
	(void)str_index(st, "");        /* string 0 is always "" */
	size_t nframes = 0;
	const char *p = s->gbuf;
	for (size_t i = 0; i < s->ngctx; i++) {
		const dump_gctx_t *g = (const dump_gctx_t *)p;
		nframes += g->nframes;
		p += sizeof(*g) + dump_frames_size(g->nframes) +
		    g->ntctx * sizeof(dump_tctx_t);
	}
	if (loc_table_init(st, nframes))
		return true;
	pprof_collect_maps(st, s);

	unsigned ntypes = s->lifetimes ? 0 : s->accum ? 4 : 2;
	const prof_snap_sample_type_t *types = s->types != NULL ? s->types :
	    prof_snap_sample_types;
	for (unsigned i = 0; i < ntypes; i++)
		pprof_value_type(st, 1, types[i].type, types[i].unit);
	if (s->lifetimes) {
		/* All allocations at the stack, split by how long they
		 * lived: malloc-prof reads alloc_* as a heap profile's. */
		pprof_value_type(st, 1, "alloc_objects", "count");
		pprof_value_type(st, 1, "alloc_space", "bytes");
		pprof_emit_lifetimes(st, s);
		/* The profile says what it is (go tool pprof -comments;
		 * malloc-prof temporary checks for it). */
		pprof_pb_uint(&st->prof, 13, str_index(st, "malloc_prof "
		    "lifetimes: objects and bytes of sampled allocations by "
		    "how long they lived (label lifetime)"));
	} else {
		pprof_emit_samples(st, s);
	}
	/* Locations first: symbolizing them marks the mappings that have
	 * functions. */
	pprof_emit_locations(st);
	pprof_emit_maps(st);

	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	pprof_pb_uint(&st->prof, 9, s->time_ns != 0 ? s->time_ns :
	    (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec);
	if (s->duration_ns != 0)
		pprof_pb_uint(&st->prof, 10, s->duration_ns);
	pprof_value_type(st, 11, "space", "bytes");
	pprof_pb_uint(&st->prof, 12, (uint64_t)1 << s->lg_sample);
	pprof_pb_uint(&st->prof, 14, str_index(st, sample_type != NULL ?
	    sample_type : s->lifetimes ? "alloc_objects" : types[1].type));

	/* The string table last: every index above is assigned by now. */
	size_t cnt = pprof_nstrings(st);
	for (size_t i = 0; i < cnt && !pprof_any_oom(st); i++) {
		const pprof_str_t *e = (const pprof_str_t *)st->stab.p + i;
		pprof_pb_bytes(&st->prof, 6, st->strs.p + e->off, e->len);
	}
	return pprof_any_oom(st);
}

bool prof_pprof_write(const dump_snap_t *s, int fd,
    const char *sample_type, int *errp, const char **whyp) {
	pprof_state_t *st = &pprof_state;
	*errp = 0;
	*whyp = NULL;
	bool fail = false;
	if (pprof_encode(st, s, sample_type)) {
		*whyp = "out of memory for the pprof encoder (or the profile "
		    "is larger than 256 MiB)";
		fail = true;
	} else if (prof_gzip_write(fd, st->prof.p, st->prof.len, errp)) {
		if (*errp == ENOMEM)
			*whyp = "out of memory for the gzip writer";
		fail = true;
	}
	pprof_reset(st);
	return fail;
}

/* ----------------------------------------------------------------- gzip */

/* ------------------------------------------------- unit-test entry points */

size_t prof_pb_varint(uint8_t *out, uint64_t v) {
	return pprof_pb_varint(out, v);
}

bool prof_gzip_write(int fd, const void *data, size_t len, int *errp) {
	return pprof_gzip_write(&pprof_state.gz, fd, data, len, errp);
}
