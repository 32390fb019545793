/*
 * test/unit/prof_cfi.c - the .eh_frame reader of the profiler's unwinder
 * (src/prof/prof_cfi.c).
 *
 * Hand-built tables (a CIE, FDEs, a terminator and an .eh_frame_hdr,
 * written byte by byte here) check each pointer encoding, each CFA
 * instruction and the rows they give, the binary search and the scan
 * without a table; malformed tables (truncated, bad lengths, CIE
 * pointers that point anywhere, LEB128 runs, remember_state overflow,
 * every single-byte change and truncation of a valid table) must fail
 * with a code, never fault (the ASan build reads nothing out of
 * bounds).  Then the real tables of this program and of libc, found
 * with dl_iterate_phdr: every FDE decodes, most function entries give the
 * x86-64 entry rule (CFA = rsp + 8, return address at CFA - 8), and a
 * call chain compiled without frame pointers unwinds, from registers
 * captured in its innermost function, through each caller's return
 * address as the callers recorded it with __builtin_return_address(0),
 * also by prof_cfi_unwind (objects found by the loader, rows cached).
 */
#include "../test_util.h"

#include "malloc_prof/internal/internal.h"
#include <dlfcn.h>
#include <link.h>
#include <string.h>

/* ------------------------------------------------------- table builder */

/* One mapping holding a hand-built .eh_frame_hdr at 0 and .eh_frame at
 * EH_AT; what the code addresses are does not matter (nothing reads
 * code), so FDEs name addresses near it or absolute ones. */
#define MEM_SIZE 16384
#define EH_AT 4096
static _Alignas(16) uint8_t mem[MEM_SIZE];

typedef struct {
	uint8_t *base;
	size_t n, cap;
} bb_t;

static void put8(bb_t *b, uint8_t v) {
	assert_true(b->n < b->cap);
	b->base[b->n++] = v;
}

static void putn(bb_t *b, uint64_t v, size_t n) {
	for (size_t i = 0; i < n; i++)
		put8(b, (uint8_t)(v >> (8 * i)));
}

static void put_uleb(bb_t *b, uint64_t v) {
	do {
		uint8_t byte = v & 0x7f;
		v >>= 7;
		put8(b, byte | (v != 0 ? 0x80 : 0));
	} while (v != 0);
}

static void put_sleb(bb_t *b, int64_t v) {
	for (;;) {
		uint8_t byte = (uint8_t)(v & 0x7f);
		v >>= 7;
		bool done = (v == 0 && (byte & 0x40) == 0) ||
		    (v == -1 && (byte & 0x40) != 0);
		put8(b, byte | (done ? 0 : 0x80));
		if (done)
			return;
	}
}

static void put_bytes(bb_t *b, const uint8_t *p, size_t n) {
	for (size_t i = 0; i < n; i++)
		put8(b, p[i]);
}

/* Writes an encoded pointer v in encoding enc at the builder's end. */
static void put_enc(bb_t *b, uint8_t enc, uintptr_t v, uintptr_t dbase) {
	uintptr_t field = (uintptr_t)(b->base + b->n);
	if ((enc & 0x70) == 0x10)
		v -= field;
	else if ((enc & 0x70) == 0x30)
		v -= dbase;
	switch (enc & 0x0f) {
	case 0x00: putn(b, v, sizeof(uintptr_t)); break;
	case 0x01: put_uleb(b, v); break;
	case 0x02: case 0x0a: putn(b, v, 2); break;
	case 0x03: case 0x0b: putn(b, v, 4); break;
	case 0x04: case 0x0c: putn(b, v, 8); break;
	case 0x09: put_sleb(b, (int64_t)v); break;
	default: fail();
	}
}

/* The x86-64 CIE program: CFA = rsp + 8, return address at CFA - 8. */
static const uint8_t cie_x86[] = {0x0c, 0x07, 0x08, 0x90, 0x01};

typedef struct {
	uintptr_t lo, len;
	const uint8_t *prog;
	size_t nprog;
} fde_spec_t;

typedef struct {
	const char *aug;        /* "zR" unless set */
	uint8_t fde_enc;
	uint64_t code_align;    /* 1 unless set */
	const uint8_t *cie_prog;        /* cie_x86 unless set */
	size_t ncie_prog;
	bool no_hdr;            /* .eh_frame_hdr without a table */
	bool no_terminator;
} table_spec_t;

/* Offsets in mem of the last table's FDEs (for the tests that damage
 * them). */
static size_t fde_at[64];

/* Builds .eh_frame (CIE, the FDEs, a terminator) and its header with a
 * sorted table into mem; obj covers them. */
static void build(const table_spec_t *t, const fde_spec_t *f, size_t nf,
    prof_cfi_obj_t *obj) {
	memset(mem, 0, sizeof(mem));
	bb_t eh = {mem + EH_AT, 0, MEM_SIZE - EH_AT};
	const char *aug = t->aug != NULL ? t->aug : "zR";
	const uint8_t *cp = t->cie_prog != NULL ? t->cie_prog : cie_x86;
	size_t ncp = t->cie_prog != NULL ? t->ncie_prog : sizeof(cie_x86);
	/* CIE. */
	putn(&eh, 0, 4);
	putn(&eh, 0, 4);                /* CIE id */
	put8(&eh, 1);                   /* version */
	put_bytes(&eh, (const uint8_t *)aug, strlen(aug) + 1);
	put_uleb(&eh, t->code_align != 0 ? t->code_align : 1);
	put_sleb(&eh, -8);
	put8(&eh, 16);                  /* return address column */
	bool z = aug[0] == 'z';
	if (z) {
		size_t len_at = eh.n;
		put8(&eh, 0);
		for (const char *a = aug + 1; *a != '\0'; a++) {
			if (*a == 'R')
				put8(&eh, t->fde_enc);
			else if (*a == 'P') {
				put8(&eh, 0x9b);        /* indirect pcrel sdata4 */
				putn(&eh, 0x12345678, 4);
			} else if (*a == 'L')
				put8(&eh, 0x1b);
		}
		eh.base[len_at] = (uint8_t)(eh.n - len_at - 1);
	}
	put_bytes(&eh, cp, ncp);
	while ((eh.n - 4) % 8 != 0)
		put8(&eh, 0);           /* DW_CFA_nop */
	uint32_t cie_len = (uint32_t)(eh.n - 4);
	memcpy(eh.base, &cie_len, 4);
	/* FDEs. */
	for (size_t i = 0; i < nf; i++) {
		size_t start = eh.n;
		fde_at[i] = EH_AT + start;
		putn(&eh, 0, 4);
		putn(&eh, (uint64_t)(eh.n), 4);         /* back to the CIE */
		put_enc(&eh, t->fde_enc, f[i].lo, 0);
		put_enc(&eh, t->fde_enc & 0x0f, f[i].len, 0);
		if (z)
			put_uleb(&eh, strchr(aug, 'L') != NULL ? 4 : 0);
		if (strchr(aug, 'L') != NULL)
			putn(&eh, 0, 4);
		/* No padding: a program cut short must stay cut. */
		put_bytes(&eh, f[i].prog, f[i].nprog);
		uint32_t len = (uint32_t)(eh.n - start - 4);
		memcpy(eh.base + start, &len, 4);
	}
	if (!t->no_terminator)
		putn(&eh, 0, 4);
	/* .eh_frame_hdr: pcrel sdata4 pointer, udata4 count, datarel
	 * sdata4 table sorted by address. */
	bb_t h = {mem, 0, EH_AT};
	put8(&h, 1);
	put8(&h, 0x1b);
	put8(&h, t->no_hdr ? 0xff : 0x03);
	put8(&h, t->no_hdr ? 0xff : 0x3b);
	put_enc(&h, 0x1b, (uintptr_t)eh.base, 0);
	if (!t->no_hdr) {
		putn(&h, nf, 4);
		size_t order[64];
		assert_true(nf <= 64);
		for (size_t i = 0; i < nf; i++)
			order[i] = i;
		for (size_t i = 1; i < nf; i++) {
			for (size_t j = i; j > 0 && f[order[j]].lo <
			    f[order[j - 1]].lo; j--) {
				size_t x = order[j];
				order[j] = order[j - 1];
				order[j - 1] = x;
			}
		}
		for (size_t i = 0; i < nf; i++) {
			put_enc(&h, 0x3b, f[order[i]].lo, (uintptr_t)mem);
			put_enc(&h, 0x3b, (uintptr_t)(mem + fde_at[order[i]]),
			    (uintptr_t)mem);
		}
	}
	assert_false(prof_cfi_obj_init(obj, mem, h.n, (uintptr_t)mem,
	    (uintptr_t)(mem + EH_AT + eh.n)));
	assert_ptr_equal(obj->eh, mem + EH_AT);
}

