/*
 * bin/malloc-prof.h - internal header of the malloc-prof command-line tool:
 * the types shared by its files and every cross-file prototype, grouped by
 * the file that defines them.  The tool reads profiles and ELF files only:
 * it never links libmalloc_prof, so it builds (and works) in every
 * configuration, --disable-prof included.
 */
#ifndef MALLOC_PROF_BIN_H
#define MALLOC_PROF_BIN_H

#include <stdbool.h>
#include <stddef.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>

/* Exit statuses: 1 is reserved for `leaks` finding more than allowed. */
#define MP_EXIT_OK 0
#define MP_EXIT_LEAKS 1
#define MP_EXIT_USAGE 2

/* The four numbers of a counter line, `objs: bytes [aobjs: abytes]`, and
 * the sample types the commands choose between (the jeprof options). */
enum { MP_INUSE_OBJECTS, MP_INUSE_SPACE, MP_ALLOC_OBJECTS, MP_ALLOC_SPACE,
	MP_NVALUES };

typedef struct {
	uint64_t v[MP_NVALUES];	/* as printed in the file */
} mp_cnt_t;

/*
 * The largest count a profile may hold: 2^62 objects or bytes (4 EiB), as
 * printed or unbiased, in one line or sample, and as the total of one
 * profile's stacks (absolute values: pprof diffs are negative).  No heap
 * is that large: the readers refuse more as a damaged profile.  Within
 * it, the positive and the negative sums of two profiles (a diff) fit in
 * int64_t; mp_report_finish checks the sums of more.
 */
#define MP_COUNT_MAX ((uint64_t)1 << 62)

/* A + B for the sums of counts in the reports.  The bounds above and
 * mp_report_finish's check keep every such sum within int64_t; should
 * one get past them it stops at the limit rather than wrap. */
static inline int64_t mp_sum(int64_t a, int64_t b) {
	int64_t r;
	if (__builtin_add_overflow(a, b, &r))
		return b < 0 ? INT64_MIN : INT64_MAX;
	return r;
}

typedef struct {
	uint64_t uid;
	mp_cnt_t cnt;
	char *name;		/* "" when the thread has none */
} mp_thread_t;

typedef struct {
	uint64_t uid;
	mp_cnt_t cnt;
} mp_tcnt_t;

/* A label of a pprof sample, key and value. */
typedef struct {
	char *key, *value;
} mp_label_t;

/* A frame named by a pprof profile's own Function (and Line). */
typedef struct {
	char *name;
	char *file;		/* "" if the profile has none */
	int64_t line;		/* 0 if unknown */
} mp_fname_t;

typedef struct {
	uint64_t *pcs;		/* frame 0 innermost, as in the file */
	uint32_t *fn;		/* pprof: frame k's index in the profile's
				 * fnames, UINT32_MAX to name it from pcs[k];
				 * NULL (heap_v2): every frame from pcs */
	uint32_t npcs;
	mp_cnt_t raw;		/* the stack's t* line */
	double val[MP_NVALUES];	/* unbiased as jeprof scales heap_v2 lines */
	mp_tcnt_t *threads;	/* its tN lines, for --thread */
	uint32_t nthreads;
	/* pprof: the sample's labels (thread_id, thread_name, those of
	 * thread.prof.label...); a number label's value in decimal */
	mp_label_t *labels;
	uint32_t nlabels;
} mp_stack_t;

typedef struct {
	uint64_t start, end, offset;
	uint64_t inode;		/* of the file the program mapped; 0: none */
	char *build_id;		/* pprof: its GNU build ID (hex), or NULL */
	char perms[5];
	char *path;		/* without " (deleted)"; "" for anonymous */
	bool deleted;
} mp_mapping_t;

typedef struct {
	const char *file;	/* as named on the command line */
	uint64_t period;	/* R of heap_v2/R: mean bytes between samples */
	mp_cnt_t total;		/* the header's t* line */
	bool have_total;
	mp_thread_t *threads;
	size_t nthreads;
	mp_stack_t *stacks;
	size_t nstacks;
	mp_mapping_t *maps;	/* sorted by start */
	size_t nmaps;
	bool have_maps;		/* MAPPED_LIBRARIES: was present */
	/* pprof input (mp_pprof.c) */
	const char *format;	/* "heap_v2", "pprof" or "pprof (gzip)" */
	bool exact_pcs;		/* no address is a return address: pprof's
				 * are the call sites (ours) or named */
	mp_fname_t *fnames;
	size_t nfnames;
	char *sample_types;	/* "type/unit ..." as in the file */
} mp_profile_t;

