/*
 * test/lib_data.h - how many pages of the library's static data (.data
 * and the .bss after it) a process has written, read from /proc/self/smaps
 * and /proc/self/pagemap, for the tests that bound it: what the
 * profiler's samples write (integration/prof_data_pages) and what every
 * process's boot writes (integration/boot_data_pages), and whether
 * memory a process should not have touched or has given back is resident
 * (unit/http_conns_idle, stress/decay).  smaps is read with open/read into a static buffer:
 * no allocation between a reading and the code it measures.  Include
 * after test_util.h.
 */
#ifndef MALLOC_PROF_TEST_LIB_DATA_H
#define MALLOC_PROF_TEST_LIB_DATA_H

#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>

/* The library's file (its real path: /proc/self/smaps names the file,
 * not the soname's link) and where it is loaded, found from mallctl. */
static MP_UNUSED const char *mp_lib_data_path(uintptr_t *base) {
	static char lib[PATH_MAX];
	Dl_info info;
	assert_true(dladdr((void *)mallctl, &info) != 0);
	assert_non_null(info.dli_fname);
	assert_non_null(realpath(info.dli_fname, lib));
	*base = (uintptr_t)info.dli_fbase;
	return lib;
}

static char mp_smaps_buf[1 << 20];
/* The library's writable mappings of the last reading: those of its file
 * with write permission (.data, and .bss up to the file's last page) and
 * the anonymous one that directly follows them (.bss past the file's
 * end). */
#define MP_LIB_RANGES_MAX 4
static unsigned long mp_range_lo[MP_LIB_RANGES_MAX];
static unsigned long mp_range_hi[MP_LIB_RANGES_MAX];
static bool mp_range_file[MP_LIB_RANGES_MAX];
static int mp_nranges;

static MP_UNUSED void mp_lib_data_ranges(const char *lib) {
	int fd = open("/proc/self/smaps", O_RDONLY);
	assert_true(fd >= 0);
	size_t len = 0;
	ssize_t n;
	while (len < sizeof(mp_smaps_buf) - 1 && (n = read(fd,
	    mp_smaps_buf + len, sizeof(mp_smaps_buf) - 1 - len)) > 0)
		len += (size_t)n;
	close(fd);
	assert_true(len < sizeof(mp_smaps_buf) - 1);
	mp_smaps_buf[len] = '\0';
	mp_nranges = 0;
	bool prev_lib_rw = false;   /* the previous mapping was ours, rw */
	unsigned long prev_end = 0;
	int found = 0;
	for (char *line = mp_smaps_buf, *next; *line != '\0'; line = next) {
		next = strchr(line, '\n');
		if (next == NULL)
			next = line + strlen(line);
		else
			*next++ = '\0';
		unsigned long lo, hi;
		char perm[8];
		int path_at = 0;
		if (sscanf(line, "%lx-%lx %7s %*s %*s %*s %n", &lo, &hi, perm,
		    &path_at) != 3 || path_at == 0)
			continue;
		const char *path = line + path_at;
		bool ours = strcmp(path, lib) == 0;
		bool rw = perm[0] == 'r' && perm[1] == 'w';
		if (rw && (ours || (prev_lib_rw && *path == '\0' &&
		    lo == prev_end))) {
			found++;
			if (mp_nranges < MP_LIB_RANGES_MAX) {
				mp_range_lo[mp_nranges] = lo;
				mp_range_hi[mp_nranges] = hi;
				mp_range_file[mp_nranges++] = ours;
			}
		}
		prev_lib_rw = ours && rw;
		prev_end = hi;
	}
	MP_ASSERT(found >= 2, "%d writable mappings of %s", found, lib);
}

/*
 * Which pages of the library's writable mappings the process has written,
 * one byte a page, and how many: a page of the file's mappings that is
 * private (/proc/self/pagemap: present, not file-backed: copied on
 * write), a page of the anonymous .bss mapping that is present and holds
 * a byte other than zero.  Not every present .bss page: a kernel that
 * maps no shared zero page gives a page of its own to a read as well
 * (seen on 6.18), and every variable the allocator reads is on such a
 * page, written or not.  A .bss page is read here only when present.
 */
#define MP_LIB_PAGES_MAX 4096
static unsigned char mp_written_before[MP_LIB_PAGES_MAX],
    mp_written_after[MP_LIB_PAGES_MAX];

static MP_UNUSED long mp_lib_data_written(const char *lib,
    unsigned char *written) {
	mp_lib_data_ranges(lib);
	memset(written, 0, MP_LIB_PAGES_MAX);
	int fd = open("/proc/self/pagemap", O_RDONLY);
	assert_true(fd >= 0);
	size_t page = mp_page_size(), k = 0;
	long count = 0;
	for (int r = 0; r < mp_nranges; r++) {
		for (unsigned long a = mp_range_lo[r]; a < mp_range_hi[r] &&
		    k < MP_LIB_PAGES_MAX; a += page, k++) {
			uint64_t e = 0;
			assert_int_equal(pread(fd, &e, sizeof(e), (off_t)(a /
			    page * sizeof(e))), (ssize_t)sizeof(e));
			bool present = e >> 63 & 1, file = e >> 61 & 1;
			bool w = false;
			if (present && mp_range_file[r]) {
				w = !file;
			} else if (present) {
				const unsigned char *b =
				    (const unsigned char *)a;
				for (size_t i = 0; i < page && !w; i++)
					w = b[i] != 0;
			}
			written[k] = w;
			count += w;
		}
	}
	close(fd);
	return count;
}

/* Prints the pages written since `before` was taken (all written pages if
 * it is NULL), as offsets in the library (nm names what lies there). */
static MP_UNUSED void mp_lib_data_print_new_pages(uintptr_t base,
    const unsigned char *before, const unsigned char *after) {
	size_t page = mp_page_size(), k = 0;
	for (int r = 0; r < mp_nranges; r++) {
		for (unsigned long a = mp_range_lo[r]; a < mp_range_hi[r] &&
		    k < MP_LIB_PAGES_MAX; a += page, k++) {
			if (after[k] && (before == NULL || !before[k]))
				printf("# written: library offset %#lx\n",
				    (unsigned long)(a - base));
		}
	}
}

/* How many whole pages of [addr, addr + size) are present
 * (/proc/self/pagemap), of *pages; -1: unknown. */
static MP_UNUSED int mp_pages_present(const void *addr, size_t size,
    unsigned *pages) {
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	uintptr_t lo = ((uintptr_t)addr + page - 1) & ~(uintptr_t)(page - 1);
	uintptr_t hi = ((uintptr_t)addr + size) & ~(uintptr_t)(page - 1);
	*pages = 0;
	int pm = open("/proc/self/pagemap", O_RDONLY);
	if (pm < 0)
		return -1;
	int present = 0;
	for (uintptr_t p = lo; p < hi; p += page) {
		uint64_t e = 0;
		if (pread(pm, &e, sizeof(e), (off_t)(p / page * sizeof(e))) !=
		    (ssize_t)sizeof(e)) {
			close(pm);
			return -1;
		}
		(*pages)++;
		present += (int)(e >> 63);
	}
	close(pm);
	return present;
}

#endif /* MALLOC_PROF_TEST_LIB_DATA_H */
