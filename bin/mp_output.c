/*
 * bin/mp_output.c - what malloc-prof prints: the merged, symbolized stacks
 * of one or more profiles (minus a base), and the reports made from them:
 * top (jeprof --text's table), collapsed stacks, the leak list, a flame
 * graph (self-contained SVG) and a Graphviz call graph.
 *
 * Stacks are merged by their function names, not their addresses, so that
 * profiles of different runs (ASLR moves every address) can be added and
 * subtracted.  Each merged stack's value is rounded once, in
 * mp_report_finish, and every report sums those integers: `collapsed`,
 * `top` and the flame graph always agree on the total.
 *
 * Every sum a report makes (a row's flat or cum, the running sum, a flame
 * graph node, a call graph edge, the total) adds some merged stacks'
 * values: it lies between the sum of the negative ones and that of the
 * positive ones.  mp_report_finish checks those two fit in int64_t, so
 * none of the others can overflow (mp_sum would stop at the limit).
 */
#include "malloc-prof.h"

#include <math.h>
#include <regex.h>
#include <stdlib.h>
#include <string.h>

/* ---- a small open-addressing index: slots hold entry numbers; callers
 * give the hash and compare the entries themselves. */
typedef struct {
	uint32_t *slot;		/* UINT32_MAX: empty */
	uint64_t *hash;
	size_t cap, n;		/* cap is a power of two */
} mp_index_t;

static uint64_t mp_hash_bytes(const void *p, size_t n, uint64_t h) {
	const unsigned char *s = p;
	for (size_t i = 0; i < n; i++)	/* FNV-1a */
		h = (h ^ s[i]) * 0x100000001b3ull;
	return h;
}

static void mp_index_grow(mp_index_t *ix) {
	size_t cap = ix->cap ? 2 * ix->cap : 1024;
	uint32_t *slot = mp_xmalloc(cap * sizeof(*slot));
	uint64_t *hash = mp_xmalloc(cap * sizeof(*hash));
	memset(slot, 0xff, cap * sizeof(*slot));
	for (size_t i = 0; i < ix->cap; i++) {
		if (ix->slot[i] == UINT32_MAX)
			continue;
		size_t j = ix->hash[i] & (cap - 1);
		while (slot[j] != UINT32_MAX)
			j = (j + 1) & (cap - 1);
		slot[j] = ix->slot[i];
		hash[j] = ix->hash[i];
	}
	free(ix->slot);
	free(ix->hash);
	ix->slot = slot;
	ix->hash = hash;
	ix->cap = cap;
}

/* The first slot for HASH: probe with mp_index_next until the entry
 * matches or the slot is empty (then mp_index_set may fill it). */
static size_t mp_index_first(mp_index_t *ix, uint64_t hash) {
	if (2 * (ix->n + 1) > ix->cap)
		mp_index_grow(ix);
	return hash & (ix->cap - 1);
}

static size_t mp_index_next(const mp_index_t *ix, size_t i) {
	return (i + 1) & (ix->cap - 1);
}

static void mp_index_set(mp_index_t *ix, size_t i, uint64_t hash,
    uint32_t entry) {
	ix->slot[i] = entry;
	ix->hash[i] = hash;
	ix->n++;
}

static void mp_index_free(mp_index_t *ix) {
	free(ix->slot);
	free(ix->hash);
}

/* ---- the report */
struct mp_report {
	char **names;
	size_t nnames, cap_names;
	mp_index_t name_ix;
	mp_sample_t *samples;
	size_t nsamples, cap_samples;
	mp_index_t sample_ix;
	int which;
	int64_t total;
};

mp_report_t *mp_report_new(void) {
	return mp_xcalloc(1, sizeof(mp_report_t));
}

void mp_report_free(mp_report_t *rep) {
	for (size_t i = 0; i < rep->nnames; i++)
		free(rep->names[i]);
	for (size_t i = 0; i < rep->nsamples; i++)
		free(rep->samples[i].frames);
	free(rep->names);
	free(rep->samples);
	mp_index_free(&rep->name_ix);
	mp_index_free(&rep->sample_ix);
	free(rep);
}