/* ---- mp_util.c: messages, memory, strings */
extern const char *mp_progname;
/* One line on standard error, after "malloc-prof: ". */
void mp_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void mp_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Never NULL: running out of memory ends the run (exit status 2). */
void *mp_xmalloc(size_t n);
void *mp_xcalloc(size_t n, size_t size);
void *mp_xrealloc(void *p, size_t n);
char *mp_xstrdup(const char *s);
char *mp_xstrndup(const char *s, size_t n);
/* Replaces the control characters of S (from a file, to be shown in one
 * line) with '?'. */
void mp_printable(char *s);

/* ---- mp_cmd.c: running a command (main parses the command line) */
typedef enum {
	CMD_TOP, CMD_DIFF, CMD_COLLAPSED, CMD_FLAMEGRAPH, CMD_DOT, CMD_SVG,
	CMD_LEAKS, CMD_INFO, CMD_PPROF
} mp_cmd_t;

typedef struct {
	mp_cmd_t cmd;
	int which;		/* MP_INUSE_SPACE, ... */
	long limit;		/* -n: rows, stacks or nodes; -1: all */
	const char *focus, *ignore, *base, *output, *title;
	const char *debug_dir;
	bool lines;		/* --lines: "function file:line" */
	int64_t thread;		/* --thread N, or -1: all threads */
	const char *tag;	/* --tag KEY (group) or KEY=VALUE (filter) */
	bool demangle;		/* c++filt, unless --no-demangle */
	uint64_t max_bytes;
	const char *program;
	const char **profiles;
	int nprofiles;
} mp_opts_t;
/* Runs the command O describes; returns the exit status. */
int mp_cmd_run(const mp_opts_t *o);

/* ---- mp_profile.c: the heap_v2 reader */
/* Reads FILE; on error prints one line and returns false. */
bool mp_profile_read(const char *file, mp_profile_t *prof);
/* The same for the SIZE bytes at DATA (the contents of FILE, which only
 * names it in messages); SIZE 0 reads as "not a heap profile". */
bool mp_profile_read_mem(const char *file, const uint8_t *data, size_t size,
    mp_profile_t *prof);
/* Frees what PROF holds (every reader's fields) and leaves it empty, as
 * the readers start from: freeing it again does nothing. */
void mp_profile_free(mp_profile_t *prof);
/* jeprof's AdjustSamples for one (objects, bytes) pair. */
void mp_unbias(uint64_t period, uint64_t objs, uint64_t bytes, double *uobjs,
    double *ubytes);
/* The four unbiased values of counter line CNT. */
void mp_unbias_cnt(uint64_t period, const mp_cnt_t *cnt, double *val);
/* The mapping holding PC, or NULL. */
const mp_mapping_t *mp_profile_mapping(const mp_profile_t *prof, uint64_t pc);
/* Whether the file starts like an ELF file (PROGRAM rather than PROFILE). */
bool mp_file_is_elf(const char *file);

/* ---- mp_pprof.c: pprof profiles (profile.proto), read and written */
typedef struct mp_symbolizer mp_symbolizer_t;
/* Whether DATA starts like a pprof profile: gzip's magic, or the first
 * field of a protobuf Profile message. */
bool mp_pprof_detect(const uint8_t *data, size_t size);
/* Reads the pprof profile DATA (gzipped or not) of FILE into PROF (the
 * heap sample types by name; stacks named by the profile's Functions
 * when it has them).  On error prints one line and returns false. */
bool mp_pprof_read(const char *file, const uint8_t *data, size_t size,
    mp_profile_t *prof);
/* The `pprof` command's writer: samples are added one stack at a time
 * (its frames FIRST.. to the outermost, VAL times SIGN), then written. */
typedef struct mp_pprof_out mp_pprof_out_t;
mp_pprof_out_t *mp_pprof_out_new(mp_symbolizer_t *sym);
void mp_pprof_out_sample(mp_pprof_out_t *pp, const mp_profile_t *prof,
    const mp_stack_t *s, uint32_t first, const double *val, int sign);
/* Writes the gzipped Profile to FD (PATH for messages); false on error. */
bool mp_pprof_out_write(mp_pprof_out_t *pp, uint64_t period, int fd,
    const char *path);
void mp_pprof_out_free(mp_pprof_out_t *pp);

/* ---- mp_dwarf.c: DWARF line tables */
typedef struct mp_lines mp_lines_t;
/* The line table of the ELF image IMG, or NULL if it has none or it
 * cannot be read (*why then says why, else NULL). */
mp_lines_t *mp_lines_load(const uint8_t *img, size_t size, const char **why);
/* File and line of the instruction at ADDR (the file's own addresses). */
bool mp_lines_find(const mp_lines_t *l, uint64_t addr, const char **file,
    unsigned *line);
void mp_lines_free(mp_lines_t *l);