/* Code addresses near mem, reachable by pcrel sdata4. */
#define CODE ((uintptr_t)mem + 0x100000)

static prof_cfi_err_t find1(const uint8_t *prog, size_t n, uintptr_t pc,
    prof_cfi_rule_t *r) {
	table_spec_t t = {.fde_enc = 0x1b};
	fde_spec_t f = {CODE, 0x100, prog, n};
	prof_cfi_obj_t obj;
	build(&t, &f, 1, &obj);
	memset(r, 0xa5, sizeof(*r));
	return prof_cfi_find(&obj, pc, r);
}

static void expect_rule(const prof_cfi_rule_t *r, uint8_t cfa,
    int64_t cfa_off, uint8_t ra_how, int64_t ra_off, uint8_t rbp_how,
    int64_t rbp_off) {
	assert_int_equal(r->cfa, cfa);
	assert_int_equal(r->cfa_off, cfa_off);
	assert_int_equal(r->ra_how, ra_how);
	if (ra_how == PROF_CFI_AT_CFA)
		assert_int_equal(r->ra_off, ra_off);
	assert_int_equal(r->rbp_how, rbp_how);
	if (rbp_how == PROF_CFI_AT_CFA || rbp_how == PROF_CFI_VAL_CFA)
		assert_int_equal(r->rbp_off, rbp_off);
}

/* ---------------------------------------------------------- encodings */

static void test_fde_encodings(void **state) {
	(void)state;
	static const uint8_t encs[] = {0x00, 0x01, 0x02, 0x03, 0x04, 0x09,
	    0x0a, 0x0b, 0x0c, 0x10, 0x13, 0x14, 0x1a, 0x1b, 0x1c};
	for (size_t i = 0; i < sizeof(encs); i++) {
		uint8_t enc = encs[i];
		uintptr_t lo = CODE;
		if (enc == 0x02 || enc == 0x0a)
			lo = 0x1230;            /* small absolute addresses */
		else if (enc == 0x03 || enc == 0x0b)
			lo = 0x1234560;
		else if (enc == 0x1a)
			lo = (uintptr_t)mem + EH_AT + 0x2000;
		else if (enc == 0x1b || enc == 0x1c)
			lo = (uintptr_t)mem - 0x5000;   /* below: negative */
		/* The header's datarel sdata4 table reaches only addresses
		 * near it: the others are found by a scan. */
		intptr_t d = (intptr_t)(lo - (uintptr_t)mem);
		table_spec_t t = {.fde_enc = enc,
		    .no_hdr = d < INT32_MIN || d > INT32_MAX};
		fde_spec_t f = {lo, 0x40, NULL, 0};
		prof_cfi_obj_t obj;
		build(&t, &f, 1, &obj);
		prof_cfi_rule_t r;
		MP_ASSERT(prof_cfi_find(&obj, lo, &r) == PROF_CFI_OK,
		    "encoding %#x", enc);
		expect_rule(&r, PROF_CFI_CFA_RSP, 8, PROF_CFI_AT_CFA, -8,
		    PROF_CFI_SAME, 0);
		assert_true(r.lo == lo && r.hi == lo + 0x40);
		MP_ASSERT(prof_cfi_find(&obj, lo + 0x3f, &r) == PROF_CFI_OK,
		    "encoding %#x", enc);
		assert_int_equal(prof_cfi_find(&obj, lo + 0x40, &r),
		    PROF_CFI_NOT_FOUND);
		assert_int_equal(prof_cfi_find(&obj, lo - 1, &r),
		    PROF_CFI_NOT_FOUND);
		/* The same through a scan of .eh_frame. */
		t.no_hdr = true;
		build(&t, &f, 1, &obj);
		MP_ASSERT(prof_cfi_find(&obj, lo + 1, &r) == PROF_CFI_OK,
		    "encoding %#x, no table", enc);
		assert_int_equal(prof_cfi_find(&obj, lo + 0x40, &r),
		    PROF_CFI_NOT_FOUND);
	}
	/* Encodings the walker refuses: datarel in .eh_frame (no base),
	 * textrel, funcrel, aligned, indirect, omit. */
	static const uint8_t bad[] = {0x3b, 0x2b, 0x4b, 0x5b, 0x9b, 0xff,
	    0x05, 0x0f};
	for (size_t i = 0; i < sizeof(bad); i++) {
		table_spec_t t = {.fde_enc = 0x1b, .no_hdr = true};
		fde_spec_t f = {CODE, 0x40, NULL, 0};
		prof_cfi_obj_t obj;
		build(&t, &f, 1, &obj);
		/* The 'R' byte is the CIE's augmentation data. */
		uint8_t *cie = mem + EH_AT;
		uint8_t *r_byte = cie + 4 + 4 + 1 + 3 + 1 + 1 + 1 + 1;
		assert_int_equal(*r_byte, 0x1b);
		*r_byte = bad[i];
		prof_cfi_rule_t r;
		MP_ASSERT(prof_cfi_find(&obj, CODE, &r) == PROF_CFI_BAD,
		    "encoding %#x", bad[i]);
	}
}

static void test_augmentations(void **state) {
	(void)state;
	static const char *const augs[] = {"", "zR", "zPLR", "zRS", "zLR",
	    "zPR"};
	for (size_t i = 0; i < sizeof(augs) / sizeof(augs[0]); i++) {
		/* Without 'R' the FDE addresses are absolute pointers. */
		uint8_t enc = strchr(augs[i], 'R') != NULL ? 0x1b : 0x00;
		table_spec_t t = {.aug = augs[i], .fde_enc = enc};
		fde_spec_t f = {CODE, 0x40, NULL, 0};
		prof_cfi_obj_t obj;
		build(&t, &f, 1, &obj);
		prof_cfi_rule_t r;
		MP_ASSERT(prof_cfi_find(&obj, CODE + 2, &r) == PROF_CFI_OK,
		    "augmentation \"%s\"", augs[i]);
		assert_int_equal(r.signal, strchr(augs[i], 'S') != NULL);
	}
	/* Unknown letters, 'R' without 'z'. */
	static const char *const bad[] = {"zX", "R", "zRX", "eh"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		table_spec_t t = {.aug = bad[i], .fde_enc = 0x00};
		fde_spec_t f = {CODE, 0x40, NULL, 0};
		prof_cfi_obj_t obj;
		build(&t, &f, 1, &obj);
		prof_cfi_rule_t r;
		MP_ASSERT(prof_cfi_find(&obj, CODE, &r) == PROF_CFI_BAD,
		    "augmentation \"%s\"", bad[i]);
	}
}

/* ------------------------------------------------------- instructions */

/* A typical -O2 prologue with a frame pointer: push rbp (1 byte), mov
 * rsp, rbp (3), ..., then a remembered epilogue. */
static void test_prologue_rows(void **state) {
	(void)state;
	static const uint8_t prog[] = {
		0x41,                   /* advance_loc 1 */
		0x0e, 0x10,             /* def_cfa_offset 16 */
		0x86, 0x02,             /* offset r6 at cfa-16 */
		0x43,                   /* advance_loc 3 */
		0x0d, 0x06,             /* def_cfa_register r6 */
		0x02, 0x20,             /* advance_loc1 32: to 0x24 */
		0x0a,                   /* remember_state */
		0x0c, 0x07, 0x08,       /* def_cfa r7 8 */
		0xc6,                   /* restore r6 */
		0x03, 0x10, 0x00,       /* advance_loc2 16: to 0x34 */
		0x0b,                   /* restore_state */
		0x00, 0x00,             /* nop nop */
	};
	prof_cfi_rule_t r;
	assert_int_equal(find1(prog, sizeof(prog), CODE, &r), PROF_CFI_OK);
	expect_rule(&r, PROF_CFI_CFA_RSP, 8, PROF_CFI_AT_CFA, -8,
	    PROF_CFI_SAME, 0);
	assert_true(r.lo == CODE && r.hi == CODE + 1);
	assert_int_equal(find1(prog, sizeof(prog), CODE + 1, &r),
	    PROF_CFI_OK);
	expect_rule(&r, PROF_CFI_CFA_RSP, 16, PROF_CFI_AT_CFA, -8,
	    PROF_CFI_AT_CFA, -16);
	assert_true(r.lo == CODE + 1 && r.hi == CODE + 4);
	for (uintptr_t pc = CODE + 4; pc < CODE + 0x24; pc += 7) {
		assert_int_equal(find1(prog, sizeof(prog), pc, &r),
		    PROF_CFI_OK);
		expect_rule(&r, PROF_CFI_CFA_RBP, 16, PROF_CFI_AT_CFA, -8,
		    PROF_CFI_AT_CFA, -16);
	}
	assert_int_equal(find1(prog, sizeof(prog), CODE + 0x24, &r),
	    PROF_CFI_OK);
	expect_rule(&r, PROF_CFI_CFA_RSP, 8, PROF_CFI_AT_CFA, -8,
	    PROF_CFI_SAME, 0);
	assert_true(r.lo == CODE + 0x24 && r.hi == CODE + 0x34);
	assert_int_equal(find1(prog, sizeof(prog), CODE + 0x34, &r),
	    PROF_CFI_OK);
	expect_rule(&r, PROF_CFI_CFA_RBP, 16, PROF_CFI_AT_CFA, -8,
	    PROF_CFI_AT_CFA, -16);
	assert_true(r.lo == CODE + 0x34 && r.hi == CODE + 0x100);
}