uint32_t mp_report_intern(mp_report_t *rep, const char *name) {
	size_t len = strlen(name);
	uint64_t h = mp_hash_bytes(name, len, 0xcbf29ce484222325ull);
	size_t i = mp_index_first(&rep->name_ix, h);
	for (; rep->name_ix.slot[i] != UINT32_MAX;
	    i = mp_index_next(&rep->name_ix, i)) {
		uint32_t id = rep->name_ix.slot[i];
		if (rep->name_ix.hash[i] == h && strcmp(rep->names[id], name) == 0)
			return id;
	}
	if (rep->nnames == rep->cap_names) {
		rep->cap_names = rep->cap_names ? 2 * rep->cap_names : 1024;
		rep->names = mp_xrealloc(rep->names,
		    rep->cap_names * sizeof(*rep->names));
	}
	uint32_t id = (uint32_t)rep->nnames++;
	rep->names[id] = mp_xstrdup(name);
	mp_index_set(&rep->name_ix, i, h, id);
	return id;
}

const char *mp_report_name(const mp_report_t *rep, uint32_t id) {
	return rep->names[id];
}

size_t mp_report_nnames(const mp_report_t *rep) {
	return rep->nnames;
}

void mp_report_rename(mp_report_t *rep, uint32_t id, const char *name) {
	free(rep->names[id]);
	rep->names[id] = mp_xstrdup(name);
}

void mp_report_add(mp_report_t *rep, const uint32_t *frames, uint32_t n,
    const double *val, int sign) {
	uint64_t h = mp_hash_bytes(frames, n * sizeof(*frames),
	    0xcbf29ce484222325ull ^ n);
	size_t i = mp_index_first(&rep->sample_ix, h);
	mp_sample_t *s = NULL;
	for (; rep->sample_ix.slot[i] != UINT32_MAX;
	    i = mp_index_next(&rep->sample_ix, i)) {
		mp_sample_t *t = &rep->samples[rep->sample_ix.slot[i]];
		if (rep->sample_ix.hash[i] == h && t->nframes == n &&
		    memcmp(t->frames, frames, n * sizeof(*frames)) == 0) {
			s = t;
			break;
		}
	}
	if (s == NULL) {
		if (rep->nsamples == rep->cap_samples) {
			rep->cap_samples = rep->cap_samples ?
			    2 * rep->cap_samples : 1024;
			rep->samples = mp_xrealloc(rep->samples,
			    rep->cap_samples * sizeof(*rep->samples));
		}
		uint32_t id = (uint32_t)rep->nsamples++;
		s = &rep->samples[id];
		memset(s, 0, sizeof(*s));
		s->frames = mp_xmalloc((n ? n : 1) * sizeof(*frames));
		memcpy(s->frames, frames, n * sizeof(*frames));
		s->nframes = n;
		mp_index_set(&rep->sample_ix, i, h, id);
	}
	/* In double: every profile's values are within MP_COUNT_MAX, far
	 * from its limits; mp_report_finish checks them before rounding. */
	for (int k = 0; k < MP_NVALUES; k++)
		s->val[k] += sign * val[k];
}

static bool mp_stack_matches(const mp_report_t *rep, const mp_sample_t *s,
    const regex_t *re) {
	for (uint32_t i = 0; i < s->nframes; i++)
		if (regexec(re, rep->names[s->frames[i]], 0, NULL, 0) == 0)
			return true;
	return false;
}

/* Whether the merged stacks' values round to integers whose positive and
 * negative sums, for each of the four values, fit in int64_t. */
static bool mp_report_fits(const mp_report_t *rep) {
	for (int k = 0; k < MP_NVALUES; k++) {
		int64_t pos = 0, neg = 0;
		for (size_t i = 0; i < rep->nsamples; i++) {
			double x = rep->samples[i].val[k];
			/* Written so that NaN fails too; llround is defined
			 * within the bound. */
			if (!(fabs(x) < 0x1p63))
				return false;
			int64_t v = llround(x), *sum = v > 0 ? &pos : &neg;
			if (__builtin_add_overflow(*sum, v, sum))
				return false;
		}
	}
	return true;
}