/* ---- mp_symbolize.c: ELF symbol tables */
typedef struct mp_elf mp_elf_t;
/* PROGRAM (or NULL) replaces the mapped file of the same base name;
 * DEBUG_DIR is where separate debug files are looked for; LINES adds
 * " file:line" to the names of functions. */
mp_symbolizer_t *mp_sym_new(const char *program, const char *debug_dir,
    bool lines);
void mp_sym_free(mp_symbolizer_t *sym);
/* Makes the SIZE bytes at DATA the ELF file PATH for every later lookup
 * (instead of reading the file; DATA must outlive SYM).  For the fuzz
 * target of the ELF reader (test/fuzz/elf.c). */
const mp_elf_t *mp_sym_add_image(mp_symbolizer_t *sym, const char *path,
    const uint8_t *data, size_t size);
/* The name of the frame at PC of PROF (innermost frame: LEAF), in a buffer
 * valid until the next call.  Warns once per file that cannot name it. */
const char *mp_sym_frame(mp_symbolizer_t *sym, const mp_profile_t *prof,
    uint64_t pc, bool leaf);
/* The same without " file:line": that goes to *FILE (NULL if unknown or
 * not LINES; valid while SYM lives) and *LINE. */
const char *mp_sym_frame_line(mp_symbolizer_t *sym, const mp_profile_t *prof,
    uint64_t pc, bool leaf, const char **file, unsigned *line);
/* The allocator library holding PC (a shared library defining malloc),
 * or NULL.  Its frames at the inner end of a stack are the allocator's own
 * even when they cannot be named (jemalloc's libjemalloc.so.2 is
 * stripped: only its exported functions have names). */
const mp_elf_t *mp_sym_in_alloc_lib(mp_symbolizer_t *sym,
    const mp_profile_t *prof, uint64_t pc);
/* For `info`: the file used for MAPPING (PROGRAM may replace it), or NULL if
 * it cannot be read (*why says why), with its build ID (hex, "" if none),
 * symbol count and the debug file used (or NULL). */
const mp_elf_t *mp_sym_file(mp_symbolizer_t *sym, const mp_mapping_t *map,
    const char **why);
const char *mp_elf_path(const mp_elf_t *elf);
const char *mp_elf_build_id(const mp_elf_t *elf);
size_t mp_elf_nsyms(const mp_elf_t *elf);
const char *mp_elf_debug_file(const mp_elf_t *elf);

/* ---- mp_output.c: merged stacks and the reports */
typedef struct {
	uint32_t *frames;	/* name ids, root first */
	uint32_t nframes;
	double val[MP_NVALUES];
	int64_t v;		/* val[selected], rounded */
} mp_sample_t;

typedef struct mp_report mp_report_t;
mp_report_t *mp_report_new(void);
void mp_report_free(mp_report_t *rep);
uint32_t mp_report_intern(mp_report_t *rep, const char *name);
const char *mp_report_name(const mp_report_t *rep, uint32_t id);
size_t mp_report_nnames(const mp_report_t *rep);
/* Renames name ID (demangling): only after the last mp_report_intern. */
void mp_report_rename(mp_report_t *rep, uint32_t id, const char *name);
/* Adds SIGN times VAL to the stack FRAMES (root first). */
void mp_report_add(mp_report_t *rep, const uint32_t *frames, uint32_t n,
    const double *val, int sign);
/* Keeps the stacks passing FOCUS/IGNORE (compiled regexes or NULL), rounds
 * the selected value WHICH, drops zeros.  No mp_report_add after it.
 * False (with one error line) if the merged stacks' positive or negative
 * sums do not fit in int64_t: profiles that cannot be real. */
bool mp_report_finish(mp_report_t *rep, int which, const void *focus,
    const void *ignore);
size_t mp_report_samples(const mp_report_t *rep, const mp_sample_t **out);
int64_t mp_report_total(const mp_report_t *rep);

void mp_out_top(const mp_report_t *rep, FILE *f, long limit, bool bytes);
/* top --tag KEY: one row per name id marked in IS_TAG (the root frames
 * "KEY=VALUE" the samples were grouped under), largest first. */
void mp_out_top_tag(const mp_report_t *rep, FILE *f, long limit, bool bytes,
    const bool *is_tag, const char *key);
void mp_out_collapsed(const mp_report_t *rep, FILE *f);
void mp_out_leaks(const mp_report_t *rep, FILE *f, long limit);
bool mp_out_flamegraph(const mp_report_t *rep, FILE *f, const char *title,
    bool bytes);
void mp_out_dot(const mp_report_t *rep, FILE *f, long limit, bool bytes);

#endif /* MALLOC_PROF_BIN_H */
