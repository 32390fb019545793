/*
 * test/unit/prof_drop.c - the pages of .eh_frame that a walk's first
 * read of an object's tables mapped are dropped again (prof_cfi.c,
 * prof_cfi_walk_end): only where prof_cfi_drop_range finds it safe (a
 * read-only segment all from the file, no writable page or RELRO page
 * shared with it, no text relocations), a bounded number of times per
 * object, and the pages then still read what the file holds.
 *
 * prof_drop.conf: prof:true,lg_prof_sample:0.  No check depends on the
 * machine's speed.
 */
#include "../test_util.h"

#include "malloc_prof/internal/internal.h"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <unistd.h>

static int setup(void **state) {
	(void)state;
	return malloc_init() || tsd_fetch() == NULL ? -1 : 0;
}

#define SEG_R 0x100000u
#define SEG_R_SIZE (4 * PAGE + 100)

static ElfW(Phdr) ph_load(uint32_t flags, uintptr_t vaddr, size_t size) {
	return (ElfW(Phdr)){.p_type = PT_LOAD, .p_flags = flags,
	    .p_vaddr = vaddr, .p_filesz = size, .p_memsz = size};
}

/* Synthetic program headers at bias 0: the range, and each refusal. */
static void test_drop_range(void **state) {
	(void)state;
	uintptr_t hdr = SEG_R + PAGE + 40, lo = 0, hi = 0;
	ElfW(Phdr) ph[3] = {
		ph_load(PF_R | PF_X, SEG_R - 8 * PAGE, 8 * PAGE),
		ph_load(PF_R, SEG_R, SEG_R_SIZE),
		ph_load(PF_R | PF_W, SEG_R + 6 * PAGE + 8, PAGE),
	};
	assert_false(prof_cfi_drop_range(ph, 3, 0, hdr, &lo, &hi));
	/* From the page after hdr's to the segment's last page. */
	assert_int_equal(lo, SEG_R + 2 * PAGE);
	assert_int_equal(hi, SEG_R + 5 * PAGE);
	/* The same with a bias. */
	assert_false(prof_cfi_drop_range(ph, 3, 16 * PAGE, hdr + 16 * PAGE,
	    &lo, &hi));
	assert_int_equal(lo, SEG_R + 18 * PAGE);
	/* hdr in no segment, or in a writable one. */
	assert_true(prof_cfi_drop_range(ph, 3, 0, SEG_R + 5 * PAGE, &lo,
	    &hi));
	assert_true(prof_cfi_drop_range(ph, 3, 0, SEG_R + 6 * PAGE + 16,
	    &lo, &hi));
	/* Bytes past the file's (zeroes, not the file's pages). */
	ElfW(Phdr) bss[2] = {ph[0], ph[1]};
	bss[1].p_memsz += PAGE;
	assert_true(prof_cfi_drop_range(bss, 2, 0, hdr, &lo, &hi));
	/* A writable segment or RELRO sharing the last page. */
	ElfW(Phdr) near[3] = {ph[0], ph[1], ph[2]};
	near[2].p_vaddr = SEG_R + SEG_R_SIZE + 8;
	assert_true(prof_cfi_drop_range(near, 3, 0, hdr, &lo, &hi));
	near[2] = (ElfW(Phdr)){.p_type = PT_GNU_RELRO, .p_flags = PF_R,
	    .p_vaddr = SEG_R + 3 * PAGE, .p_memsz = 64};
	assert_true(prof_cfi_drop_range(near, 3, 0, hdr, &lo, &hi));
	/* Text relocations, either way; other flags are fine. */
	static ElfW(Dyn) dyn[3];
	ElfW(Phdr) dph[3] = {ph[0], ph[1], {.p_type = PT_DYNAMIC,
	    .p_flags = PF_R | PF_W, .p_vaddr = (uintptr_t)dyn,
	    .p_memsz = sizeof(dyn)}};
	dyn[0] = (ElfW(Dyn)){.d_tag = DT_FLAGS, .d_un.d_val = DF_BIND_NOW};
	dyn[1] = (ElfW(Dyn)){.d_tag = DT_NULL};
	assert_false(prof_cfi_drop_range(dph, 3, 0, hdr, &lo, &hi));
	dyn[0].d_un.d_val |= DF_TEXTREL;
	assert_true(prof_cfi_drop_range(dph, 3, 0, hdr, &lo, &hi));
	dyn[0] = (ElfW(Dyn)){.d_tag = DT_TEXTREL};
	assert_true(prof_cfi_drop_range(dph, 3, 0, hdr, &lo, &hi));
}