bool mp_report_finish(mp_report_t *rep, int which, const void *focus,
    const void *ignore) {
	size_t n = 0;
	rep->which = which;
	rep->total = 0;
	/* One profile's values are within MP_COUNT_MAX and two profiles'
	 * (a diff) fit; more profiles added up may not. */
	if (!mp_report_fits(rep)) {
		mp_err("the stacks of the profiles add up to more than 2^63 - 1 "
		    "objects or bytes, which cannot be real: one of them is "
		    "damaged; read them one at a time to find it");
		return false;
	}
	for (size_t i = 0; i < rep->nsamples; i++) {
		mp_sample_t *s = &rep->samples[i];
		s->v = llround(s->val[which]);
		bool keep = s->v != 0 &&
		    (focus == NULL || mp_stack_matches(rep, s, focus)) &&
		    (ignore == NULL || !mp_stack_matches(rep, s, ignore));
		if (!keep) {
			free(s->frames);
			continue;
		}
		rep->samples[n++] = *s;
		rep->total = mp_sum(rep->total, s->v);
	}
	rep->nsamples = n;
	/* The index points at old positions: no more additions. */
	mp_index_free(&rep->sample_ix);
	memset(&rep->sample_ix, 0, sizeof(rep->sample_ix));
	return true;
}

size_t mp_report_samples(const mp_report_t *rep, const mp_sample_t **out) {
	*out = rep->samples;
	return rep->nsamples;
}

int64_t mp_report_total(const mp_report_t *rep) {
	return rep->total;
}

/* ---- top */
typedef struct {
	uint32_t id;
	int64_t flat, cum;
} mp_row_t;

static const mp_report_t *mp_sort_rep;

static int mp_row_cmp(const void *a, const void *b) {
	const mp_row_t *x = a, *y = b;
	/* jeprof's order: flat, then cumulative, then the name. */
	if (x->flat != y->flat)
		return x->flat > y->flat ? -1 : 1;
	if (x->cum != y->cum)
		return x->cum > y->cum ? -1 : 1;
	return strcmp(mp_sort_rep->names[x->id], mp_sort_rep->names[y->id]);
}

/* Flat and cumulative values per function; a function is counted once per
 * stack in cum however often it recurses. */
static mp_row_t *mp_rows(const mp_report_t *rep, size_t *nrows) {
	mp_row_t *rows = mp_xcalloc(rep->nnames ? rep->nnames : 1,
	    sizeof(*rows));
	uint32_t *seen = mp_xmalloc((rep->nnames ? rep->nnames : 1) *
	    sizeof(*seen));
	memset(seen, 0xff, rep->nnames * sizeof(*seen));
	for (size_t i = 0; i < rep->nnames; i++)
		rows[i].id = (uint32_t)i;
	for (size_t i = 0; i < rep->nsamples; i++) {
		const mp_sample_t *s = &rep->samples[i];
		if (s->nframes == 0)
			continue;
		mp_row_t *leaf = &rows[s->frames[s->nframes - 1]];
		leaf->flat = mp_sum(leaf->flat, s->v);
		for (uint32_t k = 0; k < s->nframes; k++) {
			uint32_t f = s->frames[k];
			if (seen[f] == (uint32_t)i)
				continue;
			seen[f] = (uint32_t)i;
			rows[f].cum = mp_sum(rows[f].cum, s->v);
		}
	}
	free(seen);
	size_t n = 0;
	for (size_t i = 0; i < rep->nnames; i++)
		if (rows[i].flat != 0 || rows[i].cum != 0)
			rows[n++] = rows[i];
	mp_sort_rep = rep;
	qsort(rows, n, sizeof(*rows), mp_row_cmp);
	*nrows = n;
	return rows;
}

static double mp_pct(int64_t v, int64_t total) {
	return total == 0 ? 0.0 : 100.0 * (double)v / (double)total;
}