static void test_each_opcode(void **state) {
	(void)state;
	prof_cfi_rule_t r;
	/* advance_loc4, then def_cfa_sf r7 -3 (x -8: 24). */
	static const uint8_t p1[] = {0x04, 0x10, 0, 0, 0, 0x12, 0x07, 0x7d};
	assert_int_equal(find1(p1, sizeof(p1), CODE + 0xf, &r), PROF_CFI_OK);
	assert_int_equal(r.cfa_off, 8);
	assert_int_equal(find1(p1, sizeof(p1), CODE + 0x10, &r), PROF_CFI_OK);
	expect_rule(&r, PROF_CFI_CFA_RSP, 24, PROF_CFI_AT_CFA, -8,
	    PROF_CFI_SAME, 0);
	/* def_cfa_offset_sf -4 (32); offset_extended r6 3 (-24). */
	static const uint8_t p2[] = {0x13, 0x7c, 0x05, 0x06, 0x03};
	assert_int_equal(find1(p2, sizeof(p2), CODE, &r), PROF_CFI_OK);
	expect_rule(&r, PROF_CFI_CFA_RSP, 32, PROF_CFI_AT_CFA, -8,
	    PROF_CFI_AT_CFA, -24);
	/* offset_extended_sf r6 -2 (-2 x -8: CFA + 16), then
	 * restore_extended r6. */
	static const uint8_t p3[] = {0x11, 0x06, 0x7e, 0x41, 0x06, 0x06};
	assert_int_equal(find1(p3, sizeof(p3), CODE, &r), PROF_CFI_OK);
	expect_rule(&r, PROF_CFI_CFA_RSP, 8, PROF_CFI_AT_CFA, -8,
	    PROF_CFI_AT_CFA, 16);
	assert_int_equal(find1(p3, sizeof(p3), CODE + 1, &r), PROF_CFI_OK);
	assert_int_equal(r.rbp_how, PROF_CFI_SAME);
	/* val_offset r6 2 (CFA - 16), val_offset_sf r6 1 (CFA - 8). */
	static const uint8_t p4[] = {0x14, 0x06, 0x02, 0x41, 0x15, 0x06,
	    0x01};
	assert_int_equal(find1(p4, sizeof(p4), CODE, &r), PROF_CFI_OK);
	assert_true(r.rbp_how == PROF_CFI_VAL_CFA && r.rbp_off == -16);
	assert_int_equal(find1(p4, sizeof(p4), CODE + 1, &r), PROF_CFI_OK);
	assert_true(r.rbp_how == PROF_CFI_VAL_CFA && r.rbp_off == -8);
	/* undefined r16: the outermost frame. */
	static const uint8_t p5[] = {0x07, 0x10};
	assert_int_equal(find1(p5, sizeof(p5), CODE, &r), PROF_CFI_OK);
	assert_int_equal(r.ra_how, PROF_CFI_UNDEF);
	/* same_value r6 after offset r6; undefined r6. */
	static const uint8_t p6[] = {0x86, 0x02, 0x08, 0x06, 0x41, 0x07,
	    0x06};
	assert_int_equal(find1(p6, sizeof(p6), CODE, &r), PROF_CFI_OK);
	assert_int_equal(r.rbp_how, PROF_CFI_SAME);
	assert_int_equal(find1(p6, sizeof(p6), CODE + 1, &r), PROF_CFI_OK);
	assert_int_equal(r.rbp_how, PROF_CFI_UNDEF);
	/* register r6 in r3: rbp unknown; the return address in a
	 * register: unsupported. */
	static const uint8_t p7[] = {0x09, 0x06, 0x03, 0x41, 0x09, 0x10,
	    0x03};
	assert_int_equal(find1(p7, sizeof(p7), CODE, &r), PROF_CFI_OK);
	assert_int_equal(r.rbp_how, PROF_CFI_UNDEF);
	assert_int_equal(find1(p7, sizeof(p7), CODE + 1, &r),
	    PROF_CFI_UNSUPPORTED);
	/* GNU_args_size, then rows as before. */
	static const uint8_t p8[] = {0x2e, 0x10, 0x0e, 0x18};
	assert_int_equal(find1(p8, sizeof(p8), CODE, &r), PROF_CFI_OK);
	assert_int_equal(r.cfa_off, 24);
	/* set_loc (pcrel sdata4, relative to its own field). */
	{
		uint8_t p9[8] = {0x01};
		table_spec_t t = {.fde_enc = 0x1b};
		fde_spec_t f = {CODE, 0x100, p9, sizeof(p9)};
		prof_cfi_obj_t obj;
		build(&t, &f, 1, &obj);
		/* Patch set_loc's operand where it landed. */
		uint8_t *op = mem + fde_at[0] + 4 + 4 + 4 + 4 + 1;
		assert_int_equal(op[0], 0x01);
		int32_t rel = (int32_t)(CODE + 0x20 - (uintptr_t)(op + 1));
		memcpy(op + 1, &rel, 4);
		op[5] = 0x0e;           /* def_cfa_offset 40 */
		op[6] = 0x28;
		assert_int_equal(prof_cfi_find(&obj, CODE + 0x1f, &r),
		    PROF_CFI_OK);
		assert_int_equal(r.cfa_off, 8);
		assert_true(r.hi == CODE + 0x20);
		assert_int_equal(prof_cfi_find(&obj, CODE + 0x20, &r),
		    PROF_CFI_OK);
		assert_int_equal(r.cfa_off, 40);
	}
	/* Code alignment 4: advance_loc 1 moves 4 bytes. */
	{
		static const uint8_t pa[] = {0x41, 0x0e, 0x10};
		table_spec_t t = {.fde_enc = 0x1b, .code_align = 4};
		fde_spec_t f = {CODE, 0x100, pa, sizeof(pa)};
		prof_cfi_obj_t obj;
		build(&t, &f, 1, &obj);
		assert_int_equal(prof_cfi_find(&obj, CODE + 3, &r),
		    PROF_CFI_OK);
		assert_int_equal(r.cfa_off, 8);
		assert_int_equal(prof_cfi_find(&obj, CODE + 4, &r),
		    PROF_CFI_OK);
		assert_int_equal(r.cfa_off, 16);
	}
	/* A CFA in another register (r10: stack realignment). */
	static const uint8_t pb[] = {0x0c, 0x0a, 0x00};
	assert_int_equal(find1(pb, sizeof(pb), CODE, &r),
	    PROF_CFI_UNSUPPORTED);
	/* ...and back to rsp before the pc: usable again. */
	static const uint8_t pc_[] = {0x0c, 0x0a, 0x00, 0x41, 0x0d, 0x07};
	assert_int_equal(find1(pc_, sizeof(pc_), CODE + 1, &r), PROF_CFI_OK);
	expect_rule(&r, PROF_CFI_CFA_RSP, 0, PROF_CFI_AT_CFA, -8,
	    PROF_CFI_SAME, 0);
}

