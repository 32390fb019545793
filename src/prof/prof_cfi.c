/*
 * prof_cfi.c: call-frame information (.eh_frame, indexed by
 * .eh_frame_hdr) read for the profiler's backtraces, so that a program
 * built without frame pointers still gives its whole stack.
 *
 * Given one object's tables as they are mapped, prof_cfi_find finds the
 * FDE covering a pc (a binary search in .eh_frame_hdr's table, or a
 * bounded scan of .eh_frame when the object has no table), decodes its
 * CIE and FDE and runs their CFA programs up to the pc, giving the row
 * of the unwind table there: how to compute the CFA (rsp or rbp plus an
 * offset, or the PLT's well-known expression) and where the return
 * address and the caller's rbp are.  prof_cfi_apply then takes one step
 * up the stack with that row.  Only rip, rsp and rbp are tracked: the
 * walk needs nothing else, and a rule that names another register for
 * the CFA or the return address (stack realignment, signal frames) is
 * reported as unsupported, which ends the stack there.
 *
 * This runs inside malloc, on tables of any object in the process and
 * on a stack that may hold anything: it never allocates, locks or calls
 * out; every table read is checked against the bounds the caller gives
 * (the mapping), every stack read against the thread's stack bounds and
 * alignment, every loop is bounded by the bytes it consumes or an
 * explicit limit, and anything unexpected is a failure code, never a
 * fault.  Only the encodings that x86-64 toolchains emit are accepted;
 * the rest are PROF_CFI_BAD.
 *
 * prof_cfi_unwind is the step the backtrace takes (prof_sys.c): it finds
 * the object of a return address without locks (_dl_find_object, or a
 * table copied from dl_iterate_phdr) and keeps each row it computes in
 * a small lock-free cache by pc, so that a stack seen before costs one
 * hash lookup per frame.  Rows of objects that can be unloaded are keyed
 * by the loader's count of unloads as well, read by a walk before it
 * first needs one (prof_cfi_unloads_check): after a dlclose, no row of
 * the object that went is used for code mapped later at its addresses.
 * The first few walks that read an object's tables drop the pages the
 * read mapped at their end (prof_cfi_walk_end: one madvise), so that a
 * small process does not keep libc's tables resident for the rows the
 * cache holds.
 */
#include "malloc_prof/internal/internal.h"

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <link.h>
#include <sched.h>
#include <string.h>
#include <sys/auxv.h>


/* Pointer encodings (DW_EH_PE_*): the low nibble is the format, the
 * next three bits how it applies. */
#define PE_ABSPTR 0x00
#define PE_ULEB128 0x01
#define PE_UDATA2 0x02
#define PE_UDATA4 0x03
#define PE_UDATA8 0x04
#define PE_SLEB128 0x09
#define PE_SDATA2 0x0a
#define PE_SDATA4 0x0b
#define PE_SDATA8 0x0c
#define PE_PCREL 0x10
#define PE_DATAREL 0x30
#define PE_INDIRECT 0x80
#define PE_OMIT 0xff

/* Call-frame instructions (DW_CFA_*): the three with an operand in the
 * low six bits, then the others. */
#define CFA_ADVANCE_LOC 0x40
#define CFA_OFFSET 0x80
#define CFA_RESTORE 0xc0
#define CFA_NOP 0x00
#define CFA_SET_LOC 0x01
#define CFA_ADVANCE_LOC1 0x02
#define CFA_ADVANCE_LOC2 0x03
#define CFA_ADVANCE_LOC4 0x04
#define CFA_OFFSET_EXTENDED 0x05
#define CFA_RESTORE_EXTENDED 0x06
#define CFA_UNDEFINED 0x07
#define CFA_SAME_VALUE 0x08
#define CFA_REGISTER 0x09
#define CFA_REMEMBER_STATE 0x0a
#define CFA_RESTORE_STATE 0x0b
#define CFA_DEF_CFA 0x0c
#define CFA_DEF_CFA_REGISTER 0x0d
#define CFA_DEF_CFA_OFFSET 0x0e
#define CFA_DEF_CFA_EXPRESSION 0x0f
#define CFA_EXPRESSION 0x10
#define CFA_OFFSET_EXTENDED_SF 0x11
#define CFA_DEF_CFA_SF 0x12
#define CFA_DEF_CFA_OFFSET_SF 0x13
#define CFA_VAL_OFFSET 0x14
#define CFA_VAL_OFFSET_SF 0x15
#define CFA_VAL_EXPRESSION 0x16
#define CFA_GNU_ARGS_SIZE 0x2e

/* DWARF register numbers of x86-64 (the psABI's table). */
#define REG_RBP 6
#define REG_RSP 7

/* Nesting of remember_state; compilers use one or two levels. */
#define CFI_REMEMBER_MAX 8
/* Entries a scan of .eh_frame without a table visits before giving up
 * (libc has about 3,000 FDEs; an object without a table is rare). */
#define CFI_SCAN_MAX 100000
/* Offsets beyond this are nonsense for a stack frame: refusing them
 * keeps every sum below from overflowing. */
#define CFI_OFF_MAX ((int64_t)1 << 32)

/* A bounded reader over [p, end). */
typedef struct {
	const uint8_t *p, *end;
} cfi_cur_t;

static bool cur_take(cfi_cur_t *c, size_t n, const uint8_t **out) {
	if ((size_t)(c->end - c->p) < n)
		return true;
	*out = c->p;
	c->p += n;
	return false;
}

static bool cur_u8(cfi_cur_t *c, uint8_t *v) {
	const uint8_t *b;
	if (cur_take(c, 1, &b))
		return true;
	*v = b[0];
	return false;
}

/* n little-endian bytes (1..8), zero-extended. */
static bool cur_uint(cfi_cur_t *c, size_t n, uint64_t *v) {
	const uint8_t *b;
	if (cur_take(c, n, &b))
		return true;
	uint64_t r = 0;
	for (size_t i = n; i-- > 0;)
		r = r << 8 | b[i];
	*v = r;
	return false;
}

static bool cur_uleb(cfi_cur_t *c, uint64_t *v) {
	uint64_t r = 0;
	/* Ten bytes hold 64 bits; an eleventh means garbage. */
	for (unsigned shift = 0; shift < 70; shift += 7) {
		uint8_t b;
		if (cur_u8(c, &b))
			return true;
		if (shift == 63 && (b & 0x7e) != 0)
			return true;
		r |= (uint64_t)(b & 0x7f) << shift;
		if ((b & 0x80) == 0) {
			*v = r;
			return false;
		}
	}
	return true;
}

static bool cur_sleb(cfi_cur_t *c, int64_t *v) {
	uint64_t r = 0;
	for (unsigned shift = 0; shift < 70; shift += 7) {
		uint8_t b;
		if (cur_u8(c, &b))
			return true;
		r |= shift < 64 ? (uint64_t)(b & 0x7f) << shift : 0;
		if ((b & 0x80) == 0) {
			if (shift + 7 < 64 && (b & 0x40) != 0)
				r |= ~(uint64_t)0 << (shift + 7);
			*v = (int64_t)r;
			return false;
		}
	}
	return true;
}

/* Bytes of a fixed-size pointer format; 0 for LEB128 or an unknown one. */
static size_t pe_size(uint8_t enc) {
	switch (enc & 0x0f) {
	case PE_ABSPTR:
		return sizeof(uintptr_t);
	case PE_UDATA2:
	case PE_SDATA2:
		return 2;
	case PE_UDATA4:
	case PE_SDATA4:
		return 4;
	case PE_UDATA8:
	case PE_SDATA8:
		return 8;
	default:
		return 0;
	}
}

/*
 * Reads a pointer in encoding enc at c.  pcrel is relative to the
 * field's own address (the tables are read where they are mapped);
 * datarel to dbase, the start of .eh_frame_hdr (0: not allowed here).
 * apply false: the format only (an FDE's address range).  Indirect
 * pointers would read memory outside the tables: refused, as are the
 * applications x86-64 does not use (textrel, funcrel, aligned).
 */
static bool cur_encoded(cfi_cur_t *c, uint8_t enc, uintptr_t dbase,
    bool apply, uintptr_t *v) {
	if (enc == PE_OMIT || (enc & PE_INDIRECT) != 0)
		return true;
	uintptr_t field = (uintptr_t)c->p;
	uint64_t u;
	int64_t s;
	switch (enc & 0x0f) {
	case PE_ULEB128:
		if (cur_uleb(c, &u))
			return true;
		break;
	case PE_SLEB128:
		if (cur_sleb(c, &s))
			return true;
		u = (uint64_t)s;
		break;
	case PE_ABSPTR:
	case PE_UDATA2:
	case PE_UDATA4:
	case PE_UDATA8:
		if (cur_uint(c, pe_size(enc), &u))
			return true;
		break;
	case PE_SDATA2:
	case PE_SDATA4:
	case PE_SDATA8: {
		size_t n = pe_size(enc);
		if (cur_uint(c, n, &u))
			return true;
		if (n < 8 && (u >> (8 * n - 1)) != 0)
			u |= ~(uint64_t)0 << (8 * n);
		break;
	}
	default:
		return true;
	}
	uintptr_t base = 0;
	if (apply) {
		switch (enc & 0x70) {
		case 0:
			break;
		case PE_PCREL:
			base = field;
			break;
		case PE_DATAREL:
			if (dbase == 0)
				return true;
			base = dbase;
			break;
		default:
			return true;
		}
	}
	*v = base + (uintptr_t)u;
	return false;
}

/*
 * The length field of the entry at p (an offset into [lo, end)) and
 * where its body and the entry end.  A zero length is the terminator:
 * *body == *next == p + 4.  An entry must fit within end.
 */