void mp_out_top(const mp_report_t *rep, FILE *f, long limit, bool bytes) {
	size_t n;
	mp_row_t *rows = mp_rows(rep, &n);
	fprintf(f, "Total: %" PRId64 " %s\n", rep->total,
	    bytes ? "B" : "objects");
	int64_t sum = 0;
	for (size_t i = 0; i < n && (limit < 0 || (long)i < limit); i++) {
		sum = mp_sum(sum, rows[i].flat);
		char a[16], b[16], c[16];
		snprintf(a, sizeof(a), "%.1f%%", mp_pct(rows[i].flat, rep->total));
		snprintf(b, sizeof(b), "%.1f%%", mp_pct(sum, rep->total));
		snprintf(c, sizeof(c), "%.1f%%", mp_pct(rows[i].cum, rep->total));
		fprintf(f, "%8" PRId64 " %6s %6s %8" PRId64 " %6s %s\n",
		    rows[i].flat, a, b, rows[i].cum, c,
		    rep->names[rows[i].id]);
	}
	free(rows);
}

/* top --tag KEY: the groups (root frames KEY=VALUE), by their totals,
 * largest first, then by name. */
static int mp_tag_row_cmp(const void *a, const void *b) {
	const mp_row_t *x = a, *y = b;
	if (x->cum != y->cum)
		return x->cum > y->cum ? -1 : 1;
	return strcmp(mp_sort_rep->names[x->id], mp_sort_rep->names[y->id]);
}

void mp_out_top_tag(const mp_report_t *rep, FILE *f, long limit, bool bytes,
    const bool *is_tag, const char *key) {
	size_t n, kept = 0;
	mp_row_t *rows = mp_rows(rep, &n);
	for (size_t i = 0; i < n; i++)
		if (is_tag[rows[i].id])
			rows[kept++] = rows[i];
	mp_sort_rep = rep;
	qsort(rows, kept, sizeof(*rows), mp_tag_row_cmp);
	fprintf(f, "Total: %" PRId64 " %s, by label %s\n", rep->total,
	    bytes ? "B" : "objects", key);
	for (size_t i = 0; i < kept && (limit < 0 || (long)i < limit); i++) {
		char a[16];
		snprintf(a, sizeof(a), "%.1f%%", mp_pct(rows[i].cum,
		    rep->total));
		fprintf(f, "%8" PRId64 " %6s %s\n", rows[i].cum, a,
		    rep->names[rows[i].id]);
	}
	free(rows);
}

/* ---- collapsed: "root;...;leaf value", as flamegraph.pl reads */
static int mp_sample_name_cmp(const void *a, const void *b) {
	const mp_sample_t *x = a, *y = b;
	for (uint32_t i = 0; i < x->nframes && i < y->nframes; i++) {
		int c = strcmp(mp_sort_rep->names[x->frames[i]],
		    mp_sort_rep->names[y->frames[i]]);
		if (c != 0)
			return c;
	}
	return (x->nframes > y->nframes) - (x->nframes < y->nframes);
}

void mp_out_collapsed(const mp_report_t *rep, FILE *f) {
	mp_sample_t *s = mp_xmalloc((rep->nsamples + 1) * sizeof(*s));
	if (rep->nsamples > 0)
		memcpy(s, rep->samples, rep->nsamples * sizeof(*s));
	mp_sort_rep = rep;
	qsort(s, rep->nsamples, sizeof(*s), mp_sample_name_cmp);
	for (size_t i = 0; i < rep->nsamples; i++) {
		for (uint32_t k = 0; k < s[i].nframes; k++)
			fprintf(f, "%s%s", k ? ";" : "",
			    rep->names[s[i].frames[k]]);
		fprintf(f, " %" PRId64 "\n", s[i].v);
	}
	free(s);
}

/* ---- leaks: each stack still holding memory, largest first */
static int mp_sample_v_cmp(const void *a, const void *b) {
	const mp_sample_t *x = a, *y = b;
	if (x->v != y->v)
		return x->v > y->v ? -1 : 1;
	return mp_sample_name_cmp(a, b);
}