static void test_expressions(void **state) {
	(void)state;
	prof_cfi_rule_t r;
	/* The linkers' lazy PLT rule. */
	static const uint8_t plt[] = {0x0f, 0x0b, 0x77, 0x08, 0x80, 0x00,
	    0x3f, 0x1a, 0x3b, 0x2a, 0x33, 0x24, 0x22};
	assert_int_equal(find1(plt, sizeof(plt), CODE, &r), PROF_CFI_OK);
	assert_int_equal(r.cfa, PROF_CFI_CFA_PLT);
	assert_int_equal(r.cfa_off, 8);
	assert_int_equal(r.plt_k, 11);
	/* def_cfa_offset on top of an expression is malformed. */
	static const uint8_t plt_off[] = {0x0f, 0x0b, 0x77, 0x08, 0x80, 0x00,
	    0x3f, 0x1a, 0x3b, 0x2a, 0x33, 0x24, 0x22, 0x0e, 0x10};
	assert_int_equal(find1(plt_off, sizeof(plt_off), CODE, &r),
	    PROF_CFI_BAD);
	/* Any other CFA expression (a signal frame's: breg7 160; deref). */
	static const uint8_t sig[] = {0x0f, 0x04, 0x77, 0xa0, 0x01, 0x06};
	assert_int_equal(find1(sig, sizeof(sig), CODE, &r),
	    PROF_CFI_UNSUPPORTED);
	/* Almost the PLT's. */
	static const uint8_t plt2[] = {0x0f, 0x0b, 0x77, 0x08, 0x80, 0x00,
	    0x3f, 0x1a, 0x3b, 0x2a, 0x33, 0x24, 0x1c};
	assert_int_equal(find1(plt2, sizeof(plt2), CODE, &r),
	    PROF_CFI_UNSUPPORTED);
	/* expression / val_expression on rbp: rbp unknown; on the
	 * return address: unsupported. */
	static const uint8_t e1[] = {0x10, 0x06, 0x02, 0x76, 0x00, 0x41,
	    0x16, 0x06, 0x02, 0x76, 0x00, 0x41, 0x10, 0x10, 0x02, 0x77,
	    0x00};
	assert_int_equal(find1(e1, sizeof(e1), CODE, &r), PROF_CFI_OK);
	assert_int_equal(r.rbp_how, PROF_CFI_UNDEF);
	assert_int_equal(find1(e1, sizeof(e1), CODE + 1, &r), PROF_CFI_OK);
	assert_int_equal(r.rbp_how, PROF_CFI_UNDEF);
	assert_int_equal(find1(e1, sizeof(e1), CODE + 2, &r),
	    PROF_CFI_UNSUPPORTED);
	/* An expression longer than the program. */
	static const uint8_t e2[] = {0x0f, 0x20, 0x77};
	assert_int_equal(find1(e2, sizeof(e2), CODE, &r), PROF_CFI_BAD);
}

/* ----------------------------------------------------------- malformed */

static void test_remember_stack(void **state) {
	(void)state;
	prof_cfi_rule_t r;
	uint8_t p[32];
	/* Eight levels are fine, nine are not. */
	memset(p, 0x0a, 8);
	memset(p + 8, 0x0b, 8);
	assert_int_equal(find1(p, 16, CODE, &r), PROF_CFI_OK);
	memset(p, 0x0a, 9);
	memset(p + 9, 0x0b, 9);
	assert_int_equal(find1(p, 18, CODE, &r), PROF_CFI_BAD);
	/* restore_state with nothing remembered. */
	p[0] = 0x0b;
	assert_int_equal(find1(p, 1, CODE, &r), PROF_CFI_BAD);
	/* remember_state without restore: fine. */
	p[0] = 0x0a;
	assert_int_equal(find1(p, 1, CODE, &r), PROF_CFI_OK);
}

static void test_malformed_programs(void **state) {
	(void)state;
	prof_cfi_rule_t r;
	static const struct {
		uint8_t p[16];
		size_t n;
	} bad[] = {
		{{0x0e}, 1},                    /* operand missing */
		{{0x0e, 0x80}, 2},              /* LEB128 cut */
		{{0x0e, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
		    0x80, 0x80, 0x01}, 12},     /* LEB128 of 11 bytes */
		{{0x0e, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
		    0xff, 0x01}, 11},           /* 2^64 - 1: offset too big */
		{{0x04, 0x01, 0x00}, 3},        /* advance_loc4 cut */
		{{0x1f}, 1},                    /* unknown opcode */
		{{0x2f, 0x06, 0x02}, 3},        /* GNU_negative_offset */
		{{0x10, 0x06, 0x09, 0x00}, 4},  /* expression past the end */
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		MP_ASSERT(find1(bad[i].p, bad[i].n, CODE, &r) == PROF_CFI_BAD,
		    "program %zu", i);
	}
	/* restore and advances are not for a CIE. */
	static const uint8_t cie_restore[] = {0x0c, 0x07, 0x08, 0x90, 0x01,
	    0xc6};
	static const uint8_t cie_advance[] = {0x0c, 0x07, 0x08, 0x90, 0x01,
	    0x41};
	table_spec_t t = {.fde_enc = 0x1b, .cie_prog = cie_restore,
	    .ncie_prog = sizeof(cie_restore)};
	fde_spec_t f = {CODE, 0x40, NULL, 0};
	prof_cfi_obj_t obj;
	build(&t, &f, 1, &obj);
	assert_int_equal(prof_cfi_find(&obj, CODE, &r), PROF_CFI_BAD);
	t.cie_prog = cie_advance;
	build(&t, &f, 1, &obj);
	assert_int_equal(prof_cfi_find(&obj, CODE, &r), PROF_CFI_BAD);
	/* A CIE that sets no CFA. */
	t.cie_prog = (const uint8_t *)"\x90\x01";
	t.ncie_prog = 2;
	build(&t, &f, 1, &obj);
	assert_int_equal(prof_cfi_find(&obj, CODE, &r), PROF_CFI_UNSUPPORTED);
}

/* Damaged entries: lengths, CIE pointers, versions, headers. */
static void test_malformed_entries(void **state) {
	(void)state;
	fde_spec_t f[2] = {{CODE, 0x40, NULL, 0}, {CODE + 0x40, 0x40, NULL,
	    0}};
	table_spec_t t = {.fde_enc = 0x1b};
	prof_cfi_obj_t obj;
	prof_cfi_rule_t r;
	uint32_t v;
	for (int scan = 0; scan < 2; scan++) {
		t.no_hdr = scan == 1;
		/* FDE length past the end. */
		build(&t, f, 2, &obj);
		v = 0x10000;
		memcpy(mem + fde_at[0], &v, 4);
		assert_int_equal(prof_cfi_find(&obj, CODE, &r), PROF_CFI_BAD);
		/* Reserved lengths and a cut 64-bit length. */
		build(&t, f, 2, &obj);
		v = 0xfffffff5;
		memcpy(mem + fde_at[0], &v, 4);
		assert_int_equal(prof_cfi_find(&obj, CODE, &r), PROF_CFI_BAD);
		build(&t, f, 2, &obj);
		v = 0xffffffff;
		memcpy(mem + fde_at[1], &v, 4);
		obj.eh_end = mem + fde_at[1] + 8;
		assert_int_equal(prof_cfi_find(&obj, CODE + 0x40, &r),
		    PROF_CFI_BAD);
		/* CIE pointer before .eh_frame, onto itself, onto the other
		 * FDE, and onto the CIE's middle. */
		for (size_t i = 0; i < 4; i++) {
			build(&t, f, 2, &obj);
			uint32_t p = i == 0 ? 0x100000 : i == 1 ? 4 :
			    i == 2 ? (uint32_t)(fde_at[1] + 4 - fde_at[0]) :
			    (uint32_t)(fde_at[1] + 4 - EH_AT - 6);
			memcpy(mem + fde_at[1] + 4, &p, 4);
			prof_cfi_err_t e = prof_cfi_find(&obj, CODE + 0x40, &r);
			MP_ASSERT(e == PROF_CFI_BAD || (scan == 1 && e ==
			    PROF_CFI_NOT_FOUND && i == 1), "pointer %zu: %d",
			    i, (int)e);
		}
		/* CIE version 2. */
		build(&t, f, 2, &obj);
		mem[EH_AT + 8] = 2;
		assert_int_equal(prof_cfi_find(&obj, CODE, &r), PROF_CFI_BAD);
		/* CIE augmentation without its NUL inside the entry. */
		build(&t, f, 2, &obj);
		memset(mem + EH_AT + 9, 'z', 15);
		assert_int_equal(prof_cfi_find(&obj, CODE, &r), PROF_CFI_BAD);
	}
	/* Header: version, count beyond its end, a table entry outside
	 * .eh_frame, a pcrel table. */
	t.no_hdr = false;
	build(&t, f, 2, &obj);
	mem[0] = 2;
	assert_int_equal(prof_cfi_find(&obj, CODE, &r), PROF_CFI_BAD);
	build(&t, f, 2, &obj);
	v = 1000;
	memcpy(mem + 8, &v, 4);
	assert_int_equal(prof_cfi_find(&obj, CODE, &r), PROF_CFI_BAD);
	build(&t, f, 2, &obj);
	v = 0x7fff0000;
	memcpy(mem + 16, &v, 4);
	assert_int_equal(prof_cfi_find(&obj, CODE, &r), PROF_CFI_BAD);
	build(&t, f, 2, &obj);
	mem[3] = 0x1b;
	assert_int_equal(prof_cfi_find(&obj, CODE, &r), PROF_CFI_BAD);
	/* obj_init: no header, bad version, .eh_frame outside the
	 * segment. */
	build(&t, f, 2, &obj);
	prof_cfi_obj_t o2;
	assert_true(prof_cfi_obj_init(&o2, NULL, 0, 0, UINTPTR_MAX));
	assert_true(prof_cfi_obj_init(&o2, mem, 3, (uintptr_t)mem,
	    (uintptr_t)mem + MEM_SIZE));
	assert_true(prof_cfi_obj_init(&o2, mem, 8, (uintptr_t)mem,
	    (uintptr_t)mem + EH_AT));
	mem[0] = 3;
	assert_true(prof_cfi_obj_init(&o2, mem, 8, (uintptr_t)mem,
	    (uintptr_t)mem + MEM_SIZE));
	/* No terminator: a scan stops at the end of the segment. */
	t.no_hdr = true;
	t.no_terminator = true;
	build(&t, f, 2, &obj);
	assert_int_equal(prof_cfi_find(&obj, CODE + 0x40, &r), PROF_CFI_OK);
	assert_int_equal(prof_cfi_find(&obj, CODE + 0x80, &r),
	    PROF_CFI_NOT_FOUND);
}