static bool entry_bounds(const uint8_t *p, const uint8_t *end,
    const uint8_t **body, const uint8_t **next, bool *is64) {
	cfi_cur_t c = {p, end};
	uint64_t len;
	if (cur_uint(&c, 4, &len))
		return true;
	*is64 = false;
	if (len == 0xffffffffu) {
		if (cur_uint(&c, 8, &len))
			return true;
		*is64 = true;
	} else if (len >= 0xfffffff0u) {
		return true;            /* reserved */
	}
	if (len > (uint64_t)(end - c.p))
		return true;
	*body = c.p;
	*next = c.p + len;
	return false;
}

/* What an FDE takes from its CIE. */
typedef struct {
	uint64_t code_align;
	int64_t data_align;
	uint64_t ra_reg;
	uint8_t fde_enc;
	bool has_z;             /* FDEs carry augmentation data */
	bool signal;            /* 'S': a signal frame */
	const uint8_t *insns, *insns_end;
} cfi_cie_t;

/* The CIE at p (the start of its length field) within [lo, end). */
static prof_cfi_err_t cie_parse(const uint8_t *p, const uint8_t *end,
    cfi_cie_t *cie) {
	const uint8_t *body, *next;
	bool is64;
	if (entry_bounds(p, end, &body, &next, &is64) || body == next)
		return PROF_CFI_BAD;
	cfi_cur_t c = {body, next};
	uint64_t id;
	uint8_t version;
	if (cur_uint(&c, is64 ? 8 : 4, &id) || id != 0 ||
	    cur_u8(&c, &version) || (version != 1 && version != 3))
		return PROF_CFI_BAD;
	/* The augmentation string: at most "zPLRS" and a few more. */
	char aug[8];
	size_t naug = 0;
	for (;;) {
		uint8_t ch;
		if (cur_u8(&c, &ch))
			return PROF_CFI_BAD;
		if (ch == 0)
			break;
		if (naug == sizeof(aug))
			return PROF_CFI_BAD;
		aug[naug++] = (char)ch;
	}
	uint64_t ra;
	if (cur_uleb(&c, &cie->code_align) || cur_sleb(&c,
	    &cie->data_align) || cie->code_align == 0 ||
	    cie->code_align > 0xffff || cie->data_align > 0xffff ||
	    cie->data_align < -0xffff)
		return PROF_CFI_BAD;
	if (version == 1) {
		uint8_t b;
		if (cur_u8(&c, &b))
			return PROF_CFI_BAD;
		ra = b;
	} else if (cur_uleb(&c, &ra)) {
		return PROF_CFI_BAD;
	}
	cie->ra_reg = ra;
	cie->fde_enc = PE_ABSPTR;
	cie->has_z = false;
	cie->signal = false;
	const uint8_t *aug_end = NULL;
	for (size_t i = 0; i < naug; i++) {
		uint8_t enc;
		uintptr_t ignored;
		switch (aug[i]) {
		case 'z': {
			uint64_t n;
			if (i != 0 || cur_uleb(&c, &n) ||
			    n > (uint64_t)(c.end - c.p))
				return PROF_CFI_BAD;
			cie->has_z = true;
			aug_end = c.p + n;
			break;
		}
		case 'R':
			if (!cie->has_z || cur_u8(&c, &cie->fde_enc))
				return PROF_CFI_BAD;
			break;
		case 'P':
			/* The personality routine: skipped, never read
			 * through (its encoding is often indirect). */
			if (!cie->has_z || cur_u8(&c, &enc) || enc == PE_OMIT)
				return PROF_CFI_BAD;
			if (cur_encoded(&c, enc & 0x0f, 0, false, &ignored))
				return PROF_CFI_BAD;
			break;
		case 'L':
			if (!cie->has_z || cur_u8(&c, &enc))
				return PROF_CFI_BAD;
			break;
		case 'S':
			cie->signal = true;
			break;
		default:
			return PROF_CFI_BAD;
		}
		if (aug_end != NULL && c.p > aug_end)
			return PROF_CFI_BAD;
	}
	if (aug_end != NULL)
		c.p = aug_end;
	if (cie->fde_enc == PE_OMIT)
		return PROF_CFI_BAD;
	cie->insns = c.p;
	cie->insns_end = next;
	return PROF_CFI_OK;
}

/* An FDE, decoded with its CIE. */
typedef struct {
	cfi_cie_t cie;
	uintptr_t pc_lo, pc_hi;
	const uint8_t *insns, *insns_end;
} cfi_fde_t;

/*
 * The FDE at p within the object's .eh_frame: its CIE and address range.
 * PROF_CFI_NOT_FOUND if p is a CIE or the terminator (a scan steps over
 * those).
 */
static prof_cfi_err_t fde_parse(const prof_cfi_obj_t *obj, const uint8_t *p,
    cfi_fde_t *fde) {
	const uint8_t *body, *next;
	bool is64;
	if (p < obj->eh || p >= obj->eh_end ||
	    entry_bounds(p, obj->eh_end, &body, &next, &is64))
		return PROF_CFI_BAD;
	if (body == next)
		return PROF_CFI_NOT_FOUND;      /* the terminator */
	cfi_cur_t c = {body, next};
	uint64_t id;
	if (cur_uint(&c, is64 ? 8 : 4, &id))
		return PROF_CFI_BAD;
	if (id == 0)
		return PROF_CFI_NOT_FOUND;      /* a CIE */
	/* The CIE pointer counts back from its own field. */
	if (id > (uint64_t)(body - obj->eh))
		return PROF_CFI_BAD;
	const uint8_t *cie_p = body - id;
	/* A CIE that would overlap this FDE is no CIE of it. */
	if (cie_p + 4 > p && cie_p < next)
		return PROF_CFI_BAD;
	prof_cfi_err_t err = cie_parse(cie_p, obj->eh_end, &fde->cie);
	if (err != PROF_CFI_OK)
		return err;
	uintptr_t range;
	if (cur_encoded(&c, fde->cie.fde_enc, 0, true, &fde->pc_lo) ||
	    cur_encoded(&c, fde->cie.fde_enc & 0x0f, 0, false, &range) ||
	    range > UINTPTR_MAX - fde->pc_lo)
		return PROF_CFI_BAD;
	fde->pc_hi = fde->pc_lo + range;
	if (fde->cie.has_z) {
		uint64_t n;
		if (cur_uleb(&c, &n) || n > (uint64_t)(c.end - c.p))
			return PROF_CFI_BAD;
		c.p += n;
	}
	fde->insns = c.p;
	fde->insns_end = next;
	return PROF_CFI_OK;
}

/* A row of the unwind table in the making. */
typedef struct {
	uint8_t cfa;            /* prof_cfi_cfa_t, or CFA_KIND_OTHER */
	uint8_t ra_how, rbp_how;
	uint8_t plt_k;
	int64_t cfa_off, ra_off, rbp_off;
} cfi_state_t;

/* The CFA is in a register other than rsp or rbp, or an expression
 * other than the PLT's: no row the walker can use. */
#define CFA_KIND_OTHER 0xff
/* A register rule the walker cannot evaluate (expression, another
 * register): fatal for the return address, "unknown" for rbp. */
#define HOW_OTHER 0xff

/*
 * Recognises the expression every x86-64 linker writes for its lazy PLT:
 * CFA = rsp + N, plus 8 more when (rip & 15) >= K (after the push of the
 * second instruction).  It is
 *   DW_OP_breg7 N; DW_OP_breg16 0; DW_OP_lit15; DW_OP_and; DW_OP_litK;
 *   DW_OP_ge; DW_OP_lit3; DW_OP_shl; DW_OP_plus
 * and nothing else is accepted.
 */
static bool plt_expression(const uint8_t *e, size_t n, int64_t *off,
    uint8_t *k) {
	cfi_cur_t c = {e, e + n};
	uint8_t op;
	int64_t nn, zero;
	if (cur_u8(&c, &op) || op != 0x77 || cur_sleb(&c, &nn) ||
	    cur_u8(&c, &op) || op != 0x80 || cur_sleb(&c, &zero) ||
	    zero != 0)
		return false;
	static const uint8_t tail[] = {0x3f, 0x1a, 0, 0x2a, 0x33, 0x24, 0x22};
	if ((size_t)(c.end - c.p) != sizeof(tail))
		return false;
	for (size_t i = 0; i < sizeof(tail); i++) {
		if (i == 2 ? c.p[i] < 0x30 || c.p[i] > 0x3f :
		    c.p[i] != tail[i])
			return false;
	}
	if (nn < 0 || nn > 4096)
		return false;
	*off = nn;
	*k = (uint8_t)(c.p[2] - 0x30);
	return true;
}

/* Sets register reg's rule, where the walker keeps one (rbp, the
 * return-address column); other registers are not tracked. */
static void set_rule(cfi_state_t *s, const cfi_cie_t *cie, uint64_t reg,
    uint8_t how, int64_t off) {
	if (reg == REG_RBP) {
		s->rbp_how = how;
		s->rbp_off = off;
	}
	if (reg == cie->ra_reg) {
		s->ra_how = how;
		s->ra_off = off;
	}
}

/* The rule register reg had after the CIE's program (restore). */
static void restore_rule(cfi_state_t *s, const cfi_state_t *init,
    const cfi_cie_t *cie, uint64_t reg) {
	if (reg == REG_RBP) {
		s->rbp_how = init->rbp_how;
		s->rbp_off = init->rbp_off;
	}
	if (reg == cie->ra_reg) {
		s->ra_how = init->ra_how;
		s->ra_off = init->ra_off;
	}
}