void mp_out_leaks(const mp_report_t *rep, FILE *f, long limit) {
	mp_sample_t *s = mp_xmalloc((rep->nsamples + 1) * sizeof(*s));
	if (rep->nsamples > 0)
		memcpy(s, rep->samples, rep->nsamples * sizeof(*s));
	mp_sort_rep = rep;
	qsort(s, rep->nsamples, sizeof(*s), mp_sample_v_cmp);
	for (size_t i = 0; i < rep->nsamples && (limit < 0 || (long)i < limit);
	    i++) {
		if (s[i].v <= 0)
			continue;
		fprintf(f, "%" PRId64 " bytes in %lld objects (%.1f%%) "
		    "allocated at:\n", s[i].v,
		    llround(s[i].val[MP_INUSE_OBJECTS]),
		    mp_pct(s[i].v, rep->total));
		for (uint32_t k = s[i].nframes; k-- > 0;)
			fprintf(f, "    %s\n", rep->names[s[i].frames[k]]);
	}
	free(s);
}

/* ---- flame graph */
typedef struct {
	uint32_t name, parent, child, next;	/* UINT32_MAX: none */
	uint32_t depth;
	int64_t value, x;	/* x: offset of the node's left edge */
} mp_node_t;

static void mp_xml(FILE *f, const char *s) {
	for (; *s; s++) {
		switch (*s) {
		case '&': fputs("&amp;", f); break;
		case '<': fputs("&lt;", f); break;
		case '>': fputs("&gt;", f); break;
		case '"': fputs("&quot;", f); break;
		case '\'': fputs("&apos;", f); break;
		default:
			/* Control characters are not allowed in XML 1.0. */
			fputc((unsigned char)*s < 0x20 ? '?' : *s, f);
		}
	}
}

/* The interactive part, kept small: hover shows details, a click zooms
 * into a frame (its ancestors stretch, the rest hides), "Search" colors
 * the frames matching a regular expression and shows their share. */
static const char mp_flame_js[] =
"var W=+document.documentElement.getAttribute('width'),P=10,all=null;\n"
"var fr=document.getElementById('frames').children,det=document.getElementById('details');\n"
"var mat=document.getElementById('matched'),unz=document.getElementById('unzoom');\n"
"function g(e,a){return +e.getAttribute(a);}\n"
"function label(e){var r=e.querySelector('rect'),t=e.querySelector('text'),w=g(r,'width'),n=e.getAttribute('data-name'),c=Math.floor((w-6)/7);\n"
" t.setAttribute('x',g(r,'x')+3);t.textContent=c<3?'':(n.length<=c?n:n.substr(0,c-2)+'..');}\n"
"function place(e,x,w){var r=e.querySelector('rect');r.setAttribute('x',x);r.setAttribute('width',Math.max(w,0));label(e);}\n"
"function zoom(e){var x0=g(e,'data-x'),w0=g(e,'data-w'),d0=g(e,'data-d'),s=(W-2*P)/w0;\n"
" for(var i=0;i<fr.length;i++){var f=fr[i],x=g(f,'data-x'),w=g(f,'data-w'),d=g(f,'data-d');\n"
"  if(d<d0&&x<=x0&&x+w>=x0+w0){f.style.display='';place(f,P,W-2*P);}\n"
"  else if(d>=d0&&x>=x0&&x+w<=x0+w0){f.style.display='';place(f,P+(x-x0)*s,w*s);}\n"
"  else f.style.display='none';}\n"
" unz.style.opacity=1;}\n"
"function unzoom(){if(all)zoom(all);unz.style.opacity=0;}\n"
"function search(){var t=prompt('Search frames (regular expression):','');if(t===null)return;var re;\n"
" try{re=new RegExp(t);}catch(x){alert('bad expression: '+x);return;}\n"
" var m=[],tot=g(all,'data-w');for(var i=0;i<fr.length;i++){var f=fr[i],r=f.querySelector('rect'),n=f.getAttribute('data-name');\n"
"  if(t!==''&&re.test(n)){r.setAttribute('fill','rgb(230,0,230)');m.push(f);}else r.setAttribute('fill',r.getAttribute('data-fill'));}\n"
" m.sort(function(a,b){return g(a,'data-x')-g(b,'data-x')||g(b,'data-w')-g(a,'data-w');});\n"
" var sum=0,end=-1;for(var j=0;j<m.length;j++){var x=g(m[j],'data-x'),w=g(m[j],'data-w');if(x>=end){sum+=w;end=x+w;}}\n"
" mat.textContent=t===''?'':'Matched: '+(100*sum/tot).toFixed(1)+'%';}\n"
"for(var i=0;i<fr.length;i++){(function(f){if(g(f,'data-d')==0)all=f;\n"
" f.onmouseover=function(){det.textContent=f.querySelector('title').textContent;};\n"
" f.onmouseout=function(){det.textContent=' ';};f.onclick=function(){zoom(f);};label(f);})(fr[i]);}\n"
"unz.onclick=unzoom;document.getElementById('search').onclick=search;\n";