/* Every single-byte change and every truncation of a valid table fails
 * with a code or finds a row: never a fault (ASan), never a hang. */
static void test_mutations(void **state) {
	(void)state;
	static const uint8_t prog[] = {0x41, 0x0e, 0x10, 0x86, 0x02, 0x43,
	    0x0d, 0x06, 0x0a, 0x02, 0x20, 0x0c, 0x07, 0x08, 0x0b};
	fde_spec_t f[3] = {{CODE, 0x40, prog, sizeof(prog)},
	    {CODE + 0x40, 0x40, prog, sizeof(prog)},
	    {CODE + 0x90, 0x10, NULL, 0}};
	static uint8_t orig[MEM_SIZE];
	for (int scan = 0; scan < 2; scan++) {
		table_spec_t t = {.aug = "zPLR", .fde_enc = 0x1b,
		    .no_hdr = scan == 1};
		prof_cfi_obj_t obj;
		build(&t, f, 3, &obj);
		memcpy(orig, mem, sizeof(mem));
		size_t hdr_n = (size_t)(obj.hdr_end - obj.hdr);
		size_t eh_n = (size_t)(obj.eh_end - obj.eh);
		unsigned ok = 0, failed = 0;
		static const uint8_t vals[] = {0x00, 0x01, 0x7f, 0x80, 0xff};
		for (size_t where = 0; where < hdr_n + eh_n; where++) {
			size_t off = where < hdr_n ? where : EH_AT + where -
			    hdr_n;
			for (size_t k = 0; k <= sizeof(vals); k++) {
				memcpy(mem, orig, sizeof(mem));
				mem[off] = k < sizeof(vals) ? vals[k] :
				    (uint8_t)(orig[off] ^ 0x40);
				for (uintptr_t pc = CODE - 1; pc < CODE + 0xa1;
				    pc += 9) {
					prof_cfi_rule_t r;
					prof_cfi_err_t e = prof_cfi_find(&obj,
					    pc, &r);
					if (e == PROF_CFI_OK)
						ok++;
					else
						failed++;
					assert_true(e <= PROF_CFI_END);
				}
			}
		}
		/* Truncations: the table and .eh_frame cut anywhere. */
		memcpy(mem, orig, sizeof(mem));
		for (size_t cut = 0; cut < eh_n; cut++) {
			prof_cfi_obj_t o = obj;
			o.eh_end = o.eh + cut;
			if (cut == 0)
				o.eh_end = o.eh + 1;
			prof_cfi_rule_t r;
			(void)prof_cfi_find(&o, CODE + 0x41, &r);
			(void)prof_cfi_find(&o, CODE + 0x91, &r);
		}
		for (size_t cut = 1; cut < hdr_n; cut++) {
			prof_cfi_obj_t o = obj;
			o.hdr_end = o.hdr + cut;
			prof_cfi_rule_t r;
			(void)prof_cfi_find(&o, CODE + 0x41, &r);
		}
		assert_true(ok > 0 && failed > 0);
	}
}

static void test_binary_search(void **state) {
	(void)state;
	/* 60 functions with gaps, listed out of order. */
	fde_spec_t f[60];
	static const uint8_t prog[] = {0x41, 0x0e, 0x10};
	for (size_t i = 0; i < 60; i++) {
		size_t j = (i * 37) % 60;
		f[i] = (fde_spec_t){CODE + j * 0x100, 0x80 + j, prog,
		    sizeof(prog)};
	}
	for (int scan = 0; scan < 2; scan++) {
		table_spec_t t = {.fde_enc = 0x1b, .no_hdr = scan == 1};
		prof_cfi_obj_t obj;
		build(&t, f, 60, &obj);
		for (size_t j = 0; j < 60; j++) {
			uintptr_t lo = CODE + j * 0x100;
			prof_cfi_rule_t r;
			assert_int_equal(prof_cfi_find(&obj, lo, &r),
			    PROF_CFI_OK);
			assert_int_equal(r.cfa_off, 8);
			assert_int_equal(prof_cfi_find(&obj, lo + 1, &r),
			    PROF_CFI_OK);
			assert_int_equal(r.cfa_off, 16);
			assert_true(r.hi == lo + 0x80 + j);
			assert_int_equal(prof_cfi_find(&obj, lo + 0x7f + j,
			    &r), PROF_CFI_OK);
			assert_int_equal(prof_cfi_find(&obj, lo + 0x80 + j,
			    &r), PROF_CFI_NOT_FOUND);
		}
		prof_cfi_rule_t r;
		assert_int_equal(prof_cfi_find(&obj, CODE - 1, &r),
		    PROF_CFI_NOT_FOUND);
		assert_int_equal(prof_cfi_find(&obj, 0, &r),
		    PROF_CFI_NOT_FOUND);
		assert_int_equal(prof_cfi_find(&obj, UINTPTR_MAX, &r),
		    PROF_CFI_NOT_FOUND);
	}
}

/* --------------------------------------------------------------- steps */