static bool off_ok(int64_t off) {
	return off > -CFI_OFF_MAX && off < CFI_OFF_MAX;
}

/* A register number with an offset factored by the data alignment. */
static bool factored(int64_t v, int64_t align, int64_t *out) {
	if (!off_ok(v))
		return true;
	*out = v * align;
	return !off_ok(*out);
}

/*
 * Runs the CFA program [p, end) from location *loc, stopping before the
 * first advance past pc.  init is the state after the CIE's program
 * (NULL while running it).  On return *loc is the start of the row that
 * holds pc and *next_loc where it ends (unchanged if the program ran
 * out first).
 */
static prof_cfi_err_t cfa_run(const cfi_cie_t *cie, const uint8_t *p,
    const uint8_t *end, uintptr_t pc, const cfi_state_t *init,
    cfi_state_t *s, uintptr_t *loc, uintptr_t *next_loc) {
	cfi_state_t stack[CFI_REMEMBER_MAX];
	unsigned depth = 0;
	cfi_cur_t c = {p, end};
	/* Each instruction takes at least one byte: the loop ends. */
	while (c.p < c.end) {
		uint8_t op;
		uint64_t reg, u;
		int64_t sv, off;
		uintptr_t delta = 0, to;
		bool advance = false;
		(void)cur_u8(&c, &op);
		switch (op & 0xc0) {
		case CFA_ADVANCE_LOC:
			delta = (uintptr_t)(op & 0x3f) * cie->code_align;
			advance = true;
			break;
		case CFA_OFFSET:
			if (cur_uleb(&c, &u) || u > (uint64_t)CFI_OFF_MAX ||
			    factored((int64_t)u, cie->data_align, &off))
				return PROF_CFI_BAD;
			set_rule(s, cie, op & 0x3f, PROF_CFI_AT_CFA, off);
			continue;
		case CFA_RESTORE:
			if (init == NULL)
				return PROF_CFI_BAD;
			restore_rule(s, init, cie, op & 0x3f);
			continue;
		default:
			break;
		}
		if (!advance) {
			switch (op) {
			case CFA_NOP:
				continue;
			case CFA_SET_LOC:
				if (init == NULL || cur_encoded(&c, cie->fde_enc,
				    0, true, &to) || to < *loc)
					return PROF_CFI_BAD;
				delta = to - *loc;
				advance = true;
				break;
			case CFA_ADVANCE_LOC1:
			case CFA_ADVANCE_LOC2:
			case CFA_ADVANCE_LOC4:
				if (cur_uint(&c, (size_t)1 << (op -
				    CFA_ADVANCE_LOC1), &u) || u > 0xffffffffu)
					return PROF_CFI_BAD;
				delta = (uintptr_t)u * cie->code_align;
				advance = true;
				break;
			case CFA_OFFSET_EXTENDED:
			case CFA_VAL_OFFSET:
				if (cur_uleb(&c, &reg) || cur_uleb(&c, &u) ||
				    u > (uint64_t)CFI_OFF_MAX || factored(
				    (int64_t)u, cie->data_align, &off))
					return PROF_CFI_BAD;
				set_rule(s, cie, reg, op == CFA_VAL_OFFSET ?
				    PROF_CFI_VAL_CFA : PROF_CFI_AT_CFA, off);
				continue;
			case CFA_OFFSET_EXTENDED_SF:
			case CFA_VAL_OFFSET_SF:
				if (cur_uleb(&c, &reg) || cur_sleb(&c, &sv) ||
				    factored(sv, cie->data_align, &off))
					return PROF_CFI_BAD;
				set_rule(s, cie, reg, op == CFA_VAL_OFFSET_SF ?
				    PROF_CFI_VAL_CFA : PROF_CFI_AT_CFA, off);
				continue;
			case CFA_RESTORE_EXTENDED:
				if (init == NULL || cur_uleb(&c, &reg))
					return PROF_CFI_BAD;
				restore_rule(s, init, cie, reg);
				continue;
			case CFA_UNDEFINED:
			case CFA_SAME_VALUE:
				if (cur_uleb(&c, &reg))
					return PROF_CFI_BAD;
				set_rule(s, cie, reg, op == CFA_UNDEFINED ?
				    PROF_CFI_UNDEF : PROF_CFI_SAME, 0);
				continue;
			case CFA_REGISTER:
				if (cur_uleb(&c, &reg) || cur_uleb(&c, &u))
					return PROF_CFI_BAD;
				set_rule(s, cie, reg, HOW_OTHER, 0);
				continue;
			case CFA_REMEMBER_STATE:
				if (depth == CFI_REMEMBER_MAX)
					return PROF_CFI_BAD;
				stack[depth++] = *s;
				continue;
			case CFA_RESTORE_STATE:
				if (depth == 0)
					return PROF_CFI_BAD;
				*s = stack[--depth];
				continue;
			case CFA_DEF_CFA:
				if (cur_uleb(&c, &reg) || cur_uleb(&c, &u) ||
				    u >= (uint64_t)CFI_OFF_MAX)
					return PROF_CFI_BAD;
				s->cfa = reg == REG_RSP ? PROF_CFI_CFA_RSP :
				    reg == REG_RBP ? PROF_CFI_CFA_RBP :
				    CFA_KIND_OTHER;
				s->cfa_off = (int64_t)u;
				continue;
			case CFA_DEF_CFA_SF:
				if (cur_uleb(&c, &reg) || cur_sleb(&c, &sv) ||
				    factored(sv, cie->data_align, &off))
					return PROF_CFI_BAD;
				s->cfa = reg == REG_RSP ? PROF_CFI_CFA_RSP :
				    reg == REG_RBP ? PROF_CFI_CFA_RBP :
				    CFA_KIND_OTHER;
				s->cfa_off = off;
				continue;
			case CFA_DEF_CFA_REGISTER:
				if (cur_uleb(&c, &reg) ||
				    s->cfa == PROF_CFI_CFA_PLT)
					return PROF_CFI_BAD;
				s->cfa = reg == REG_RSP ? PROF_CFI_CFA_RSP :
				    reg == REG_RBP ? PROF_CFI_CFA_RBP :
				    CFA_KIND_OTHER;
				continue;
			case CFA_DEF_CFA_OFFSET:
				if (cur_uleb(&c, &u) ||
				    u >= (uint64_t)CFI_OFF_MAX ||
				    s->cfa == PROF_CFI_CFA_PLT)
					return PROF_CFI_BAD;
				s->cfa_off = (int64_t)u;
				continue;
			case CFA_DEF_CFA_OFFSET_SF:
				if (cur_sleb(&c, &sv) || factored(sv,
				    cie->data_align, &off) ||
				    s->cfa == PROF_CFI_CFA_PLT)
					return PROF_CFI_BAD;
				s->cfa_off = off;
				continue;
			case CFA_DEF_CFA_EXPRESSION: {
				const uint8_t *e;
				if (cur_uleb(&c, &u) || u > (uint64_t)(c.end -
				    c.p) || cur_take(&c, (size_t)u, &e))
					return PROF_CFI_BAD;
				if (plt_expression(e, (size_t)u, &off,
				    &s->plt_k)) {
					s->cfa = PROF_CFI_CFA_PLT;
					s->cfa_off = off;
				} else {
					s->cfa = CFA_KIND_OTHER;
				}
				continue;
			}
			case CFA_EXPRESSION:
			case CFA_VAL_EXPRESSION: {
				const uint8_t *e;
				if (cur_uleb(&c, &reg) || cur_uleb(&c, &u) ||
				    u > (uint64_t)(c.end - c.p) ||
				    cur_take(&c, (size_t)u, &e))
					return PROF_CFI_BAD;
				set_rule(s, cie, reg, HOW_OTHER, 0);
				continue;
			}
			case CFA_GNU_ARGS_SIZE:
				if (cur_uleb(&c, &u))
					return PROF_CFI_BAD;
				continue;
			default:
				return PROF_CFI_BAD;
			}
		}
		/* An advance: the row holding pc may end here. */
		if (init == NULL)
			return PROF_CFI_BAD;    /* none in a CIE */
		if (delta > UINTPTR_MAX - *loc)
			return PROF_CFI_BAD;
		if (*loc + delta > pc) {
			*next_loc = *loc + delta;
			return PROF_CFI_OK;
		}
		*loc += delta;
	}
	return PROF_CFI_OK;
}

/* The row of fde at pc (pc_lo <= pc < pc_hi). */
static prof_cfi_err_t fde_row(const cfi_fde_t *fde, uintptr_t pc,
    prof_cfi_rule_t *rule) {
	cfi_state_t s = {.cfa = CFA_KIND_OTHER, .ra_how = PROF_CFI_UNDEF,
	    .rbp_how = PROF_CFI_SAME};
	uintptr_t loc = fde->pc_lo, next = fde->pc_hi;
	prof_cfi_err_t err = cfa_run(&fde->cie, fde->cie.insns,
	    fde->cie.insns_end, pc, NULL, &s, &loc, &next);
	if (err != PROF_CFI_OK)
		return err;
	cfi_state_t init = s;
	err = cfa_run(&fde->cie, fde->insns, fde->insns_end, pc, &init, &s,
	    &loc, &next);
	if (err != PROF_CFI_OK)
		return err;
	if (s.cfa == CFA_KIND_OTHER || s.ra_how == HOW_OTHER ||
	    s.ra_how == PROF_CFI_SAME || s.ra_how == PROF_CFI_VAL_CFA)
		return PROF_CFI_UNSUPPORTED;
	rule->lo = loc;
	rule->hi = next < fde->pc_hi ? next : fde->pc_hi;
	rule->cfa = s.cfa;
	rule->cfa_off = s.cfa_off;
	rule->plt_k = s.plt_k;
	rule->ra_how = s.ra_how;
	rule->ra_off = s.ra_off;
	rule->rbp_how = s.rbp_how == HOW_OTHER ? PROF_CFI_UNDEF : s.rbp_how;
	rule->rbp_off = s.rbp_off;
	rule->signal = fde->cie.signal;
	return PROF_CFI_OK;
}