bool mp_out_flamegraph(const mp_report_t *rep, FILE *f, const char *title,
    bool bytes) {
	/* The tree of stacks, root "all" first; a node per distinct prefix.
	 * Only positive values can be drawn as widths. */
	size_t cap = 1024, n = 1;
	mp_node_t *node = mp_xmalloc(cap * sizeof(*node));
	node[0] = (mp_node_t){ UINT32_MAX, UINT32_MAX, UINT32_MAX, UINT32_MAX,
		0, 0, 0 };
	mp_index_t ix = { 0 };
	uint32_t maxdepth = 0;
	int64_t total = 0;
	for (size_t i = 0; i < rep->nsamples; i++) {
		const mp_sample_t *s = &rep->samples[i];
		if (s->v <= 0)
			continue;
		total = mp_sum(total, s->v);
		uint32_t cur = 0;
		node[0].value = mp_sum(node[0].value, s->v);
		for (uint32_t k = 0; k < s->nframes; k++) {
			uint64_t key = ((uint64_t)cur << 32) | s->frames[k];
			/* The high half of the product mixes both the parent
			 * and the name into the low bits the index uses. */
			uint64_t h = (key * 0x9e3779b97f4a7c15ull) >> 32 ^ key;
			h *= 0xff51afd7ed558ccdull;
			h ^= h >> 33;
			size_t j = mp_index_first(&ix, h);
			uint32_t found = UINT32_MAX;
			for (; ix.slot[j] != UINT32_MAX; j = mp_index_next(&ix, j)) {
				mp_node_t *c = &node[ix.slot[j]];
				if (c->parent == cur && c->name == s->frames[k]) {
					found = ix.slot[j];
					break;
				}
			}
			if (found == UINT32_MAX) {
				if (n == cap) {
					cap *= 2;
					node = mp_xrealloc(node, cap * sizeof(*node));
				}
				found = (uint32_t)n++;
				node[found] = (mp_node_t){ s->frames[k], cur,
					UINT32_MAX, node[cur].child,
					node[cur].depth + 1, 0, 0 };
				node[cur].child = found;
				mp_index_set(&ix, j, h, found);
				if (node[found].depth > maxdepth)
					maxdepth = node[found].depth;
			}
			node[found].value = mp_sum(node[found].value, s->v);
			cur = found;
		}
	}
	mp_index_free(&ix);
	/* Left edges: parents come before children in the array, so one
	 * pass places every node after its parent. */
	int64_t *next_x = mp_xcalloc(n, sizeof(*next_x));
	for (size_t i = 1; i < n; i++) {
		uint32_t p = node[i].parent;
		node[i].x = mp_sum(node[p].x, next_x[p]);
		next_x[p] = mp_sum(next_x[p], node[i].value);
	}
	free(next_x);

	const int width = 1200, pad = 10, fh = 16, top = 50;
	int height = top + (int)(maxdepth + 1) * fh + 30;
	double scale = total > 0 ? (double)(width - 2 * pad) / (double)total : 0;
	fprintf(f, "<?xml version=\"1.0\" standalone=\"no\"?>\n"
	    "<svg version=\"1.1\" width=\"%d\" height=\"%d\" "
	    "viewBox=\"0 0 %d %d\" xmlns=\"http://www.w3.org/2000/svg\">\n",
	    width, height, width, height);
	fprintf(f, "<style>text{font-family:Verdana,sans-serif;font-size:12px}"
	    "#frames g{cursor:pointer}#frames g:hover rect{stroke:black;"
	    "stroke-width:0.5}</style>\n");
	fprintf(f, "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" "
	    "fill=\"rgb(240,240,230)\"/>\n", width, height);
	fprintf(f, "<text x=\"%d\" y=\"24\" text-anchor=\"middle\" "
	    "style=\"font-size:17px\">", width / 2);
	mp_xml(f, title);
	fprintf(f, "</text>\n<text id=\"unzoom\" x=\"%d\" y=\"24\" "
	    "style=\"opacity:0;cursor:pointer\">Reset Zoom</text>\n", pad);
	fprintf(f, "<text id=\"search\" x=\"%d\" y=\"24\" text-anchor=\"end\" "
	    "style=\"cursor:pointer\">Search</text>\n", width - pad);
	fprintf(f, "<text id=\"matched\" x=\"%d\" y=\"%d\" "
	    "text-anchor=\"end\"> </text>\n", width - pad, height - 10);
	fprintf(f, "<text id=\"details\" x=\"%d\" y=\"%d\"> </text>\n", pad,
	    height - 10);
	fprintf(f, "<g id=\"frames\">\n");
	for (size_t i = 0; i < n; i++) {
		const char *name = i == 0 ? "all" : rep->names[node[i].name];
		uint64_t h = mp_hash_bytes(name, strlen(name),
		    0xcbf29ce484222325ull);
		int r = 205 + (int)(h % 50), g = (int)((h >> 8) % 230),
		    b = (int)((h >> 16) % 55);
		double x = pad + (double)node[i].x * scale;
		double w = (double)node[i].value * scale;
		int y = top + (int)(maxdepth - node[i].depth) * fh;
		fprintf(f, "<g data-name=\"");
		mp_xml(f, name);
		fprintf(f, "\" data-x=\"%" PRId64 "\" data-w=\"%" PRId64 "\" "
		    "data-d=\"%u\"><title>", node[i].x, node[i].value,
		    node[i].depth);
		mp_xml(f, name);
		fprintf(f, " (%" PRId64 " %s, %.2f%%)</title>", node[i].value,
		    bytes ? "bytes" : "objects", mp_pct(node[i].value, total));
		fprintf(f, "<rect x=\"%.2f\" y=\"%d\" width=\"%.2f\" "
		    "height=\"%d\" rx=\"2\" fill=\"rgb(%d,%d,%d)\" "
		    "data-fill=\"rgb(%d,%d,%d)\"/><text x=\"%.2f\" y=\"%d\">",
		    x, y, w, fh - 1, r, g, b, r, g, b, x + 3, y + fh - 4);
		/* The label as it fits (about 7 pixels a character), also
		 * for viewers that do not run the script (which redoes it
		 * when zooming). */
		long fit = (long)((w - 6) / 7);
		size_t len = strlen(name);
		if (fit >= 3) {
			char label[256];
			if ((size_t)fit >= len && len < sizeof(label)) {
				snprintf(label, sizeof(label), "%s", name);
			} else {
				if (fit > (long)sizeof(label) - 3)
					fit = (long)sizeof(label) - 3;
				snprintf(label, sizeof(label), "%.*s..",
				    (int)(fit - 2), name);
			}
			mp_xml(f, label);
		}
		fprintf(f, "</text></g>\n");
	}
	fprintf(f, "</g>\n<script type=\"text/ecmascript\"><![CDATA[\n%s]]>"
	    "</script>\n</svg>\n", mp_flame_js);
	free(node);
	return true;
}