static void test_apply(void **state) {
	(void)state;
	_Alignas(16) uintptr_t stack[16];
	uintptr_t lo = (uintptr_t)stack, hi = (uintptr_t)(stack + 16);
	for (size_t i = 0; i < 16; i++)
		stack[i] = 0x1000 + i;
	/* push rbp; mov rsp, rbp: CFA = rbp + 16. */
	prof_cfi_rule_t r = {.cfa = PROF_CFI_CFA_RBP, .cfa_off = 16,
	    .ra_how = PROF_CFI_AT_CFA, .ra_off = -8,
	    .rbp_how = PROF_CFI_AT_CFA, .rbp_off = -16};
	prof_cfi_regs_t g = {0x5000, lo, (uintptr_t)&stack[4]};
	assert_int_equal(prof_cfi_apply(&r, &g, lo, hi), PROF_CFI_OK);
	assert_true(g.rip == 0x1005 && g.rbp == 0x1004 &&
	    g.rsp == (uintptr_t)&stack[6]);
	/* CFA = rsp + 24, rbp unchanged. */
	r = (prof_cfi_rule_t){.cfa = PROF_CFI_CFA_RSP, .cfa_off = 24,
	    .ra_how = PROF_CFI_AT_CFA, .ra_off = -8,
	    .rbp_how = PROF_CFI_SAME};
	g = (prof_cfi_regs_t){0x5000, (uintptr_t)&stack[2], 77};
	assert_int_equal(prof_cfi_apply(&r, &g, lo, hi), PROF_CFI_OK);
	assert_true(g.rip == 0x1004 && g.rbp == 77 &&
	    g.rsp == (uintptr_t)&stack[5]);
	/* rbp undefined: 0; val_cfa: the CFA plus the offset. */
	r.rbp_how = PROF_CFI_UNDEF;
	g = (prof_cfi_regs_t){0x5000, (uintptr_t)&stack[2], 77};
	assert_int_equal(prof_cfi_apply(&r, &g, lo, hi), PROF_CFI_OK);
	assert_true(g.rbp == 0);
	r.rbp_how = PROF_CFI_VAL_CFA;
	r.rbp_off = -32;
	g = (prof_cfi_regs_t){0x5000, (uintptr_t)&stack[2], 77};
	assert_int_equal(prof_cfi_apply(&r, &g, lo, hi), PROF_CFI_OK);
	assert_true(g.rbp == (uintptr_t)&stack[1]);
	/* The PLT's: 8 more once (rip & 15) >= 11. */
	r = (prof_cfi_rule_t){.cfa = PROF_CFI_CFA_PLT, .cfa_off = 8,
	    .plt_k = 11, .ra_how = PROF_CFI_AT_CFA, .ra_off = -8,
	    .rbp_how = PROF_CFI_SAME};
	g = (prof_cfi_regs_t){0x500a, (uintptr_t)&stack[2], 0};
	assert_int_equal(prof_cfi_apply(&r, &g, lo, hi), PROF_CFI_OK);
	assert_true(g.rip == 0x1002 && g.rsp == (uintptr_t)&stack[3]);
	g = (prof_cfi_regs_t){0x500b, (uintptr_t)&stack[2], 0};
	assert_int_equal(prof_cfi_apply(&r, &g, lo, hi), PROF_CFI_OK);
	assert_true(g.rip == 0x1003 && g.rsp == (uintptr_t)&stack[4]);
	/* Failures leave the registers alone. */
	prof_cfi_regs_t before;
	r = (prof_cfi_rule_t){.cfa = PROF_CFI_CFA_RBP, .cfa_off = 16,
	    .ra_how = PROF_CFI_AT_CFA, .ra_off = -8,
	    .rbp_how = PROF_CFI_AT_CFA, .rbp_off = -16};
	static const uintptr_t rbps[] = {0, 1, UINTPTR_MAX, UINTPTR_MAX - 8};
	for (size_t i = 0; i < 4; i++) {
		g = before = (prof_cfi_regs_t){0x5000, lo, rbps[i]};
		assert_int_equal(prof_cfi_apply(&r, &g, lo, hi),
		    PROF_CFI_STACK);
		assert_memory_equal(&g, &before, sizeof(g));
	}
	/* Beyond the top, misaligned, below the bottom, not above rsp. */
	g = (prof_cfi_regs_t){0x5000, lo, hi};
	assert_int_equal(prof_cfi_apply(&r, &g, lo, hi), PROF_CFI_STACK);
	g = (prof_cfi_regs_t){0x5000, lo, (uintptr_t)&stack[4] + 1};
	assert_int_equal(prof_cfi_apply(&r, &g, lo, hi), PROF_CFI_STACK);
	g = (prof_cfi_regs_t){0x5000, lo, (uintptr_t)&stack[4]};
	assert_int_equal(prof_cfi_apply(&r, &g, lo + 48, hi),
	    PROF_CFI_STACK);
	g = (prof_cfi_regs_t){0x5000, (uintptr_t)&stack[8],
	    (uintptr_t)&stack[4]};
	assert_int_equal(prof_cfi_apply(&r, &g, lo, hi), PROF_CFI_STACK);
	r.cfa_off = -((int64_t)1 << 40);
	g = (prof_cfi_regs_t){0x5000, lo, (uintptr_t)&stack[4]};
	assert_int_equal(prof_cfi_apply(&r, &g, lo, hi), PROF_CFI_STACK);
	/* A zero or undefined return address ends the walk. */
	r = (prof_cfi_rule_t){.cfa = PROF_CFI_CFA_RSP, .cfa_off = 8,
	    .ra_how = PROF_CFI_AT_CFA, .ra_off = -8,
	    .rbp_how = PROF_CFI_SAME};
	stack[0] = 0;
	g = (prof_cfi_regs_t){0x5000, lo, 0};
	assert_int_equal(prof_cfi_apply(&r, &g, lo, hi), PROF_CFI_END);
	r.ra_how = PROF_CFI_UNDEF;
	assert_int_equal(prof_cfi_apply(&r, &g, lo, hi), PROF_CFI_END);
	r.ra_how = PROF_CFI_VAL_CFA;
	assert_int_equal(prof_cfi_apply(&r, &g, lo, hi),
	    PROF_CFI_UNSUPPORTED);
	r.cfa = 9;
	assert_int_equal(prof_cfi_apply(&r, &g, lo, hi), PROF_CFI_BAD);
}

/* ------------------------------------------------------- real tables */

typedef struct {
	uintptr_t pc;
	prof_cfi_obj_t *obj;
	bool found;
	char name[256];
} lookup_t;

/* The object whose executable segment holds pc, as dl_iterate_phdr
 * shows it. */
static int lookup_cb(struct dl_phdr_info *info, size_t size, void *arg) {
	(void)size;
	lookup_t *l = arg;
	bool here = false;
	const ElfW(Phdr) *eh = NULL;
	for (unsigned i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
		if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X) &&
		    l->pc >= lo && l->pc - lo < ph->p_memsz)
			here = true;
		if (ph->p_type == PT_GNU_EH_FRAME)
			eh = ph;
	}
	if (!here || eh == NULL)
		return 0;
	uintptr_t hdr = info->dlpi_addr + eh->p_vaddr;
	for (unsigned i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
		if (ph->p_type == PT_LOAD && hdr >= lo &&
		    hdr - lo < ph->p_memsz) {
			l->found = !prof_cfi_obj_init(l->obj,
			    (const void *)hdr, eh->p_memsz, lo,
			    lo + ph->p_memsz);
			snprintf(l->name, sizeof(l->name), "%s",
			    info->dlpi_name);
			return 1;
		}
	}
	return 1;
}

static bool obj_for(uintptr_t pc, prof_cfi_obj_t *obj, char *name,
    size_t namesize) {
	lookup_t l = {.pc = pc, .obj = obj};
	dl_iterate_phdr(lookup_cb, &l);
	if (name != NULL)
		snprintf(name, namesize, "%s", l.name);
	return l.found;
}

/* Every FDE of obj's table decodes, and most start with x86-64's
 * entry rule. */
static void check_object(const prof_cfi_obj_t *obj, const char *name) {
	const uint8_t *h = obj->hdr;
	if (h[2] != 0x03 || h[3] != 0x3b)
		MP_SKIP("%s: table encodings %#x %#x", name, h[2], h[3]);
	uint32_t count;
	memcpy(&count, h + 8, 4);
	assert_true(count > 0 && 12 + (size_t)count * 8 <=
	    (size_t)(obj->hdr_end - h));
	unsigned ok = 0, entry = 0, unsupported = 0;
	for (uint32_t i = 0; i < count; i++) {
		int32_t rel[2];
		memcpy(rel, h + 12 + (size_t)i * 8, 8);
		uintptr_t pc = (uintptr_t)h + (uintptr_t)(intptr_t)rel[0];
		prof_cfi_rule_t r;
		prof_cfi_err_t e = prof_cfi_find(obj, pc, &r);
		MP_ASSERT(e == PROF_CFI_OK || e == PROF_CFI_UNSUPPORTED ||
		    e == PROF_CFI_NOT_FOUND, "%s: FDE %u at %#lx: %d", name,
		    i, (unsigned long)pc, (int)e);
		if (e == PROF_CFI_UNSUPPORTED)
			unsupported++;
		if (e != PROF_CFI_OK)
			continue;
		ok++;
		assert_true(r.lo <= pc && pc < r.hi);
		if (r.cfa == PROF_CFI_CFA_RSP && r.cfa_off == 8 &&
		    r.ra_how == PROF_CFI_AT_CFA && r.ra_off == -8)
			entry++;
		/* A few pcs inside: each decodes to a row holding it. */
		uintptr_t hi = r.hi;
		for (int k = 0; k < 4 && hi > pc + 1; k++) {
			uintptr_t q = pc + (hi - pc) * (uintptr_t)k / 4;
			prof_cfi_err_t e2 = prof_cfi_find(obj, q, &r);
			MP_ASSERT(e2 == PROF_CFI_OK || e2 ==
			    PROF_CFI_UNSUPPORTED, "%s: pc %#lx: %d", name,
			    (unsigned long)q, (int)e2);
			if (e2 == PROF_CFI_OK)
				assert_true(r.lo <= q && q < r.hi);
		}
	}
	printf("# %s: %u FDEs, %u decoded, %u with the entry rule, "
	    "%u unsupported\n", name, count, ok, entry, unsupported);
	MP_ASSERT(ok >= count - count / 50, "%s", name);
	/* The others start inside a function: the PLT's (CFA = rsp + 16)
	 * and the cold parts GCC splits off (libc: 2%), which begin with
	 * their function's frame.  A sanitizer's instrumentation splits off
	 * many more (its report calls: 21% of this program's under ASan). */
	unsigned cold = mp_env_sanitizer()[0] != '\0' ? ok / 3 : ok / 10;
	MP_ASSERT(entry + 4 >= ok - cold, "%s: %u of %u FDEs with the entry "
	    "rule", name, entry, ok);
}