/*
 * Binary search of .eh_frame_hdr's table for the last entry at or below
 * pc, whose FDE goes to *fde_p.  *has_table false: the header has no
 * table (the caller scans .eh_frame instead).
 */
static prof_cfi_err_t hdr_search(const prof_cfi_obj_t *obj, uintptr_t pc,
    const uint8_t **fde_p, bool *has_table) {
	*fde_p = NULL;
	*has_table = false;
	cfi_cur_t c = {obj->hdr, obj->hdr_end};
	uint8_t version, ptr_enc, count_enc, table_enc;
	uintptr_t eh, count;
	if (cur_u8(&c, &version) || version != 1 || cur_u8(&c, &ptr_enc) ||
	    cur_u8(&c, &count_enc) || cur_u8(&c, &table_enc) ||
	    cur_encoded(&c, ptr_enc, (uintptr_t)obj->hdr, true, &eh))
		return PROF_CFI_BAD;
	if (count_enc == PE_OMIT || table_enc == PE_OMIT)
		return PROF_CFI_NOT_FOUND;
	*has_table = true;
	if (cur_encoded(&c, count_enc, (uintptr_t)obj->hdr, true, &count))
		return PROF_CFI_BAD;
	size_t esz = 2 * pe_size(table_enc);
	if (esz == 0 || (table_enc & 0x70) == PE_PCREL)
		return PROF_CFI_BAD;    /* entries must be addressable */
	if (count > (uintptr_t)(c.end - c.p) / esz)
		return PROF_CFI_BAD;
	const uint8_t *table = c.p;
	uintptr_t lo = 0, hi = count;
	/* The first entry above pc; the one before it may hold pc. */
	if (table_enc == (PE_DATAREL | PE_SDATA4)) {
		/* What x86-64 toolchains emit, read without the general
		 * decoder (most of a first lookup's cost was there). */
		uintptr_t base = (uintptr_t)obj->hdr;
		while (lo < hi) {
			uintptr_t mid = lo + (hi - lo) / 2;
			const uint8_t *q = table + mid * esz;
			int32_t off = (int32_t)((uint32_t)q[0] |
			    (uint32_t)q[1] << 8 | (uint32_t)q[2] << 16 |
			    (uint32_t)q[3] << 24);
			if (base + (uintptr_t)(intptr_t)off <= pc)
				lo = mid + 1;
			else
				hi = mid;
		}
	}
	while (lo < hi) {
		uintptr_t mid = lo + (hi - lo) / 2, start;
		cfi_cur_t e = {table + mid * esz, table + (mid + 1) * esz};
		if (cur_encoded(&e, table_enc, (uintptr_t)obj->hdr, true,
		    &start))
			return PROF_CFI_BAD;
		if (start <= pc)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return PROF_CFI_NOT_FOUND;
	cfi_cur_t e = {table + (lo - 1) * esz, table + lo * esz};
	uintptr_t start, fde;
	if (cur_encoded(&e, table_enc, (uintptr_t)obj->hdr, true, &start) ||
	    cur_encoded(&e, table_enc, (uintptr_t)obj->hdr, true, &fde) ||
	    fde < (uintptr_t)obj->eh || fde >= (uintptr_t)obj->eh_end)
		return PROF_CFI_BAD;
	*fde_p = obj->eh + (fde - (uintptr_t)obj->eh);
	return PROF_CFI_OK;
}

/* Walks .eh_frame from its start for the FDE holding pc. */
static prof_cfi_err_t eh_scan(const prof_cfi_obj_t *obj, uintptr_t pc,
    cfi_fde_t *fde) {
	const uint8_t *p = obj->eh;
	for (unsigned i = 0; i < CFI_SCAN_MAX && p < obj->eh_end; i++) {
		const uint8_t *body, *next;
		bool is64;
		if (entry_bounds(p, obj->eh_end, &body, &next, &is64))
			return PROF_CFI_BAD;
		if (body == next)
			return PROF_CFI_NOT_FOUND;      /* terminator */
		prof_cfi_err_t err = fde_parse(obj, p, fde);
		if (err == PROF_CFI_OK && fde->pc_lo <= pc && pc < fde->pc_hi)
			return PROF_CFI_OK;
		if (err == PROF_CFI_BAD)
			return err;
		p = next;
	}
	return PROF_CFI_NOT_FOUND;
}

bool prof_cfi_obj_init(prof_cfi_obj_t *obj, const void *hdr, size_t hdr_len,
    uintptr_t seg_lo, uintptr_t seg_hi) {
	cfi_cur_t c = {hdr, (const uint8_t *)hdr + hdr_len};
	uint8_t version, ptr_enc;
	const uint8_t *encs;
	uintptr_t eh;
	if (hdr == NULL || cur_u8(&c, &version) || version != 1 ||
	    cur_u8(&c, &ptr_enc) || cur_take(&c, 2, &encs) ||
	    cur_encoded(&c, ptr_enc, (uintptr_t)hdr, true, &eh) ||
	    eh < seg_lo || eh >= seg_hi)
		return true;
	obj->hdr = hdr;
	obj->hdr_end = (const uint8_t *)hdr + hdr_len;
	obj->eh = (const uint8_t *)eh;
	obj->eh_end = (const uint8_t *)seg_hi;
	return false;
}

prof_cfi_err_t prof_cfi_find(const prof_cfi_obj_t *obj, uintptr_t pc,
    prof_cfi_rule_t *rule) {
	if (obj->eh == NULL || obj->eh >= obj->eh_end)
		return PROF_CFI_BAD;
	cfi_fde_t fde;
	prof_cfi_err_t err = PROF_CFI_NOT_FOUND;
	const uint8_t *fde_p = NULL;
	bool has_table = false;
	if (obj->hdr != NULL && obj->hdr < obj->hdr_end) {
		err = hdr_search(obj, pc, &fde_p, &has_table);
		if (err == PROF_CFI_BAD || (err != PROF_CFI_OK && has_table))
			return err;
	}
	if (has_table) {
		err = fde_parse(obj, fde_p, &fde);
		if (err == PROF_CFI_NOT_FOUND)
			err = PROF_CFI_BAD;     /* the table named no FDE */
	} else {
		err = eh_scan(obj, pc, &fde);
	}
	if (err != PROF_CFI_OK)
		return err;
	if (pc < fde.pc_lo || pc >= fde.pc_hi)
		return PROF_CFI_NOT_FOUND;
	return fde_row(&fde, pc, rule);
}

/* base + off, false if it does not wrap. */
static bool addr_add(uintptr_t base, int64_t off, uintptr_t *out) {
	if (off >= 0 ? (uint64_t)off > UINTPTR_MAX - base :
	    (uint64_t)-off > base)
		return true;
	*out = base + (uintptr_t)off;
	return false;
}

/* The stack word at a, if it lies within [lo, hi) and is aligned. */
PROF_STACK_READER static bool stack_word(uintptr_t a, uintptr_t lo,
    uintptr_t hi, uintptr_t *v) {
	if (a < lo || a >= hi || hi - a < sizeof(uintptr_t) ||
	    (a & (sizeof(uintptr_t) - 1)) != 0)
		return true;
	*v = *(const uintptr_t *)a;
	return false;
}

prof_cfi_err_t prof_cfi_apply(const prof_cfi_rule_t *rule,
    prof_cfi_regs_t *regs, uintptr_t lo, uintptr_t hi) {
	uintptr_t base, cfa, at, ra, rbp = regs->rbp;
	int64_t off = rule->cfa_off;
	switch (rule->cfa) {
	case PROF_CFI_CFA_RSP:
		base = regs->rsp;
		break;
	case PROF_CFI_CFA_RBP:
		base = regs->rbp;
		break;
	case PROF_CFI_CFA_PLT:
		base = regs->rsp;
		if ((regs->rip & 15) >= rule->plt_k)
			off += 8;
		break;
	default:
		return PROF_CFI_BAD;
	}
	/* The caller's frame lies above: every step moves up the stack,
	 * so a walk ends within the stack's size. */
	if (addr_add(base, off, &cfa) || cfa <= regs->rsp || cfa > hi)
		return PROF_CFI_STACK;
	if (rule->ra_how == PROF_CFI_UNDEF)
		return PROF_CFI_END;
	if (rule->ra_how != PROF_CFI_AT_CFA)
		return PROF_CFI_UNSUPPORTED;
	if (addr_add(cfa, rule->ra_off, &at) || stack_word(at, lo, hi, &ra))
		return PROF_CFI_STACK;
	switch (rule->rbp_how) {
	case PROF_CFI_SAME:
		break;
	case PROF_CFI_AT_CFA:
		if (addr_add(cfa, rule->rbp_off, &at) ||
		    stack_word(at, lo, hi, &rbp))
			return PROF_CFI_STACK;
		break;
	case PROF_CFI_VAL_CFA:
		if (addr_add(cfa, rule->rbp_off, &rbp))
			return PROF_CFI_STACK;
		break;
	default:
		rbp = 0;        /* unknown: a later rbp-based CFA fails */
		break;
	}
	if (ra == 0)
		return PROF_CFI_END;
	regs->rip = ra;
	regs->rsp = cfa;
	regs->rbp = rbp;
	return PROF_CFI_OK;
}

prof_cfi_err_t prof_cfi_step(const prof_cfi_obj_t *obj,
    prof_cfi_regs_t *regs, bool first, uintptr_t lo, uintptr_t hi) {
	if (regs->rip == 0)
		return PROF_CFI_BAD;
	prof_cfi_rule_t rule;
	prof_cfi_err_t err = prof_cfi_find(obj, first ? regs->rip :
	    regs->rip - 1, &rule);
	if (err != PROF_CFI_OK)
		return err;
	return prof_cfi_apply(&rule, regs, lo, hi);
}

/* ------------------------------------------------------------ objects */

/*
 * The tables of the object holding pc.  With _dl_find_object (glibc
 * 2.35+: no lock, async-signal-safe) the loader names the mapping and
 * its PT_GNU_EH_FRAME; the program headers at the start of the mapping
 * (the ELF header, when it is there) give the header's size and the
 * segment holding it, else both end with the mapping.  Without it, a
 * table of the objects copied from dl_iterate_phdr, reloaded on a miss
 * (at most every OBJ_RELOAD_NS) by one thread at a time: the walk holds
 * no allocator lock, so the loader's lock taken there cannot deadlock
 * with a thread that allocates while holding it.
 */
#if MP_HAVE_DL_FIND_OBJECT
/*
 * The program headers of the object mapped at [lo, hi) (its ELF header is
 * at lo) and its load bias, read from the mapping only: never from the
 * loader's link_map, which the loader may still be writing while another
 * thread's dlopen publishes the object (ThreadSanitizer saw that race).
 * true on error (no ELF header, headers outside the mapping, no segment
 * at file offset 0).
 */
static bool obj_phdrs(uintptr_t lo, uintptr_t hi, const ElfW(Phdr) **php,
    unsigned *nump, uintptr_t *biasp) {
	const ElfW(Ehdr) *e = (const ElfW(Ehdr) *)lo;
	if (hi - lo < sizeof(*e) || memcmp(e->e_ident, ELFMAG, SELFMAG) != 0 ||
	    e->e_phentsize != sizeof(ElfW(Phdr)) || e->e_phoff > hi - lo ||
	    e->e_phnum > (hi - lo - e->e_phoff) / sizeof(ElfW(Phdr)))
		return true;
	const ElfW(Phdr) *ph = (const ElfW(Phdr) *)(lo + e->e_phoff);
	for (unsigned i = 0; i < e->e_phnum; i++) {
		if (ph[i].p_type == PT_LOAD && ph[i].p_offset == 0) {
			uintptr_t align = ph[i].p_align > 1 ?
			    (uintptr_t)ph[i].p_align : 1;
			*php = ph;
			*nump = e->e_phnum;
			*biasp = lo - ((uintptr_t)ph[i].p_vaddr & ~(align - 1));
			return (align & (align - 1)) != 0;
		}
	}
	return true;
}

/* The main program's program headers and load bias, from the auxiliary
 * vector (its PT_PHDR gives the bias); true if they are not there. */
static bool obj_main_phdrs(const ElfW(Phdr) **php, unsigned *nump,
    uintptr_t *biasp) {
	const ElfW(Phdr) *ph = (const ElfW(Phdr) *)getauxval(AT_PHDR);
	unsigned n = (unsigned)getauxval(AT_PHNUM);
	for (unsigned i = 0; ph != NULL && i < n; i++) {
		if (ph[i].p_type == PT_PHDR) {
			*php = ph;
			*nump = n;
			*biasp = (uintptr_t)ph - (uintptr_t)ph[i].p_vaddr;
			return false;
		}
	}
	return true;
}

/*
 * The program headers and load bias of d, the object _dl_find_object
 * found for address a: from the ELF header at the start of its mapping,
 * or, when no ELF header is there and a lies in a segment of the main
 * program, from the auxiliary vector.  glibc gives the main program's
 * mapping from its first executable segment on, and LLD (Rust's linker)
 * puts the program's .rodata, .eh_frame_hdr and .eh_frame in a read-only
 * segment before .text: the table lay outside the mapping, every row of
 * the program was NOT_FOUND, and the walk followed stale rbp values
 * through the frames that keep none (test/bin/cfi_chain.sh's LLD case).
 * true if neither.
 */
static bool obj_phdrs_of(const struct dl_find_object *d, uintptr_t a,
    const ElfW(Phdr) **php, unsigned *nump, uintptr_t *biasp) {
	if (!obj_phdrs((uintptr_t)d->dlfo_map_start,
	    (uintptr_t)d->dlfo_map_end, php, nump, biasp))
		return false;
	const ElfW(Phdr) *ph;
	unsigned n;
	uintptr_t bias;
	if (obj_main_phdrs(&ph, &n, &bias))
		return true;
	for (unsigned i = 0; i < n; i++) {
		uintptr_t s = bias + (uintptr_t)ph[i].p_vaddr;
		if (ph[i].p_type == PT_LOAD && s <= a &&
		    a - s < (uintptr_t)ph[i].p_memsz) {
			*php = ph;
			*nump = n;
			*biasp = bias;
			return false;
		}
	}
	return true;
}

static bool obj_find(uintptr_t pc, prof_cfi_obj_t *obj) {
	struct dl_find_object d;
	if (_dl_find_object((void *)pc, &d) != 0 || d.dlfo_eh_frame == NULL)
		return true;
	uintptr_t lo = (uintptr_t)d.dlfo_map_start;
	uintptr_t hi = (uintptr_t)d.dlfo_map_end;
	uintptr_t hdr = (uintptr_t)d.dlfo_eh_frame;
	/* The .eh_frame_hdr's length and the segment holding it, from the
	 * program headers (the segment may lie outside the mapping: see
	 * obj_phdrs_of); without them, the rest of the mapping, which must
	 * then hold it. */
	uintptr_t seg_lo = lo, seg_hi = hi, bias;
	size_t hdr_len = hdr >= lo && hdr < hi ? hi - hdr : 0;
	const ElfW(Phdr) *ph;
	unsigned phnum;
	if (!obj_phdrs_of(&d, pc, &ph, &phnum, &bias)) {
		for (unsigned i = 0; i < phnum; i++) {
			uintptr_t a = bias + (uintptr_t)ph[i].p_vaddr;
			uintptr_t n = (uintptr_t)ph[i].p_memsz;
			if (ph[i].p_type == PT_GNU_EH_FRAME && a == hdr)
				hdr_len = n;
			if (ph[i].p_type == PT_LOAD && a <= hdr &&
			    hdr - a < n) {
				seg_lo = a;
				seg_hi = a + n;
			}
		}
	}
	if (hdr < seg_lo || hdr >= seg_hi || hdr_len == 0 ||
	    hdr_len > seg_hi - hdr)
		return true;
	return prof_cfi_obj_init(obj, (const void *)hdr, hdr_len, seg_lo,
	    seg_hi);
}

/* The mapping of the object holding a.  true if none. */
static bool obj_span(uintptr_t a, uintptr_t *lo, uintptr_t *hi) {
	struct dl_find_object d;
	if (_dl_find_object((void *)a, &d) != 0)
		return true;
	*lo = (uintptr_t)d.dlfo_map_start;
	*hi = (uintptr_t)d.dlfo_map_end;
	return false;
}

bool prof_cfi_in_text(uintptr_t a) {
	struct dl_find_object d;
	const ElfW(Phdr) *ph;
	unsigned phnum;
	uintptr_t bias;
	if (_dl_find_object((void *)a, &d) != 0 ||
	    obj_phdrs_of(&d, a, &ph, &phnum, &bias))
		return false;
	for (unsigned i = 0; i < phnum; i++) {
		uintptr_t s = bias + (uintptr_t)ph[i].p_vaddr;
		if (ph[i].p_type == PT_LOAD && (ph[i].p_flags & PF_X) != 0 &&
		    s <= a && a - s < (uintptr_t)ph[i].p_memsz)
			return true;
	}
	return false;
}

static void obj_prefork(void) {
}

static void obj_postfork(void) {
}
#else
#define OBJ_MAX 512
#define OBJ_RELOAD_NS ((uint64_t)100 * 1000 * 1000)

/* One object: its executable span and its tables.  The table is
 * rewritten in place under obj_busy; obj_seq is odd while it is, and
 * readers that saw it change throw their result away (every field is
 * an atomic, stored with release, so a reader that read a new value
 * then sees the new obj_seq). */
typedef struct {
	_Atomic uintptr_t text_lo, text_hi, hdr, hdr_len, seg_lo, seg_hi;
} obj_ent_t;

static obj_ent_t obj_table[OBJ_MAX];
static _Atomic unsigned obj_n;
static _Atomic uint64_t obj_seq;
static _Atomic uint64_t obj_loaded_ns;
static _Atomic bool obj_busy;

#define OBJ_LOAD(x) atomic_load_explicit(&(x), memory_order_acquire)
#define OBJ_STORE(x, v) atomic_store_explicit(&(x), (v), \
    memory_order_release)

