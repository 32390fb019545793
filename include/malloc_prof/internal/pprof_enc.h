/*
 * pprof_enc.h: the generic half of the pprof writer (src/prof/pprof_enc.c),
 * shared by the library (src/prof/prof_pprof.c) and the malloc-prof tool
 * (bin/mp_pprof.c): growable byte buffers, protobuf field encoding,
 * CRC-32 and a gzip writer with its own deflate.
 *
 * Nothing here knows about the allocator: memory comes from the caller's
 * allocate/free pair (the library passes base_malloc/base_free, which do
 * not recurse into the allocator; the tool passes malloc/free), files
 * are written with write(2).  Self-contained: only the C library's
 * headers are included, so the tool compiles it without the library's.
 * A `bool` return means "true on error".
 */
#ifndef MP_INTERNAL_PPROF_ENC_H
#define MP_INTERNAL_PPROF_ENC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Where buffers come from.  free_fn gets the size that was allocated
 * (base_free needs it). */
typedef struct pprof_mem_s {
	void *(*alloc_fn)(size_t size);
	void (*free_fn)(void *p, size_t size);
	size_t max_bytes;        /* no buffer grows past this */
} pprof_mem_t;

/* A growable byte buffer.  `oom` sticks: once set (allocation failed or
 * max_bytes reached), appends are no-ops and the output is abandoned. */
typedef struct pprof_buf_s {
	uint8_t *p;
	size_t len, cap;
	bool oom;
	const pprof_mem_t *mem;
} pprof_buf_t;

/* Room for `more` bytes after len; true (and oom set) if there is none. */
bool pprof_buf_reserve(pprof_buf_t *b, size_t more);
void pprof_buf_put(pprof_buf_t *b, const void *data, size_t len);
/* Gives the memory back; the buffer is empty and usable again. */
void pprof_buf_release(pprof_buf_t *b);

/* v as a protobuf base-128 varint into out (room for 10 bytes); its
 * length. */
size_t pprof_pb_varint(uint8_t *out, uint64_t v);
void pprof_pb_raw_varint(pprof_buf_t *b, uint64_t v);
/* A varint field; zero is the default and is left out (proto3). */
void pprof_pb_uint(pprof_buf_t *b, unsigned field, uint64_t v);
void pprof_pb_bytes(pprof_buf_t *b, unsigned field, const void *data,
    size_t len);

/* CRC-32 (ISO 3309, gzip's) of data, continuing from crc (0 to start). */
uint32_t pprof_crc32(uint32_t crc, const void *data, size_t len);

/* The gzip writer's tables (hash chains, output buffer), allocated at
 * the first pprof_gzip_write and kept for the next ones. */
typedef struct pprof_gzip_s {
	const pprof_mem_t *mem;
	uint32_t *head;
	uint32_t *prev;
	uint8_t *out;
} pprof_gzip_t;

/* Compresses len bytes of data to fd: gzip header, one deflate block
 * (LZ77 matches, fixed Huffman codes), CRC-32 and size trailer.  true on
 * error with *errp set (an errno, or ENOMEM). */
bool pprof_gzip_write(pprof_gzip_t *z, int fd, const void *data, size_t len,
    int *errp);
void pprof_gzip_release(pprof_gzip_t *z);

#endif /* MP_INTERNAL_PPROF_ENC_H */
