/*
 * test/unit/prof_recent_json.h - what the unit tests reading
 * prof_recent_dump's JSON share (prof_cost.c, prof_paths.c): a growing
 * buffer the dump writes into, and a test of whether one record's trace
 * array holds a return address into a site function's code.  Include it
 * after test_util.h.
 */
#ifndef TEST_UNIT_PROF_RECENT_JSON_H
#define TEST_UNIT_PROF_RECENT_JSON_H

typedef struct {
	char *buf;
	size_t len, cap;
} json_t;

/* prof_recent_dump's writer: appends to the json_t at opaque. */
static void json_write(void *opaque, const char *s) {
	json_t *j = opaque;
	size_t n = strlen(s);
	if (j->len + n + 1 > j->cap) {
		size_t cap = (j->len + n + 1) * 2;
		char *b = realloc(j->buf, cap);
		assert_non_null(b);
		j->buf = b;
		j->cap = cap;
	}
	memcpy(j->buf + j->len, s, n + 1);
	j->len += n;
}

/* Whether the array at key of the record [rec, rec_end) holds an
 * address in (lo, hi): a return address into the site at lo. */
static bool trace_has(const char *rec, const char *rec_end, const char *key,
    uintptr_t lo, uintptr_t hi) {
	const char *t = strstr(rec, key);
	if (t == NULL || t > rec_end)
		return false;
	const char *end = strchr(t, ']');
	for (const char *q = strchr(t, '['); q != NULL && q < end;
	    q = strchr(q + 1, '"')) {
		if (q[1] == '0' && q[2] == 'x') {
			uintptr_t a = (uintptr_t)strtoull(q + 1, NULL, 16);
			if (a > lo && a < hi)
				return true;
		}
	}
	return false;
}

#endif