static int obj_reload_cb(struct dl_phdr_info *info, size_t size,
    void *arg) {
	unsigned *n = arg;
	uintptr_t tlo = UINTPTR_MAX, thi = 0, hdr = 0, hdr_len = 0;
	(void)size;
	for (unsigned i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t a = info->dlpi_addr + (uintptr_t)ph->p_vaddr;
		if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X) != 0) {
			tlo = a < tlo ? a : tlo;
			thi = a + ph->p_memsz > thi ? a + ph->p_memsz : thi;
		}
		if (ph->p_type == PT_GNU_EH_FRAME) {
			hdr = a;
			hdr_len = ph->p_memsz;
		}
	}
	if (hdr == 0 || tlo >= thi || *n == OBJ_MAX)
		return 0;
	for (unsigned i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t a = info->dlpi_addr + (uintptr_t)ph->p_vaddr;
		if (ph->p_type == PT_LOAD && a <= hdr && hdr - a < ph->p_memsz) {
			obj_ent_t *o = &obj_table[*n];
			OBJ_STORE(o->text_lo, tlo);
			OBJ_STORE(o->text_hi, thi);
			OBJ_STORE(o->hdr, hdr);
			OBJ_STORE(o->hdr_len, hdr_len);
			OBJ_STORE(o->seg_lo, a);
			OBJ_STORE(o->seg_hi, a + ph->p_memsz);
			(*n)++;
			break;
		}
	}
	return 0;
}