typedef struct {
	const char *name;
	uintptr_t lo, hi;       /* the range prof_cfi_drop_range gives */
	off_t off;              /* lo's offset in the file */
} libc_range_t;

static int find_libc(struct dl_phdr_info *info, size_t size, void *arg) {
	libc_range_t *r = arg;
	(void)size;
	if (strstr(info->dlpi_name, "/libc.so") == NULL)
		return 0;
	for (unsigned i = 0; i < info->dlpi_phnum; i++) {
		if (info->dlpi_phdr[i].p_type != PT_GNU_EH_FRAME)
			continue;
		uintptr_t hdr = info->dlpi_addr +
		    info->dlpi_phdr[i].p_vaddr;
		if (prof_cfi_drop_range(info->dlpi_phdr, info->dlpi_phnum,
		    info->dlpi_addr, hdr, &r->lo, &r->hi))
			return 0;
		for (unsigned j = 0; j < info->dlpi_phnum; j++) {
			const ElfW(Phdr) *ph = &info->dlpi_phdr[j];
			uintptr_t a = info->dlpi_addr + ph->p_vaddr;
			if (ph->p_type == PT_LOAD && a <= r->lo &&
			    r->lo - a < ph->p_memsz)
				r->off = (off_t)(ph->p_offset + (r->lo - a));
		}
		r->name = info->dlpi_name;
		return 1;
	}
	return 0;
}

static MP_NOINLINE unsigned walk(void **vec, unsigned max) {
	return prof_backtrace(vec, max, (uintptr_t)__builtin_frame_address(0));
}

/* Every stack reaches libc's start code: its tables were read (the
 * setup's allocations were all sampled) and dropped at least once, at
 * most PROF_CFI_DROPS_PER_OBJ times however many walks follow, and the
 * dropped pages read what libc's file holds. */
static void test_drop_libc(void **state) {
	(void)state;
	if (!config_prof || !opt_prof)
		MP_SKIP("profiling not built in / not on");
	libc_range_t r = {NULL, 0, 0, 0};
	if (dl_iterate_phdr(find_libc, &r) == 0 || r.name == NULL)
		MP_SKIP("no libc.so whose tables may be dropped");
	/* One sample of our own first: it sets up the thread's walk (its
	 * stack bounds).  In an unprefixed build cmocka's mallocs already
	 * did; a prefixed build's go to the C library's malloc. */
	free(malloc(64));
	void *vec[64], *again[64];
	assert_true(walk(vec, 64) > 2);
	unsigned drops = prof_cfi_drops_of(r.lo);
	if (drops == 0)
		MP_SKIP("no drop (no _dl_find_object, or no walk into libc)");
	assert_true(drops <= PROF_CFI_DROPS_PER_OBJ);
	uint64_t total = prof_cfi_drops();
	for (int i = 0; i < 100; i++) {
		void *p = malloc(100 + i);      /* each one a sample */
		assert_non_null(p);
		free(p);
		assert_true(walk(again, 64) > 2);
	}
	/* libc's rows are cached: no more reads, no more drops there;
	 * and never more than the bound. */
	assert_int_equal(prof_cfi_drops_of(r.lo), drops);
	assert_true(prof_cfi_drops() >= total);
	/* The pages read the file's bytes. */
	int fd = open(r.name, O_RDONLY);
	assert_true(fd >= 0);
	size_t len = r.hi - r.lo;
	unsigned char *buf = malloc(len);
	assert_non_null(buf);
	ssize_t got = pread(fd, buf, len, r.off);
	close(fd);
	assert_int_equal(got, (ssize_t)len);
	assert_memory_equal(buf, (const void *)r.lo, len);
	free(buf);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_drop_range),
		cmocka_unit_test(test_drop_libc),
	};
	return cmocka_run_group_tests(tests, setup, NULL);
}