static void test_real_tables(void **state) {
	(void)state;
#if defined(__x86_64__)
	prof_cfi_obj_t obj;
	char name[256];
	assert_true(obj_for((uintptr_t)&prof_cfi_find, &obj, name,
	    sizeof(name)));
	check_object(&obj, "this program");
	/* libc: an exported function's address, where libc's text holds
	 * it (not a sanitizer's interceptor of the same name). */
	static const char *const names[] = {"getauxval", "ffs", "qsort"};
	Dl_info di;
	void *fn = NULL;
	for (size_t i = 0; i < 3 && fn == NULL; i++) {
		fn = dlsym(RTLD_DEFAULT, names[i]);
		if (fn != NULL && (dladdr(fn, &di) == 0 ||
		    di.dli_fname == NULL ||
		    strstr(di.dli_fname, "libc.so") == NULL))
			fn = NULL;
	}
	if (fn == NULL)
		MP_SKIP("no function of libc's found");
	assert_true(obj_for((uintptr_t)fn, &obj, name, sizeof(name)));
	check_object(&obj, "libc");
	/* Its entry row. */
	prof_cfi_rule_t r;
	assert_int_equal(prof_cfi_find(&obj, (uintptr_t)di.dli_saddr, &r),
	    PROF_CFI_OK);
	expect_rule(&r, PROF_CFI_CFA_RSP, 8, PROF_CFI_AT_CFA, -8,
	    PROF_CFI_SAME, 0);
#else
	MP_SKIP("x86-64 only");
#endif
}

/* ---------------------------------------------------- a real chain */

#if defined(__x86_64__)
/* Built without frame pointers whatever the build's flags (GCC; clang
 * takes the build's). */
#if defined(__GNUC__) && !defined(__clang__)
#define CHAIN_FN __attribute__((noinline, noclone, \
    optimize("omit-frame-pointer")))
#else
#define CHAIN_FN __attribute__((noinline))
#endif

#define CHAIN_DEPTH 4
static void *chain_ret[CHAIN_DEPTH];
static uintptr_t chain_got[64];
static unsigned chain_n;
static prof_cfi_err_t chain_err;
/* The same walk by prof_cfi_unwind (the backtrace's step: objects by
 * _dl_find_object or the fallback table, rows cached), twice: cold and
 * with every row cached. */
static uintptr_t chain_got2[2][64];
static unsigned chain_n2[2];
static volatile int chain_sink;

/* Walks from the registers of chain_lvl3, recording each return
 * address, until a step fails or ends. */
__attribute__((noinline)) static void chain_walk(prof_cfi_regs_t g) {
	pthread_attr_t attr;
	void *addr;
	size_t size;
	assert_int_equal(pthread_getattr_np(pthread_self(), &attr), 0);
	assert_int_equal(pthread_attr_getstack(&attr, &addr, &size), 0);
	pthread_attr_destroy(&attr);
	uintptr_t lo = g.rsp, hi = (uintptr_t)addr + size;
	for (int pass = 0; pass < 2; pass++) {
		prof_cfi_regs_t h = g;
		prof_cfi_obj_t obj;
		chain_n2[pass] = 0;
		if (!obj_for(h.rip, &obj, NULL, 0) ||
		    prof_cfi_step(&obj, &h, true, lo, hi) != PROF_CFI_OK)
			continue;
		do {
			chain_got2[pass][chain_n2[pass]++] = h.rip;
		} while (chain_n2[pass] < 64 &&
		    prof_cfi_unwind(&h, lo, hi) == PROF_CFI_OK);
	}
	chain_n = 0;
	chain_err = PROF_CFI_OK;
	for (bool first = true; chain_n < 64; first = false) {
		prof_cfi_obj_t obj;
		if (!obj_for(g.rip - (first ? 0 : 1), &obj, NULL, 0)) {
			chain_err = PROF_CFI_NOT_FOUND;
			return;
		}
		chain_err = prof_cfi_step(&obj, &g, first, lo, hi);
		if (chain_err != PROF_CFI_OK)
			return;
		chain_got[chain_n++] = g.rip;
	}
}

CHAIN_FN static int chain_lvl3(int x) {
	chain_ret[3] = __builtin_return_address(0);
	volatile char pad[200];
	pad[x & 127] = (char)x;
	prof_cfi_regs_t g;
	/* Registers here, at the instruction after the lea. */
	__asm__ volatile("leaq 0(%%rip), %0\n\t"
	    "movq %%rsp, %1\n\t"
	    "movq %%rbp, %2"
	    : "=r"(g.rip), "=r"(g.rsp), "=r"(g.rbp));
	chain_walk(g);
	return pad[x & 127] + 1;
}

CHAIN_FN static int chain_lvl2(int x) {
	chain_ret[2] = __builtin_return_address(0);
	volatile long pad[7];
	pad[x % 7] = x;
	return chain_lvl3(x + 1) + (int)pad[x % 7];
}

CHAIN_FN static int chain_lvl1(int x) {
	chain_ret[1] = __builtin_return_address(0);
	return chain_lvl2(x * 2) * 3;
}

CHAIN_FN static int chain_lvl0(int x) {
	chain_ret[0] = __builtin_return_address(0);
	int r = chain_lvl1(x + 5);
	chain_sink = r;
	return r + 1;
}
#endif

static void test_chain(void **state) {
	(void)state;
#if defined(__x86_64__)
	chain_sink = chain_lvl0(3);
	MP_ASSERT(chain_n >= CHAIN_DEPTH, "%u frames, stopped with %d",
	    chain_n, (int)chain_err);
	for (unsigned i = 0; i < CHAIN_DEPTH; i++) {
		MP_ASSERT(chain_got[i] == (uintptr_t)chain_ret[CHAIN_DEPTH -
		    1 - i], "frame %u: %#lx, want %#lx", i,
		    (unsigned long)chain_got[i],
		    (unsigned long)chain_ret[CHAIN_DEPTH - 1 - i]);
	}
	for (int pass = 0; pass < 2; pass++) {
		MP_ASSERT(chain_n2[pass] == chain_n, "pass %d: %u frames, "
		    "want %u", pass, chain_n2[pass], chain_n);
		assert_memory_equal(chain_got2[pass], chain_got,
		    chain_n * sizeof(uintptr_t));
	}
	/* On through this test, cmocka, main and libc's start: each frame
	 * a return address into some object's code. */
	printf("# %u frames, ended with %d\n", chain_n, (int)chain_err);
	assert_true(chain_n >= CHAIN_DEPTH + 2);
	for (unsigned i = 0; i < chain_n; i++) {
		Dl_info di;
		MP_ASSERT(dladdr((void *)chain_got[i], &di) != 0,
		    "frame %u: %#lx", i, (unsigned long)chain_got[i]);
	}
#else
	MP_SKIP("x86-64 only");
#endif
}

/* Garbage in every register the walk reads: random rip (anywhere, or a
 * real return address into libc or this program), rsp and rbp (anywhere,
 * or near the real stack).  Each step must return, with the registers
 * moved only when it says OK and every new rsp inside the bounds; a
 * fault would end the test. */