static bool obj_lookup(uintptr_t pc, prof_cfi_obj_t *obj) {
	uint64_t s = OBJ_LOAD(obj_seq);
	if ((s & 1) != 0)
		return true;
	unsigned n = OBJ_LOAD(obj_n);
	bool found = false;
	uintptr_t hdr = 0, hdr_len = 0, seg_lo = 0, seg_hi = 0;
	for (unsigned i = 0; i < n && i < OBJ_MAX && !found; i++) {
		obj_ent_t *o = &obj_table[i];
		if (OBJ_LOAD(o->text_lo) <= pc && pc < OBJ_LOAD(o->text_hi)) {
			hdr = OBJ_LOAD(o->hdr);
			hdr_len = OBJ_LOAD(o->hdr_len);
			seg_lo = OBJ_LOAD(o->seg_lo);
			seg_hi = OBJ_LOAD(o->seg_hi);
			found = true;
		}
	}
	if (!found || OBJ_LOAD(obj_seq) != s)
		return true;
	return prof_cfi_obj_init(obj, (const void *)hdr, hdr_len, seg_lo,
	    seg_hi);
}

static bool obj_find(uintptr_t pc, prof_cfi_obj_t *obj) {
	if (!obj_lookup(pc, obj))
		return false;
	uint64_t now = os_now_ns();
	uint64_t last = atomic_load_explicit(&obj_loaded_ns,
	    memory_order_relaxed);
	if ((last != 0 && now - last < OBJ_RELOAD_NS) ||
	    atomic_exchange_explicit(&obj_busy, true, memory_order_acquire))
		return true;
	int saved = errno;
	atomic_fetch_add_explicit(&obj_seq, 1, memory_order_acq_rel);
	unsigned n = 0;
	dl_iterate_phdr(obj_reload_cb, &n);
	OBJ_STORE(obj_n, n);
	atomic_fetch_add_explicit(&obj_seq, 1, memory_order_acq_rel);
	atomic_store_explicit(&obj_loaded_ns, now, memory_order_relaxed);
	atomic_store_explicit(&obj_busy, false, memory_order_release);
	errno = saved;
	return obj_lookup(pc, obj);
}

/* The executable span of the object holding a, from the table (which
 * holds text spans; the rows looked up are of return addresses, which
 * lie in them).  true if none. */
static bool obj_span(uintptr_t a, uintptr_t *lo, uintptr_t *hi) {
	prof_cfi_obj_t obj;
	if (obj_find(a, &obj))
		return true;
	uint64_t s = OBJ_LOAD(obj_seq);
	unsigned n = OBJ_LOAD(obj_n);
	bool found = false;
	for (unsigned i = 0; i < n && i < OBJ_MAX && !found; i++) {
		obj_ent_t *o = &obj_table[i];
		if (OBJ_LOAD(o->text_lo) <= a && a < OBJ_LOAD(o->text_hi)) {
			*lo = OBJ_LOAD(o->text_lo);
			*hi = OBJ_LOAD(o->text_hi);
			found = true;
		}
	}
	return !found || (s & 1) != 0 || OBJ_LOAD(obj_seq) != s;
}

bool prof_cfi_in_text(uintptr_t a) {
	prof_cfi_obj_t obj;
	return !obj_find(a, &obj);      /* the table holds text spans */
}

/* fork while a reload runs: wait for it, so that the child does not
 * inherit a table half written (nor the loader's lock, which the reload
 * holds). */
static void obj_prefork(void) {
	while (atomic_exchange_explicit(&obj_busy, true,
	    memory_order_acquire))
		sched_yield();
}

static void obj_postfork(void) {
	atomic_store_explicit(&obj_busy, false, memory_order_release);
}
#endif

/* ------------------------------------------------- pages dropped */

/*
 * The first read of an object's tables (libc's, for the start code at the
 * bottom of every stack) maps their pages into the process, 64 KiB around
 * each fault (the kernel's fault-around), for the few rows the walk then
 * keeps in the row cache: in a 3 MB process that alone was 2% of its peak
 * RSS.  At the end of such a walk the pages are dropped again, the first
 * few times per object only (a syscall each): read-only pages of a file
 * mapping that no one wrote are the page cache's, and a later read maps
 * them again as they were.  prof_cfi_drop_range refuses anything else.
 */
bool prof_cfi_drop_range(const void *phdrs, unsigned phnum, uintptr_t bias,
    uintptr_t hdr, uintptr_t *lop, uintptr_t *hip) {
	const ElfW(Phdr) *ph = phdrs;
	uintptr_t lo = 0, hi = 0;
	for (unsigned i = 0; i < phnum; i++) {
		uintptr_t a = bias + (uintptr_t)ph[i].p_vaddr;
		if (ph[i].p_type != PT_LOAD || hdr < a ||
		    hdr - a >= (uintptr_t)ph[i].p_memsz)
			continue;
		if ((ph[i].p_flags & PF_W) != 0 ||
		    ph[i].p_filesz != ph[i].p_memsz)
			return true;
		/* hdr's own page may hold the end of .rodata: kept. */
		lo = PAGE_CEILING(hdr + 1);
		hi = PAGE_CEILING(a + (uintptr_t)ph[i].p_memsz);
	}
	if (lo >= hi)
		return true;
	for (unsigned i = 0; i < phnum; i++) {
		uintptr_t a = bias + (uintptr_t)ph[i].p_vaddr;
		uintptr_t n = (uintptr_t)ph[i].p_memsz;
		if (((ph[i].p_type == PT_LOAD && (ph[i].p_flags & PF_W) != 0) ||
		    ph[i].p_type == PT_GNU_RELRO) && n != 0 &&
		    (a & ~(uintptr_t)PAGE_MASK) < hi && PAGE_CEILING(a + n) > lo)
			return true;
		if (ph[i].p_type != PT_DYNAMIC)
			continue;
		const ElfW(Dyn) *d = (const ElfW(Dyn) *)a;
		size_t nd = n / sizeof(*d);
		for (size_t j = 0; j < nd && j < 4096 && d[j].d_tag != DT_NULL;
		    j++) {
			if (d[j].d_tag == DT_TEXTREL || (d[j].d_tag ==
			    DT_FLAGS && (d[j].d_un.d_val & DF_TEXTREL) != 0))
				return true;
		}
	}
	*lop = lo;
	*hip = hi;
	return false;
}

static _Atomic uint64_t drops_total;

#if MP_HAVE_DL_FIND_OBJECT
/* The objects dropped from (their mapping's start) and how often. */
#define DROP_OBJS 16
static _Atomic uintptr_t drop_obj[DROP_OBJS];
static _Atomic unsigned drop_count[DROP_OBJS];

/* The count of the object mapped at key; claimed if new (NULL: no room). */
static _Atomic unsigned *drop_slot(uintptr_t key, bool claim) {
	for (unsigned i = 0; i < DROP_OBJS; i++) {
		uintptr_t k = atomic_load_explicit(&drop_obj[i],
		    memory_order_acquire);
		if (k == 0 && claim && atomic_compare_exchange_strong(
		    &drop_obj[i], &k, key))
			return &drop_count[i];
		if (k == key)
			return &drop_count[i];
		if (k == 0)
			return NULL;
	}
	return NULL;
}

static void drop_obj_pages(uintptr_t pc, uintptr_t done) {
	struct dl_find_object d;
	const ElfW(Phdr) *ph;
	unsigned phnum;
	uintptr_t bias, lo, hi, key;
	if (_dl_find_object((void *)pc, &d) != 0 || d.dlfo_eh_frame == NULL)
		return;
	key = (uintptr_t)d.dlfo_map_start;
	/* The vDSO's pages are the kernel's, not a file's. */
	if (key == done || key == (uintptr_t)getauxval(AT_SYSINFO_EHDR))
		return;
	_Atomic unsigned *cnt = drop_slot(key, true);
	if (cnt == NULL)
		return;
	unsigned c = atomic_load_explicit(cnt, memory_order_relaxed);
	do {
		if (c >= PROF_CFI_DROPS_PER_OBJ)
			return;
	} while (!atomic_compare_exchange_weak_explicit(cnt, &c, c + 1,
	    memory_order_relaxed, memory_order_relaxed));
	if (obj_phdrs(key, (uintptr_t)d.dlfo_map_end, &ph, &phnum, &bias) ||
	    prof_cfi_drop_range(ph, phnum, bias, (uintptr_t)d.dlfo_eh_frame,
	    &lo, &hi) || lo < key || hi > (uintptr_t)d.dlfo_map_end)
		return;
	int saved = errno;
	if (!os_file_pages_drop((const void *)lo, hi - lo))
		atomic_fetch_add_explicit(&drops_total, 1,
		    memory_order_relaxed);
	errno = saved;
}