/* ---- Graphviz call graph */
typedef struct {
	uint32_t from, to;
	int64_t value;
} mp_edge_t;

static int mp_edge_cmp(const void *a, const void *b) {
	const mp_edge_t *x = a, *y = b;
	if (x->from != y->from)
		return x->from < y->from ? -1 : 1;
	return (x->to > y->to) - (x->to < y->to);
}

static int mp_row_cum_cmp(const void *a, const void *b) {
	const mp_row_t *x = a, *y = b;
	if (x->cum != y->cum)
		return x->cum > y->cum ? -1 : 1;
	return mp_row_cmp(a, b);
}

static void mp_dot_str(FILE *f, const char *s) {
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			fputc('\\', f);
		fputc(*s, f);
	}
}

void mp_out_dot(const mp_report_t *rep, FILE *f, long limit, bool bytes) {
	size_t nrows;
	mp_row_t *rows = mp_rows(rep, &nrows);
	qsort(rows, nrows, sizeof(*rows), mp_row_cum_cmp);
	if (limit >= 0 && (size_t)limit < nrows)
		nrows = (size_t)limit;
	/* Node number per name id, for the kept functions. */
	uint32_t *num = mp_xmalloc((rep->nnames + 1) * sizeof(*num));
	memset(num, 0xff, (rep->nnames + 1) * sizeof(*num));
	for (size_t i = 0; i < nrows; i++)
		num[rows[i].id] = (uint32_t)i;

	/* Edges caller -> callee, counted once per stack. */
	size_t nedges = 0, cap = 0;
	mp_edge_t *edges = NULL;
	for (size_t i = 0; i < rep->nsamples; i++) {
		const mp_sample_t *s = &rep->samples[i];
		size_t first = nedges;
		for (uint32_t k = 0; k + 1 < s->nframes; k++) {
			uint32_t a = num[s->frames[k]], b = num[s->frames[k + 1]];
			if (a == UINT32_MAX || b == UINT32_MAX || a == b)
				continue;
			bool dup = false;
			for (size_t j = first; j < nedges && !dup; j++)
				dup = edges[j].from == a && edges[j].to == b;
			if (dup)
				continue;
			if (nedges == cap) {
				cap = cap ? 2 * cap : 256;
				edges = mp_xrealloc(edges, cap * sizeof(*edges));
			}
			edges[nedges++] = (mp_edge_t){ a, b, s->v };
		}
	}
	if (nedges > 0)
		qsort(edges, nedges, sizeof(*edges), mp_edge_cmp);
	size_t m = 0;
	for (size_t i = 0; i < nedges; i++) {
		if (m > 0 && edges[m - 1].from == edges[i].from &&
		    edges[m - 1].to == edges[i].to)
			edges[m - 1].value = mp_sum(edges[m - 1].value,
			    edges[i].value);
		else
			edges[m++] = edges[i];
	}
	nedges = m;

	const char *unit = bytes ? "B" : "objects";
	int64_t maxflat = 1;
	for (size_t i = 0; i < nrows; i++)
		if (rows[i].flat > maxflat)
			maxflat = rows[i].flat;
	fprintf(f, "digraph \"malloc-prof\" {\n"
	    "node [shape=box, style=filled, fillcolor=\"#f8f8f0\", "
	    "fontname=\"Helvetica\"];\n");
	fprintf(f, "legend [shape=plaintext, style=\"\", label=\"Total: %"
	    PRId64 " %s\\lShowing %zu functions\\l\"];\n", rep->total, unit,
	    nrows);
	for (size_t i = 0; i < nrows; i++) {
		/* jeprof sizes nodes by their own (flat) share. */
		double fs = 10.0 + 30.0 * sqrt((double)(rows[i].flat > 0 ?
		    rows[i].flat : 0) / (double)maxflat);
		fprintf(f, "N%zu [label=\"", i);
		mp_dot_str(f, rep->names[rows[i].id]);
		fprintf(f, "\\n%" PRId64 " %s (%.1f%%)\\nof %" PRId64
		    " %s (%.1f%%)\", fontsize=%.0f];\n", rows[i].flat, unit,
		    mp_pct(rows[i].flat, rep->total), rows[i].cum, unit,
		    mp_pct(rows[i].cum, rep->total), fs);
	}
	for (size_t i = 0; i < nedges; i++) {
		double pw = 1.0 + 5.0 * fabs(mp_pct(edges[i].value, rep->total))
		    / 100.0;
		fprintf(f, "N%u -> N%u [label=\"%" PRId64 "\", penwidth=%.1f];\n",
		    edges[i].from, edges[i].to, edges[i].value, pw);
	}
	fprintf(f, "}\n");
	free(edges);
	free(num);
	free(rows);
}
