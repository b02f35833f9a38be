/* eng_safetensors: a validating reader for the safetensors format.
 *
 * Layout: 8-byte little-endian header length N, N bytes of JSON mapping
 * tensor names to {dtype, shape, data_offsets:[begin,end]} (offsets relative
 * to the byte after the header), then the data.  The file is memory-mapped
 * and never copied here; tensors point into the mapping.
 *
 * Everything in the header is hostile until checked: N within the file,
 * valid JSON object, known dtype strings, shapes of non-negative integers
 * whose element count times dtype size equals end-begin without overflow,
 * offsets inside the data area, no two tensors overlapping.  Tensors of
 * dtypes posy does not compute with (I64 position_ids buffers, etc.) are
 * parsed and kept with dtype ENG_DT_OTHER so that a model carrying them
 * still loads; asking for such a tensor as weights is an error.
 */
#ifndef ENG_SAFETENSORS_H
#define ENG_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>
#include "posy_err.h"
#include "posy_file.h"

typedef enum { ENG_DT_F32 = 0, ENG_DT_F16 = 1, ENG_DT_BF16 = 2, ENG_DT_OTHER = 3 } eng_dtype;

#define ENG_ST_MAX_DIMS 8

typedef struct eng_st_tensor {
    char *name;
    eng_dtype dtype;
    char dtype_name[8];          /* as written in the header, e.g. "I64" */
    int ndim;
    int64_t shape[ENG_ST_MAX_DIMS];
    int64_t numel;
    const void *data;            /* points into the mapping */
    size_t nbytes;
    int shard;                   /* index into eng_st_file.shard_paths (sharded models), else 0 */
} eng_st_tensor;

typedef struct eng_st_file {
    char path[1024];
    posy_map map;                /* unmapped by eng_st_close when owned */
    int owns_map;
    eng_st_tensor *tensors;      /* sorted by name */
    int n_tensors;
    /* Sharded models (eng_st_open_dir on a model.safetensors.index.json):
     * one mapping and one path per shard; `map` is then unused. */
    posy_map *shard_maps;
    char **shard_paths;
    int n_shards;
} eng_st_file;

/* Map and parse a file.  On error nothing stays open. */
int eng_st_open(eng_st_file *f, const char *path, posy_err *err);
/* Parse an in-memory buffer (used by tests and the fuzzer); `label` names it
 * in messages.  The buffer must outlive f. */
int eng_st_parse(eng_st_file *f, const void *buf, size_t size, const char *label, posy_err *err);
void eng_st_close(eng_st_file *f);

const eng_st_tensor *eng_st_find(const eng_st_file *f, const char *name);

/* Copy a tensor into fp32 (converting F16/BF16), checking that its shape is
 * exactly dims[0..ndim).  Error messages name the file and tensor. */
int eng_st_read_f32(const eng_st_file *f, const char *name, int ndim, const int64_t *dims,
                    float *dst, posy_err *err);

/* ---- additions ---------------------------------------------------------- */

/* Largest header accepted (the reference implementation's own bound). */
#define ENG_ST_MAX_HEADER 100000000ull

/* Open the weights of a model directory: `model.safetensors` when present,
 * else `model.safetensors.index.json` and every shard it names (all shards
 * are mapped; tensors from all of them are merged into one sorted table, a
 * name present in two shards or a weight_map entry missing from its shard
 * is an error).  Neither file present: an error that says so. */
int eng_st_open_dir(eng_st_file *f, const char *model_dir, posy_err *err);

/* The file a tensor lives in (the shard for sharded models), for messages. */
const char *eng_st_tensor_file(const eng_st_file *f, const eng_st_tensor *t);

/* Check that `t` is F32/F16/BF16 with shape exactly dims[0..ndim); the
 * message names the file and tensor. */
int eng_st_check(const eng_st_file *f, const eng_st_tensor *t, int ndim, const int64_t *dims,
                 posy_err *err);