void prof_cfi_walk_end(prof_cfi_walk_t *w) {
	uintptr_t done = 0;
	for (unsigned i = 0; i < 2 && w->read_pc[i] != 0; i++) {
		struct dl_find_object d;
		drop_obj_pages(w->read_pc[i], done);
		if (_dl_find_object((void *)w->read_pc[i], &d) == 0)
			done = (uintptr_t)d.dlfo_map_start;
		w->read_pc[i] = 0;
		w->read_hdr[i] = NULL;
	}
}

unsigned prof_cfi_drops_of(uintptr_t pc) {
	struct dl_find_object d;
	if (_dl_find_object((void *)pc, &d) != 0)
		return 0;
	_Atomic unsigned *cnt = drop_slot((uintptr_t)d.dlfo_map_start, false);
	return cnt != NULL ? atomic_load(cnt) : 0;
}
#else
/* Without _dl_find_object the table's pages stay (no mapping bounds
 * without the loader's lock here). */
void prof_cfi_walk_end(prof_cfi_walk_t *w) {
	w->read_pc[0] = w->read_pc[1] = 0;
	w->read_hdr[0] = w->read_hdr[1] = NULL;
}

unsigned prof_cfi_drops_of(uintptr_t pc) {
	(void)pc;
	return 0;
}
#endif

uint64_t prof_cfi_drops(void) {
	return atomic_load(&drops_total);
}

/* -------------------------------------------------------------- cache */

/*
 * Rows by pc (a return address minus one), so that a stack seen before
 * costs a hash lookup per frame: sets of two ways (two pcs of one stack
 * that hash alike both stay; a direct-mapped cache made them evict each
 * other on every walk of a deep stack), the way replaced chosen round
 * robin, lock-free.  An entry is rewritten only by the thread that moved
 * its seq from even to odd; a reader takes it only if seq is even and
 * unchanged around its loads (acquire loads of release stores: a reader
 * that saw a new field sees the odd seq afterwards).  A pc whose object
 * has no usable row is kept too (err), so that the outermost frames do
 * not ask the loader again.
 *
 * The table starts at one page (64 sets) and grows eightfold, up to
 * 4,096 sets (256 KiB), each time a quarter of its entries' worth of rows
 * has replaced others (a set already full): most programs repeat a few
 * dozen return addresses and never replace any, and a profiled program
 * should not keep pages it does not need (the profiling overhead target
 * counts resident memory); a program whose stacks do not fit replaces
 * rows on every walk and gets a larger table within a few dozen walks.  A grown table is
 * mapped (os_map: no allocator lock) and published with one pointer; the
 * old one stays mapped, since a walk may still be reading it, and its
 * rows are computed again into the new one as walks meet them.
 *
 * An entry's key is its pc alone for a row of an object the loader never
 * unloads (cfi_fixed below), else the pc with the unload tag (1 + the
 * unload epoch, modulo 65535) in bits 48-63 (xor: cached pcs lie inside
 * loaded objects, below 2^47).  The epoch moves when a walk sees that the
 * loader unloaded an object since the last look (dl_iterate_phdr's
 * dlpi_subs), which a walk does before its first lookup of a row that is
 * not under a fixed key; so a row of an unloaded object is never used
 * again (until 65535 unloads later), and a row computed while an object
 * went away is keyed by the epoch read before its lookup, so it is not
 * used either.
 */
#define CACHE_WAYS 2
#define CACHE_LG_FIRST 6         /* sets: 64 x 64 bytes, one page */
#define CACHE_LG_STEP 3
#define CACHE_LG_MAX 12
#define CACHE_TAG_SHIFT 48

static _Atomic uint64_t cfi_unloads_seen;   /* dlpi_subs at the last look */
static _Atomic uint64_t cfi_epoch;          /* moves with it */

static int unloads_cb(struct dl_phdr_info *info, size_t size, void *arg) {
	(void)size;
	*(uint64_t *)arg = (uint64_t)info->dlpi_subs;
	return 1;               /* the first object is enough */
}

/*
 * The loader's lock across fork.  prof_cfi_unloads_check holds it for a
 * moment (dl_iterate_phdr takes it); a child forked while another thread
 * held it would inherit it held (glibc resets only dl_load_lock in the
 * child), and the child's first walk would wait forever (test/stress/
 * fork_storm's children did).  So walks enter the loader through this
 * gate, which prof_cfi_prefork closes and waits empty.  A walk that finds
 * it closed skips the check: the epoch stays as it is for that walk.
 */
static _Atomic unsigned cfi_loader_inside;
static _Atomic bool cfi_loader_closed;

void prof_cfi_unloads_check(void) {
	uint64_t subs = 0;
	/* Sequentially consistent: with prefork's store and load, either
	 * this walk sees the gate closed or prefork sees it inside. */
	atomic_fetch_add(&cfi_loader_inside, 1);
	if (atomic_load(&cfi_loader_closed)) {
		atomic_fetch_sub(&cfi_loader_inside, 1);
		return;
	}
	int saved = errno;
	dl_iterate_phdr(unloads_cb, &subs);
	errno = saved;
	atomic_fetch_sub(&cfi_loader_inside, 1);
	uint64_t seen = atomic_load_explicit(&cfi_unloads_seen,
	    memory_order_relaxed);
	if (subs != seen && atomic_compare_exchange_strong_explicit(
	    &cfi_unloads_seen, &seen, subs, memory_order_relaxed,
	    memory_order_relaxed))
		atomic_fetch_add_explicit(&cfi_epoch, 1, memory_order_relaxed);
}

uint64_t prof_cfi_epoch(void) {
	return atomic_load_explicit(&cfi_epoch, memory_order_relaxed);
}

/*
 * Objects the loader never unloads: the program, the loader, libc (the
 * program needs it from its start, and glibc unloads only what dlopen
 * loaded), the vDSO, and this library when it is the process's malloc
 * (unprefixed: loaded with the program or preloaded, never dlopened).
 * Their mappings, found once (cfi_fixed_state 2: known); a row of code
 * inside one is cached under its pc alone, so that a walk through them
 * only never asks the loader about unloads.
 */
#define CFI_FIXED_MAX 5
static _Atomic uintptr_t cfi_fixed_lo[CFI_FIXED_MAX];
static _Atomic uintptr_t cfi_fixed_hi[CFI_FIXED_MAX];
static _Atomic unsigned cfi_fixed_state;    /* 0 unknown, 1 finding, 2 */

static bool obj_span(uintptr_t a, uintptr_t *lo, uintptr_t *hi);

static void fixed_find(void) {
	unsigned s = 0;
	if (!atomic_compare_exchange_strong_explicit(&cfi_fixed_state, &s, 1,
	    memory_order_acquire, memory_order_relaxed))
		return;         /* known, or another thread is finding them */
	const uintptr_t in[CFI_FIXED_MAX] = {
		(uintptr_t)getauxval(AT_ENTRY),
		(uintptr_t)getauxval(AT_BASE),
		(uintptr_t)getauxval(AT_SYSINFO_EHDR),
		(uintptr_t)&dl_iterate_phdr,
		MP_PREFIX_STR[0] == '\0' ? (uintptr_t)&prof_cfi_find : 0,
	};
	for (unsigned i = 0; i < CFI_FIXED_MAX; i++) {
		uintptr_t lo = 0, hi = 0;
		if (in[i] == 0 || obj_span(in[i], &lo, &hi))
			lo = hi = 0;
		atomic_store_explicit(&cfi_fixed_lo[i], lo,
		    memory_order_relaxed);
		atomic_store_explicit(&cfi_fixed_hi[i], hi,
		    memory_order_relaxed);
	}
	atomic_store_explicit(&cfi_fixed_state, 2, memory_order_release);
}

static bool fixed_has(uintptr_t pc) {
	if (atomic_load_explicit(&cfi_fixed_state, memory_order_acquire) != 2)
		return false;
	for (unsigned i = 0; i < CFI_FIXED_MAX; i++) {
		if (pc - atomic_load_explicit(&cfi_fixed_lo[i],
		    memory_order_relaxed) < atomic_load_explicit(
		    &cfi_fixed_hi[i], memory_order_relaxed) -
		    atomic_load_explicit(&cfi_fixed_lo[i],
		    memory_order_relaxed))
			return true;
	}
	return false;
}

typedef struct {
	_Atomic uint64_t seq, key, w1, w2;
} cache_ent_t;

/* One set: a cache line. */
typedef struct {
	_Alignas(CACHELINE) cache_ent_t way[CACHE_WAYS];
} cache_set_t;

/* A table of 2^lg sets; next[i]: the way set i's next insertion replaces
 * (a lost update between two writers only changes which way goes). */
typedef struct {
	unsigned lg;
	_Atomic uint64_t evictions;     /* rows put over another */
	_Atomic uint8_t *next;
	cache_set_t *sets;
} cache_tab_t;

static cache_set_t cache_first_sets[(size_t)1 << CACHE_LG_FIRST];
static _Atomic uint8_t cache_first_next[(size_t)1 << CACHE_LG_FIRST];
static cache_tab_t cache_first = {
	.lg = CACHE_LG_FIRST, .next = cache_first_next,
	.sets = cache_first_sets
};
static _Atomic(cache_tab_t *) cache_cur = &cache_first;
static _Atomic bool cache_growing;