static void test_garbage_registers(void **state) {
	(void)state;
#if defined(__x86_64__)
	pthread_attr_t attr;
	void *addr;
	size_t size;
	assert_int_equal(pthread_getattr_np(pthread_self(), &attr), 0);
	assert_int_equal(pthread_attr_getstack(&attr, &addr, &size), 0);
	pthread_attr_destroy(&attr);
	uintptr_t here = (uintptr_t)__builtin_frame_address(0);
	uintptr_t lo = here - 4096, hi = (uintptr_t)addr + size;
	const uintptr_t code[] = {(uintptr_t)&printf + 5,
	    (uintptr_t)&test_garbage_registers + 40, (uintptr_t)&malloc + 9,
	    (uintptr_t)__builtin_return_address(0)};
	uint64_t x = 0x9e3779b97f4a7c15u;
	unsigned ok = 0;
	for (unsigned i = 0; i < 20000; i++) {
		uintptr_t v[3];
		for (int k = 0; k < 3; k++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			v[k] = (uintptr_t)x;
		}
		prof_cfi_regs_t g = {
		    .rip = (i & 1) ? code[(v[0] >> 8) % 4] : v[0],
		    .rsp = (i & 2) ? here + (v[1] % 8192) - 4096 : v[1],
		    .rbp = (i & 4) ? here + (v[2] % 8192) - 4096 : v[2]};
		prof_cfi_regs_t before = g;
		if (i % 64 == 0)
			prof_cfi_unloads_check();
		prof_cfi_err_t err = prof_cfi_unwind(&g, lo, hi);
		if (err != PROF_CFI_OK) {
			MP_ASSERT(memcmp(&g, &before, sizeof(g)) == 0,
			    "step %u failed (%d) but moved the registers", i,
			    (int)err);
			continue;
		}
		ok++;
		MP_ASSERT(g.rsp > before.rsp && g.rsp <= hi, "step %u: rsp "
		    "%#lx outside (%#lx, %#lx]", i, (unsigned long)g.rsp,
		    (unsigned long)before.rsp, (unsigned long)hi);
	}
	printf("# %u of 20000 garbage steps found a row and moved\n", ok);
#else
	MP_SKIP("x86-64 only");
#endif
}

/* The loader's count of unloads (dlpi_subs). */
static int subs_cb(struct dl_phdr_info *info, size_t size, void *arg) {
	(void)size;
	*(unsigned long long *)arg = info->dlpi_subs;
	return 1;
}

static unsigned long long loader_unloads(void) {
	unsigned long long subs = 0;
	dl_iterate_phdr(subs_cb, &subs);
	return subs;
}

/* An unloaded object: the next walk moves the cache's epoch once (its
 * rows are keyed by it, so none from before is used), and the walk after
 * it finds the same frames again from the tables. */
static void test_unload_epoch(void **state) {
	(void)state;
#if defined(__x86_64__)
	prof_cfi_unloads_check();
	uint64_t e0 = prof_cfi_epoch();
	prof_cfi_unloads_check();
	assert_int_equal(prof_cfi_epoch(), e0);         /* nothing unloaded */
	unsigned long long before = loader_unloads();
	void *h = dlopen("libutil.so.1", RTLD_NOW | RTLD_LOCAL);
	if (h == NULL)
		h = dlopen("libanl.so.1", RTLD_NOW | RTLD_LOCAL);
	if (h == NULL)
		MP_SKIP("no small library to dlopen: %s", dlerror());
	assert_int_equal(dlclose(h), 0);
	if (loader_unloads() == before)
		MP_SKIP("dlclose unloaded nothing (loaded already?)");
	prof_cfi_unloads_check();
	MP_ASSERT(prof_cfi_epoch() == e0 + 1, "epoch %llu, want %llu",
	    (unsigned long long)prof_cfi_epoch(), (unsigned long long)e0 + 1);
	prof_cfi_unloads_check();
	assert_int_equal(prof_cfi_epoch(), e0 + 1);
	chain_sink = chain_lvl0(3);
	for (int pass = 0; pass < 2; pass++) {
		MP_ASSERT(chain_n2[pass] == chain_n, "pass %d: %u frames, "
		    "want %u", pass, chain_n2[pass], chain_n);
		assert_memory_equal(chain_got2[pass], chain_got,
		    chain_n * sizeof(uintptr_t));
	}
#else
	MP_SKIP("x86-64 only");
#endif
}

/* The executable segment of the loaded object whose name contains
 * `name` (NULL: the one loaded at `bias`). */
typedef struct {
	const char *name;
	uintptr_t bias, lo, hi;
} seg_query_t;

static int seg_cb(struct dl_phdr_info *info, size_t size, void *arg) {
	seg_query_t *q = arg;
	(void)size;
	if (q->name != NULL ? info->dlpi_name == NULL ||
	    strstr(info->dlpi_name, q->name) == NULL :
	    (uintptr_t)info->dlpi_addr != q->bias)
		return 0;
	for (unsigned i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X) != 0) {
			q->lo = info->dlpi_addr + (uintptr_t)ph->p_vaddr;
			q->hi = q->lo + (uintptr_t)ph->p_memsz;
			return 1;
		}
	}
	return 0;
}

/* Rows of objects the loader never unloads are cached without the
 * unload epoch (a walk through them never asks the loader about
 * unloads); a dlopened library's are not. */
static void test_fixed_objects(void **state) {
	(void)state;
	MP_ASSERT(prof_cfi_fixed((uintptr_t)&test_fixed_objects),
	    "the program's code is not fixed");
	seg_query_t libc = {.name = "libc.so"};
	dl_iterate_phdr(seg_cb, &libc);
	if (libc.lo == 0)
		MP_SKIP("libc.so not found (a static program?)");
	MP_ASSERT(prof_cfi_fixed(libc.lo + 64), "libc's code is not fixed");
	void *h = dlopen("libutil.so.1", RTLD_NOW | RTLD_LOCAL);
	if (h == NULL)
		h = dlopen("libanl.so.1", RTLD_NOW | RTLD_LOCAL);
	if (h == NULL)
		MP_SKIP("no small library to dlopen: %s", dlerror());
	struct link_map *lm = NULL;
	assert_int_equal(dlinfo(h, RTLD_DI_LINKMAP, &lm), 0);
	seg_query_t lib = {.bias = (uintptr_t)lm->l_addr};
	dl_iterate_phdr(seg_cb, &lib);
	assert_true(lib.lo != 0 && lib.lo < lib.hi);
	MP_ASSERT(prof_cfi_in_text(lib.lo), "the loader does not know "
	    "the dlopened library's code");
	MP_ASSERT(!prof_cfi_fixed(lib.lo), "a dlopened library's code "
	    "counts as never unloaded");
	assert_int_equal(dlclose(h), 0);
}

/* The row cache starts at one page and grows eightfold once rows have
 * replaced others a quarter of its entries' worth of times (the tests
 * after this one walk with the grown table). */
static void test_cache_grows(void **state) {
	(void)state;
	size_t s0 = prof_cfi_cache_sets();
	MP_ASSERT(s0 >= 64 && s0 <= 4096 && (s0 & (s0 - 1)) == 0,
	    "%zu sets", s0);
	if (s0 == 4096)
		MP_SKIP("the cache has grown to its largest already");
	seg_query_t libc = {.name = "libc.so"};
	dl_iterate_phdr(seg_cb, &libc);
	if (libc.lo == 0)
		MP_SKIP("libc.so not found (a static program?)");
	/* Distinct return addresses in libc's text, twice as many as the
	 * table holds: each is a row computed and put (a pc that no FDE
	 * covers is kept too), and once the sets are full each replaces
	 * another. */
	size_t need = 2 * 2 * s0 + 64;
	MP_ASSERT(libc.hi - libc.lo > need * 16, "libc's text is %zu bytes",
	    (size_t)(libc.hi - libc.lo));
	for (size_t i = 0; i < need; i++)
		(void)prof_cfi_keeps_fp(libc.lo + 16 * i + 1);
	MP_ASSERT(prof_cfi_cache_sets() == s0 * 8, "%zu sets after %zu rows, "
	    "want %zu", prof_cfi_cache_sets(), need, s0 * 8);
}

int main(void) {
	mp_test_init(60);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fde_encodings),
		cmocka_unit_test(test_augmentations),
		cmocka_unit_test(test_prologue_rows),
		cmocka_unit_test(test_each_opcode),
		cmocka_unit_test(test_expressions),
		cmocka_unit_test(test_remember_stack),
		cmocka_unit_test(test_malformed_programs),
		cmocka_unit_test(test_malformed_entries),
		cmocka_unit_test(test_mutations),
		cmocka_unit_test(test_binary_search),
		cmocka_unit_test(test_apply),
		cmocka_unit_test(test_fixed_objects),
		cmocka_unit_test(test_cache_grows),
		cmocka_unit_test(test_real_tables),
		cmocka_unit_test(test_chain),
		cmocka_unit_test(test_unload_epoch),
		cmocka_unit_test(test_garbage_registers),
	};
	return mp_run_tests(tests);
}