/* Convert all t->numel elements to fp32 (t must be F32/F16/BF16; returns -1
 * otherwise).  Reads the mapping bytewise, so unaligned data is fine. */
int eng_st_tensor_to_f32(const eng_st_tensor *t, float *dst);
/* Elements [first, first + n) of t (flat, row-major) to fp32; -1 when the
 * range is outside t or its dtype is not F32 / F16 / BF16. */
int eng_st_tensor_range_to_f32(const eng_st_tensor *t, size_t first, size_t n, float *dst);

/* A model's fp32 weights over a checkpoint, built by a loader's walk run
 * twice: pass 0 (fill 0) finds, checks and counts every tensor, pass 1
 * (fill 1) assigns and converts.  Aligned F32 tensors are used in place;
 * everything else goes into ONE allocation `owned`, sized by pass 0, so
 * sizing and filling cannot disagree. */
typedef struct eng_st_view {
    const eng_st_file *st;
    const char *prefix;          /* the loader's tensor-name prefix ("model.", ...) */
    int fill;                    /* 0: find, check and count; 1: assign and convert */
    float *owned;
    size_t used;                 /* floats of `owned` counted (pass 0) or written (pass 1) */
    posy_err *err;
} eng_st_view;

typedef int (*eng_st_walk_fn)(eng_st_view *v, void *arg);

/* Run walk(v, arg) for both passes around allocating *owned (*owned_floats
 * floats, left NULL/0 when nothing needs converting).  Returns 0 or the
 * first error (the walk's, or out of memory); on error the caller frees
 * *owned with the rest of its weights. */
int eng_st_view_build(eng_st_view *v, eng_st_walk_fn walk, void *arg, float **owned, size_t *owned_floats);

/* `t` (already found and checked): in place when it is aligned F32, else
 * counted / converted into owned.  *dst is set in pass 1 only. */
void eng_st_view_take(eng_st_view *v, const eng_st_tensor *t, const float **dst);

/* `t` counted / converted to the end of owned (pieces of a stack); in pass
 * 1 the file's mapped pages of t are then given back (a private read-only
 * mapping: read again, they fault back in), so a converted checkpoint is
 * not held twice. */
void eng_st_view_append(eng_st_view *v, const eng_st_tensor *t);

/* Elements [first, first + n) of `t` (checked by the caller: inside it)
 * counted / converted to the end of owned: a slice of a fused tensor
 * (DeBERTa v1's per-head Q|K|V rows).  The pages stay mapped until
 * eng_st_view_release. */
void eng_st_view_append_range(eng_st_view *v, const eng_st_tensor *t, size_t first, size_t n);

/* In pass 1: t's mapped pages given back, as eng_st_view_append does, once
 * every slice of it has been appended. */
void eng_st_view_release(eng_st_view *v, const eng_st_tensor *t);

/* n zeros counted / written to the end of owned: a bias a checkpoint
 * does not have (DeBERTa v1's key projection). */
void eng_st_view_append_zeros(eng_st_view *v, size_t n);

/* For a backend that has copied the n floats at *p into its own layout and
 * will not read them again: the whole pages they cover go back to the
 * kernel (pages shared with a neighbouring tensor stay).
 *   - inside owned (owned_floats floats: converted or stacked by the
 *     loader): those pages would read as zeros, so *p becomes NULL, and
 *     nothing can read them by mistake; free(owned) stays valid;
 *   - inside one of f's own mappings (an F32 tensor used in place): the
 *     mapping is private and read-only, so a later read faults the file
 *     back in; *p stays;
 *   - anywhere else (a buffer given to eng_st_parse): left alone.
 * Returns the bytes given back. */
size_t eng_st_release(const eng_st_file *f, float *owned, size_t owned_floats, const float **p, size_t n);


/* IEEE half and bfloat16 (raw bits) to float, exact. */
float eng_f16_to_f32(uint16_t h);
float eng_bf16_to_f32(uint16_t h);

#endif