static void cache_grow(cache_tab_t *t) {
	if (t->lg >= CACHE_LG_MAX || atomic_exchange_explicit(&cache_growing,
	    true, memory_order_acquire))
		return;
	if (atomic_load_explicit(&cache_cur, memory_order_relaxed) == t) {
		unsigned lg = t->lg + CACHE_LG_STEP;
		size_t nsets = (size_t)1 << lg;
		size_t head = ALIGNMENT_CEILING(sizeof(cache_tab_t) + nsets,
		    CACHELINE);
		size_t size = PAGE_CEILING(head + nsets * sizeof(cache_set_t));
		int saved = errno;      /* a failed mmap inside malloc */
		uint8_t *m = os_map(size, PAGE);        /* zeroed */
		errno = saved;
		if (m != NULL) {
			cache_tab_t *nt = (cache_tab_t *)(void *)m;
			nt->lg = lg;
			nt->next = (_Atomic uint8_t *)(m + sizeof(cache_tab_t));
			nt->sets = (cache_set_t *)(void *)(m + head);
			atomic_store_explicit(&cache_cur, nt,
			    memory_order_release);
		}
	}
	atomic_store_explicit(&cache_growing, false, memory_order_release);
}

static size_t cache_set(const cache_tab_t *t, uintptr_t pc) {
	uint64_t h = (uint64_t)pc * 0x9e3779b97f4a7c15u;
	return (size_t)(h >> (64 - t->lg));
}

/* Entry e's row if it holds key (w1, w2 as cache_put packs them). */
static inline bool cache_way_get(cache_ent_t *e, uint64_t key, uint64_t *w1,
    uint64_t *w2) {
	uint64_t s = atomic_load_explicit(&e->seq, memory_order_acquire);
	if (s == 0 || (s & 1) != 0)
		return false;
	uint64_t k = atomic_load_explicit(&e->key, memory_order_acquire);
	*w1 = atomic_load_explicit(&e->w1, memory_order_acquire);
	*w2 = atomic_load_explicit(&e->w2, memory_order_acquire);
	return atomic_load_explicit(&e->seq, memory_order_acquire) == s &&
	    k == key;
}

static inline bool cache_get(cache_set_t *set, uint64_t key, uint64_t *w1,
    uint64_t *w2) {
	return cache_way_get(&set->way[0], key, w1, w2) ||
	    cache_way_get(&set->way[1], key, w1, w2);
}

static inline prof_cfi_err_t cache_unpack(uintptr_t pc, uint64_t w1,
    uint64_t w2, prof_cfi_rule_t *r) {
	r->lo = r->hi = pc;
	r->cfa_off = (int32_t)(uint32_t)w1;
	r->ra_off = (int32_t)(uint32_t)(w1 >> 32);
	r->rbp_off = (int32_t)(uint32_t)w2;
	r->cfa = (uint8_t)(w2 >> 32);
	r->ra_how = (uint8_t)(w2 >> 40 & 0xf);
	r->rbp_how = (uint8_t)(w2 >> 44 & 0xf);
	r->plt_k = (uint8_t)(w2 >> 48 & 0x3f);
	r->signal = (w2 >> 54 & 1) != 0;
	return (prof_cfi_err_t)(w2 >> 56 & 0xff);
}

static bool fits32(int64_t v) {
	return v >= INT32_MIN && v <= INT32_MAX;
}

static void cache_put(cache_tab_t *t, uintptr_t pc, uint64_t key,
    const prof_cfi_rule_t *r, prof_cfi_err_t err) {
	if ((pc >> CACHE_TAG_SHIFT) != 0 || (err == PROF_CFI_OK &&
	    (!fits32(r->cfa_off) || !fits32(r->ra_off) ||
	    !fits32(r->rbp_off))))
		return;
	size_t i = cache_set(t, pc);
	unsigned way = atomic_load_explicit(&t->next[i],
	    memory_order_relaxed) % CACHE_WAYS;
	atomic_store_explicit(&t->next[i], (uint8_t)(way + 1),
	    memory_order_relaxed);
	cache_ent_t *e = &t->sets[i].way[way];
	uint64_t s = atomic_load_explicit(&e->seq, memory_order_relaxed);
	if ((s & 1) != 0 || !atomic_compare_exchange_strong_explicit(&e->seq,
	    &s, s + 1, memory_order_acq_rel, memory_order_relaxed))
		return;         /* another thread is writing it */
	uint64_t w1 = 0, w2 = (uint64_t)err << 56;
	if (err == PROF_CFI_OK) {
		w1 = (uint64_t)(uint32_t)(int32_t)r->cfa_off |
		    (uint64_t)(uint32_t)(int32_t)r->ra_off << 32;
		w2 |= (uint64_t)(uint32_t)(int32_t)r->rbp_off |
		    (uint64_t)r->cfa << 32 | (uint64_t)(r->ra_how & 0xf) << 40 |
		    (uint64_t)(r->rbp_how & 0xf) << 44 |
		    (uint64_t)(r->plt_k & 0x3f) << 48 |
		    (uint64_t)r->signal << 54;
	}
	atomic_store_explicit(&e->key, key, memory_order_release);
	atomic_store_explicit(&e->w1, w1, memory_order_release);
	atomic_store_explicit(&e->w2, w2, memory_order_release);
	atomic_store_explicit(&e->seq, s + 2, memory_order_release);
	if (s != 0 && atomic_fetch_add_explicit(&t->evictions, 1,
	    memory_order_relaxed) + 1 > ((uint64_t)CACHE_WAYS << t->lg) / 4)
		cache_grow(t);
}

/* The row at pc, not found in t under pc alone: under the unload tag,
 * or from the object's tables (then cached).  Out of line: a walk of a
 * stack seen before finds each row in the cache at once. */
static MP_COLD prof_cfi_err_t row_miss(prof_cfi_walk_t *w, cache_tab_t *t,
    cache_set_t *set, uintptr_t pc, prof_cfi_rule_t *rule) {
	uint64_t w1, w2;
	if (!w->unloads_checked) {
		w->unloads_checked = true;
		prof_cfi_unloads_check();
	}
	uint64_t key = (uint64_t)pc ^ (prof_cfi_epoch() % 0xffff + 1) <<
	    CACHE_TAG_SHIFT;
	if (cache_get(set, key, &w1, &w2))
		return cache_unpack(pc, w1, w2, rule);
	prof_cfi_obj_t obj;
	if (obj_find(pc, &obj))
		return PROF_CFI_NOT_FOUND;      /* not cached: the object
						 * may come */
	prof_cfi_err_t err = prof_cfi_find(&obj, pc, rule);
	/* Its tables' pages mapped: the walk's end may drop them (once
	 * an object: its .eh_frame_hdr tells). */
	for (unsigned i = 0; i < 2; i++) {
		if (w->read_pc[i] == 0) {
			w->read_pc[i] = pc;
			w->read_hdr[i] = obj.hdr;
		}
		if (w->read_hdr[i] == obj.hdr)
			break;
	}
	if (atomic_load_explicit(&cfi_fixed_state, memory_order_relaxed) == 0)
		fixed_find();
	cache_put(t, pc, fixed_has(pc) ? (uint64_t)pc : key, rule, err);
	return err;
}

/* The row at return address ret, from the cache or the object's
 * tables.  w: the walk's state (whether it has looked at the loader's
 * unloads yet). */
static inline prof_cfi_err_t row_at(prof_cfi_walk_t *w, uintptr_t ret,
    prof_cfi_rule_t *rule) {
	if (ret == 0)
		return PROF_CFI_END;
	uintptr_t pc = ret - 1;
	cache_tab_t *t = atomic_load_explicit(&cache_cur, memory_order_acquire);
	cache_set_t *set = &t->sets[cache_set(t, pc)];
	uint64_t w1, w2;
	if (likely(cache_get(set, pc, &w1, &w2)))
		return cache_unpack(pc, w1, w2, rule);
	return row_miss(w, t, set, pc, rule);
}

prof_cfi_err_t prof_cfi_unwind(prof_cfi_regs_t *regs, uintptr_t lo,
    uintptr_t hi) {
	prof_cfi_walk_t w = {false};
	prof_cfi_rule_t rule;
	prof_cfi_err_t err = row_at(&w, regs->rip, &rule);
	if (w.read_pc[0] != 0)
		prof_cfi_walk_end(&w);
	if (err != PROF_CFI_OK)
		return err;
	return prof_cfi_apply(&rule, regs, lo, hi);
}

prof_cfi_err_t prof_cfi_row(prof_cfi_walk_t *w, uintptr_t ret,
    prof_cfi_rule_t *rule) {
	return row_at(w, ret, rule);
}

bool prof_cfi_keeps_fp(uintptr_t ret) {
	prof_cfi_walk_t w = {false};
	prof_cfi_rule_t r;
	prof_cfi_err_t err = row_at(&w, ret, &r);
	if (w.read_pc[0] != 0)
		prof_cfi_walk_end(&w);
	return err != PROF_CFI_OK || prof_cfi_rule_keeps_fp(&r);
}

/* Whether pc's rows are cached without the unload epoch (unit tests). */
bool prof_cfi_fixed(uintptr_t pc) {
	fixed_find();
	return fixed_has(pc);
}

/* Sets in the current table (unit tests). */
size_t prof_cfi_cache_sets(void) {
	return (size_t)1 << atomic_load_explicit(&cache_cur,
	    memory_order_acquire)->lg;
}

void prof_cfi_prefork(void) {
	atomic_store(&cfi_loader_closed, true);
	while (atomic_load(&cfi_loader_inside) != 0)
		sched_yield();
	obj_prefork();
}

void prof_cfi_postfork_parent(void) {
	obj_postfork();
	atomic_store(&cfi_loader_closed, false);
}

void prof_cfi_postfork_child(void) {
	obj_postfork();
	atomic_store(&cfi_loader_inside, 0);
	atomic_store(&cfi_loader_closed, false);
	/* A grow or a fixed_find in another thread died with the fork:
	 * what it published is whole, the rest was never seen. */
	atomic_store(&cache_growing, false);
	unsigned s = 1;
	atomic_compare_exchange_strong(&cfi_fixed_state, &s, 0);
}
