/* kiln — a lazy-tensor deep-learning runtime in C.
 *
 * Umbrella header: include this one file.
 *
 * ───────────────────────── Ownership and lifetimes ─────────────────────────
 * 1. kiln_tensor is a small value handle {index, generation}. Copy it freely.
 *    A handle whose tensor was released is "stale": every function that takes
 *    it detects this and reports an error (sticky status, poisoned result),
 *    never undefined behaviour.
 * 2. Every tensor created between two step markers belongs to that step and
 *    is released by the next kiln_mark_step(), unless the program kept it
 *    (kiln_keep) or it was created with kiln_param(). A training loop needs
 *    no per-temporary free.
 * 3. Kept tensors and parameters live until kiln_release() or kiln_shutdown().
 *    A handle from before kiln_shutdown() stays stale after the next
 *    kiln_init().
 * 4. kiln_mark_step() computes every kept tensor that has pending work (the
 *    step's outputs); all other pending work of the step is dropped.
 *    A value read (kiln_to_host, kiln_item_*) computes what it reads and
 *    nothing else, and never changes the meaning of anything traced before
 *    it: a tensor traced from A before kiln_assign(A, ...) still sees the old
 *    A, whether it is read before or after the step marker. A read tensor
 *    keeps its tape until the step marker (kiln_backward of a logged loss
 *    works). A step ends only at kiln_mark_step(): a loop that reads results
 *    must still mark a step per iteration, or its tensors are never released
 *    (kiln warns after 10000 reads in one step).
 * 5. Host memory passed to kiln (kiln_from_host) is copied before the call
 *    returns: the caller keeps ownership. Host memory passed to kiln_to_host
 *    is written before it returns.
 * 6. Strings returned by kiln (kiln_status_message, ...) are owned by kiln
 *    and valid until the next call that may change them.
 *
 * ───────────────────────── Errors: one channel ─────────────────────────
 * A user mistake never aborts the process. Every error is recorded in the
 * sticky status: kiln_last_status() is the first error since the last
 * kiln_clear_error(), kiln_last_error() its message, which names the op or
 * the function, what was wrong (shapes, the file and the system's reason)
 * and the caller's file:line. A function that can fail reports it in one of
 * two ways, always together with that record:
 *  - it returns a kiln_status: KILN_OK, or the error it just recorded
 *    (constructors, file and I/O functions, sync points, autograd);
 *  - it returns a value with a documented failure value: a poisoned tensor
 *    (op builders: shapes and dtypes are checked at trace time), NaN or 0
 *    (kiln_item_*), -1 (counts and indices), or NULL (accessors of a NULL
 *    object).
 * Poisoned tensors propagate (an op on a poisoned input is poisoned too,
 * without a new message). Sync points return the sticky status.
 * Nothing in the public API reports through another channel (no errno, no
 * out-parameter error struct). Two documented exceptions of form, not of
 * channel: kiln_summary_writer_destroy returns a status (closing a file is
 * its last write) and the profiler server's request handling never touches
 * the calling program's sticky status (a remote client's bad request is not
 * the program's error; it goes back to that client).
 *
 * ───────────────────────── API conventions (0.2) ─────────────────────────
 * 1. Lifecycle: every heap object has one pair,
 *        kiln_status kiln_<type>_create(..., kiln_<type> **out);
 *        void        kiln_<type>_destroy(kiln_<type> *obj);   NULL is a no-op
 *    (a type with several constructors: kiln_<type>_create_<variant>, e.g.
 *    kiln_optim_create_adamw, kiln_dataset_create_fashion_mnist). On error
 *    *out is NULL and the status is returned (and recorded, with the
 *    caller's file:line). File readers are objects too (kiln_st_file_create,
 *    kiln_idx_create). Not heap objects: kiln_tensor, a value handle (see
 *    Ownership); the runtime, a process-wide singleton started and stopped
 *    with kiln_init / kiln_shutdown (there is nothing to hold a pointer to,
 *    and the first kiln call starts it implicitly); the profiler server and
 *    profiler captures, also singletons (..._start / ..._stop).
 * 2. Modes are enums (kiln_rand_kind, kiln_activation, kiln_norm_position,
 *    kiln_pool_kind, kiln_switch, ...); plain yes/no options and answers are
 *    bool (<stdbool.h>): keepdim, bias, training, shuffle, kiln_is_valid.
 *    The enums keep the numeric values of the ints they replace.
 * 3. Source locations: every function that takes a kiln_loc is named
 *    kiln_<name>_at and has a macro kiln_<name>(...) with the same
 *    arguments minus the last, which passes KILN_HERE (the caller's
 *    file:line). Call the _at form to pass a location of your own (a
 *    wrapper forwarding its caller's). A few macros are shorter conveniences
 *    over an _at function (kiln_zeros, kiln_rand_uniform, kiln_max_pool2d,
 *    kiln_conv2d_create with a square kernel).
 * 4. Errors: the one channel above.
 * 5. Public headers declare public types only: nothing from src/.
 * The changes from 0.1 are listed in CHANGELOG.md.
 *
 * ───────────────────────── Threads ─────────────────────────
 * The tracing API (everything taking or returning kiln_tensor) is for one
 * thread at a time: the thread that traces. The first thread to trace in a
 * step holds it until its kiln_mark_step(); a call from another thread in
 * the meantime is refused (INVALID_ARGUMENT naming both calls, a null or
 * poisoned result) instead of corrupting the trace. Execution happens on kiln's own
 * worker threads. Metrics functions are thread-safe.
 */
#ifndef KILN_KILN_H
#define KILN_KILN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ───────────── version ───────────── */
#define KILN_VERSION_MAJOR 0
#define KILN_VERSION_MINOR 2
#define KILN_VERSION_PATCH 0
#define KILN_VERSION_STRING "0.2.0"
/* The version of the library actually loaded (may differ from the header). */
const char *kiln_version(void);

/* ───────────── status ───────────── */
typedef enum kiln_status {
  KILN_OK = 0,
  KILN_ERR_INVALID_ARGUMENT, /* shape/dtype/argument mistakes */
  KILN_ERR_STALE_HANDLE,     /* a released tensor was used */
  KILN_ERR_OUT_OF_MEMORY,
  KILN_ERR_IO,               /* file system, cache directory */
  KILN_ERR_COMPILE,          /* kernel compiler failed */
  KILN_ERR_UNSAFE,           /* refused to load code from an unsafe place */
  KILN_ERR_CORRUPT,          /* malformed file or cache entry */
  KILN_ERR_UNSUPPORTED,
  KILN_ERR_INTERNAL,         /* a kiln bug: please report */
  KILN_ERR_GRAPH_CUT,        /* an unexpected graph cut inside a full-graph region */
} kiln_status;

/* A source location: where the user's call was made. */
typedef struct kiln_loc {
  const char *file;
  int line;
} kiln_loc;
#define KILN_HERE ((kiln_loc){__FILE__, __LINE__})

/* Name of a status code ("INVALID_ARGUMENT", ...). Never NULL. */
const char *kiln_status_name(kiln_status s);
/* The sticky status: the first error since the last kiln_clear_error(). */
kiln_status kiln_last_status(void);
/* Its message ("" when OK). Owned by kiln, valid until kiln_clear_error(). */
const char *kiln_last_error(void);
/* Reset the sticky status. */
void kiln_clear_error(void);

/* ───────────── runtime ───────────── */
/* A setting that is on, off, or left to its default (the environment). */
typedef enum kiln_switch { KILN_SWITCH_OFF = -1, KILN_SWITCH_DEFAULT = 0, KILN_SWITCH_ON = 1 } kiln_switch;

typedef struct kiln_options {
  const char *backend;   /* "cpu" (default) or "ref"; NULL: $KILN_BACKEND or "cpu" */
  int num_threads;       /* 0: $KILN_NUM_THREADS or all cores; negative: an error */
  const char *cache_dir; /* NULL: $KILN_CACHE_DIR or $XDG_CACHE_HOME/kiln or ~/.cache/kiln */
  kiln_switch disk_cache; /* DEFAULT: on unless KILN_DISK_CACHE=0 */
  /* Dynamic shapes (docs/dynamic-shapes.md): when a call site compiles again
   * and only input sizes changed, those sizes become symbols and one compile
   * serves every later size. DEFAULT: on unless KILN_DYNAMIC=off. */
  kiln_switch dynamic_shapes;
} kiln_options;

/* Start the runtime explicitly. Optional: the first kiln call starts it with
 * defaults from the environment. Calling it while started is an error, and
 * so are options out of range (a negative num_threads, a kiln_switch other
 * than -1, 0, 1): INVALID_ARGUMENT naming kiln_init, nothing started.
 * The runtime is a process-wide singleton, so its pair is kiln_init /
 * kiln_shutdown rather than create/destroy (conventions, above). */
kiln_status kiln_init(const kiln_options *opts);
/* Wait for queued work, release every tensor and buffer, stop the threads
 * (the profiler server's and gRPC's too: kiln_profiler_server_stop).
 * kiln_init may be called again afterwards. Safe to call when not started. */
void kiln_shutdown(void);
/* Name of the active backend ("cpu", "ref"). */
const char *kiln_backend_name(void);

/* ───────────── tensors ───────────── */
typedef enum kiln_dtype {
  KILN_F32 = 0,
  KILN_F64,
  KILN_I32,
  KILN_I64,
  KILN_BOOL, /* one byte per element, 0 or 1 */
  /* storage types: 16-bit floats are computed in f32 inside kernels and
   * stored rounded to nearest even (docs/semantics.md, "Dtypes") */
  KILN_BF16, /* bfloat16: the top 16 bits of an f32 */
  KILN_F16,  /* IEEE 754 binary16 */
  KILN_U8,   /* uint8, wraps modulo 2^8 */
  KILN_I8,   /* int8, wraps modulo 2^8 */
  KILN_DTYPE_COUNT
} kiln_dtype;

#define KILN_MAX_RANK 8

typedef struct kiln_tensor {
  uint32_t index;
  uint32_t gen; /* 0 is never a live generation: {0,0} is the null tensor */
} kiln_tensor;

const char *kiln_dtype_name(kiln_dtype dt);
size_t kiln_dtype_size(kiln_dtype dt);

/* Shape queries: available at trace time, no execution. */
int kiln_rank(kiln_tensor t);                /* -1 if invalid */
int64_t kiln_dim(kiln_tensor t, int axis);   /* negative axis counts from the end */
int64_t kiln_numel(kiln_tensor t);
kiln_dtype kiln_dtype_of(kiln_tensor t);
/* Copies the shape into out[KILN_MAX_RANK]; returns the rank or -1. */
int kiln_shape(kiln_tensor t, int64_t *out);
/* true if t is a live, non-poisoned tensor. */
bool kiln_is_valid(kiln_tensor t);

/* Keep t past the end of the step (it becomes a step output while it has
 * pending work). Returns t. */
kiln_tensor kiln_keep(kiln_tensor t);
/* Mark dimension `axis` (negative: from the end) of t as dynamic
 * (docs/dynamic-shapes.md): a graph that reads t compiles once for any size
 * of that dimension (sizes 0 and 1 excepted), and a new size costs a plan,
 * not a compile. Returns t. Without marks, KILN_DYNAMIC=auto finds the
 * dimensions that vary by itself after a second compile at a call site. */
#define kiln_dynamic(t, axis) kiln_dynamic_at((t), (axis), KILN_HERE)
kiln_tensor kiln_dynamic_at(kiln_tensor t, int axis, kiln_loc loc);
/* kiln_dynamic with an upper bound the program states (tinygrad's
 * Variable("T", 1, max), PyTorch's mark_dynamic(..., max=)): a size above
 * max (or a max below 2) is an error here, naming the shape and the line,
 * instead of a graph compiled for it. */
#define kiln_dynamic_bounded(t, axis, max) kiln_dynamic_bounded_at((t), (axis), (max), KILN_HERE)
kiln_tensor kiln_dynamic_bounded_at(kiln_tensor t, int axis, int64_t max, kiln_loc loc);
/* Release a kept tensor or parameter now. Releasing the null tensor is a no-op. */
void kiln_release(kiln_tensor t);
/* Give t the value of src (in place update of a kept tensor or parameter:
 * "param.data = new"). Shapes and dtypes must match. The old buffer is
 * donated to the new value when nothing else needs it. */
#define kiln_assign(dst, src) kiln_assign_at((dst), (src), KILN_HERE)
void kiln_assign_at(kiln_tensor dst, kiln_tensor src, kiln_loc loc);

/* ───────────── creation ───────────── */
#define kiln_from_host(data, dt, rank, shape) kiln_from_host_at((data), (dt), (rank), (shape), KILN_HERE)
#define kiln_full(dt, rank, shape, v) kiln_full_at((dt), (rank), (shape), (v), KILN_HERE)
#define kiln_zeros(dt, rank, shape) kiln_full_at((dt), (rank), (shape), 0.0, KILN_HERE)
#define kiln_ones(dt, rank, shape) kiln_full_at((dt), (rank), (shape), 1.0, KILN_HERE)
#define kiln_arange(dt, start, stop, step) kiln_arange_at((dt), (start), (stop), (step), KILN_HERE)
#define kiln_rand(kind, dt, rank, shape, seed) kiln_rand_at((kind), (dt), (rank), (shape), (seed), KILN_HERE)
#define kiln_rand_uniform(dt, rank, shape, seed) kiln_rand_at(KILN_RAND_UNIFORM, (dt), (rank), (shape), (seed), KILN_HERE)
#define kiln_rand_normal(dt, rank, shape, seed) kiln_rand_at(KILN_RAND_NORMAL, (dt), (rank), (shape), (seed), KILN_HERE)
/* A scalar graph input: changing its value between steps never recompiles. */
#define kiln_scalar(dt, v) kiln_scalar_at((dt), (v), KILN_HERE)
/* A compile-time constant scalar (0-d): part of the graph. */
#define kiln_constant(dt, v) kiln_constant_at((dt), (v), KILN_HERE)
/* A parameter: a tensor that lives until released (like kiln_keep). */
#define kiln_param(t) kiln_keep(t)

/* Copy host data (row-major, packed) into a new device tensor. bf16 and f16
 * data are their 16-bit patterns (uint16_t), u8/i8 are uint8_t/int8_t,
 * bool one byte (any non-zero byte is true, stored as 1); kiln_to_host
 * copies out the same layouts (bool: 0 or 1). */
kiln_tensor kiln_from_host_at(const void *data, kiln_dtype dt, int rank, const int64_t *shape, kiln_loc loc);
/* A tensor filled with v (a constant of the graph). */
kiln_tensor kiln_full_at(kiln_dtype dt, int rank, const int64_t *shape, double v, kiln_loc loc);
/* [start, stop) by step, 1-D. */
kiln_tensor kiln_arange_at(kiln_dtype dt, double start, double stop, double step, kiln_loc loc);
/* The distribution of kiln_rand (values: the old int kind). */
typedef enum kiln_rand_kind {
  KILN_RAND_UNIFORM = 0, /* uniform [0,1) */
  KILN_RAND_NORMAL = 1   /* standard normal */
} kiln_rand_kind;
/* The counter-based RNG runs inside the graph; the seed is a graph input (a
 * new seed never recompiles). The same seed gives the same values on every
 * backend. */
kiln_tensor kiln_rand_at(kiln_rand_kind kind, kiln_dtype dt, int rank, const int64_t *shape, uint64_t seed,
                         kiln_loc loc);
kiln_tensor kiln_scalar_at(kiln_dtype dt, double v, kiln_loc loc);
kiln_tensor kiln_constant_at(kiln_dtype dt, double v, kiln_loc loc);

/* ───────────── elementwise (NumPy broadcasting, dtype promotion
 * bool < u8, i8 < i32 < i64 < bf16, f16 < f32 < f64; u8 with i8 gives i32,
 * bf16 with f16 gives f32: docs/semantics.md) ───────────── */
/* The elementwise ops come from kiln's op table (kiln/ops.def, one row per
 * op with its meaning): for each public row, kiln_<fn>_at(x, loc) (unary)
 * or kiln_<fn>_at(a, b, loc) with the tensor–scalar forms
 * kiln_<fn>_s_at(a, s, loc) (the scalar is a graph input: a new value never
 * recompiles) and kiln_<fn>_c_at(a, c, loc) (a compile-time constant), and
 * the spellings without _at that add the caller's file:line: kiln_exp(x),
 * kiln_add(a, b), kiln_add_s(a, 0.5), kiln_add_c(a, 0.5). Integer and bool
 * operands of exp, log, div, ... are computed in f32; integer pow stays
 * integer (both as PyTorch). */
#define KILN_PUB_NONE
#define KILN_PUB_UNARY(fn) kiln_tensor kiln_##fn##_at(kiln_tensor x, kiln_loc loc);
#define KILN_PUB_BINARY(fn)                                                \
  kiln_tensor kiln_##fn##_at(kiln_tensor a, kiln_tensor b, kiln_loc loc); \
  kiln_tensor kiln_##fn##_s_at(kiln_tensor a, double s, kiln_loc loc);    \
  kiln_tensor kiln_##fn##_c_at(kiln_tensor a, double c, kiln_loc loc);
#define KILN_OP(NAME, KIND, ARITY, STR, PUB, IN, OUT, FLAGS, COST, F32, F64, INT, VJP, DOC) PUB
#include "kiln/ops.def"
#undef KILN_OP
#undef KILN_PUB_NONE
#undef KILN_PUB_UNARY
#undef KILN_PUB_BINARY

/* where(cond, a, b): cond is bool (other dtypes: != 0). Broadcasts all three. */
#define kiln_where(c, a, b) kiln_where_at((c), (a), (b), KILN_HERE)
kiln_tensor kiln_where_at(kiln_tensor cond, kiln_tensor a, kiln_tensor b, kiln_loc loc);
#define kiln_cast(x, dt) kiln_cast_at((x), (dt), KILN_HERE)
kiln_tensor kiln_cast_at(kiln_tensor x, kiln_dtype dt, kiln_loc loc);

/* ───────────── reductions ─────────────
 * axes: n_axes entries (negative count from the end); n_axes == 0 reduces
 * over all axes. keepdim (a bool) keeps reduced axes with size 1. */
#define kiln_sum(x, n, axes, keep) kiln_sum_at((x), (n), (axes), (keep), KILN_HERE)
#define kiln_mean(x, n, axes, keep) kiln_mean_at((x), (n), (axes), (keep), KILN_HERE)
#define kiln_max(x, n, axes, keep) kiln_max_at((x), (n), (axes), (keep), KILN_HERE)
#define kiln_min(x, n, axes, keep) kiln_min_at((x), (n), (axes), (keep), KILN_HERE)
kiln_tensor kiln_sum_at(kiln_tensor x, int n_axes, const int *axes, bool keepdim, kiln_loc loc);
kiln_tensor kiln_mean_at(kiln_tensor x, int n_axes, const int *axes, bool keepdim, kiln_loc loc);
kiln_tensor kiln_max_at(kiln_tensor x, int n_axes, const int *axes, bool keepdim, kiln_loc loc);
kiln_tensor kiln_min_at(kiln_tensor x, int n_axes, const int *axes, bool keepdim, kiln_loc loc);
/* torch.prod over the axes (1 over an empty axis); bool and integers give
 * i64 (wrapping), floats accumulate in double. */
#define kiln_prod(x, n, axes, keep) kiln_prod_at((x), (n), (axes), (keep), KILN_HERE)
kiln_tensor kiln_prod_at(kiln_tensor x, int n_axes, const int *axes, bool keepdim, kiln_loc loc);
/* torch.cumsum / torch.cumprod along axis (negative counts from the end):
 * out[..., i, ...] = the sum / product of x[..., 0..i, ...]; the shape of
 * x; bool and integers give i64 (wrapping), floats accumulate in double. */
#define kiln_cumsum(x, axis) kiln_cumsum_at((x), (axis), KILN_HERE)
#define kiln_cumprod(x, axis) kiln_cumprod_at((x), (axis), KILN_HERE)
kiln_tensor kiln_cumsum_at(kiln_tensor x, int axis, kiln_loc loc);
kiln_tensor kiln_cumprod_at(kiln_tensor x, int axis, kiln_loc loc);
/* Index of the first maximum along axis, as i64. */
#define kiln_argmax(x, axis, keep) kiln_argmax_at((x), (axis), (keep), KILN_HERE)
kiln_tensor kiln_argmax_at(kiln_tensor x, int axis, bool keepdim, kiln_loc loc);
/* Numerically stable softmax / log_softmax along axis. */
#define kiln_softmax(x, axis) kiln_softmax_at((x), (axis), KILN_HERE)
#define kiln_log_softmax(x, axis) kiln_log_softmax_at((x), (axis), KILN_HERE)
kiln_tensor kiln_softmax_at(kiln_tensor x, int axis, kiln_loc loc);
kiln_tensor kiln_log_softmax_at(kiln_tensor x, int axis, kiln_loc loc);

/* ───────────── shape ops ───────────── */
/* One dimension of shape may be -1 (inferred). */
#define kiln_reshape(x, rank, shape) kiln_reshape_at((x), (rank), (shape), KILN_HERE)
kiln_tensor kiln_reshape_at(kiln_tensor x, int rank, const int64_t *shape, kiln_loc loc);
#define kiln_permute(x, perm) kiln_permute_at((x), (perm), KILN_HERE)
kiln_tensor kiln_permute_at(kiln_tensor x, const int *perm, kiln_loc loc);
#define kiln_transpose(x, a0, a1) kiln_transpose_at((x), (a0), (a1), KILN_HERE)
kiln_tensor kiln_transpose_at(kiln_tensor x, int axis0, int axis1, kiln_loc loc);
/* Broadcast to shape (NumPy rules: size-1 or missing leading dims); -1 keeps
 * a dimension's size (torch.Tensor.expand). */
#define kiln_expand(x, rank, shape) kiln_expand_at((x), (rank), (shape), KILN_HERE)
kiln_tensor kiln_expand_at(kiln_tensor x, int rank, const int64_t *shape, kiln_loc loc);
/* x[start:stop:step] along axis; Python conventions (negative start/stop
 * count from the end, clamped); step >= 1. */
#define kiln_slice(x, axis, start, stop, step) kiln_slice_at((x), (axis), (start), (stop), (step), KILN_HERE)
kiln_tensor kiln_slice_at(kiln_tensor x, int axis, int64_t start, int64_t stop, int64_t step, kiln_loc loc);
#define kiln_concat(n, xs, axis) kiln_concat_at((n), (xs), (axis), KILN_HERE)
kiln_tensor kiln_concat_at(int n, const kiln_tensor *xs, int axis, kiln_loc loc);
/* Constant padding: lo[i]/hi[i] elements before/after along axis i (rank entries;
 * NULL: none on that side); a negative count removes elements (F.pad). */
#define kiln_pad(x, lo, hi, value) kiln_pad_at((x), (lo), (hi), (value), KILN_HERE)
kiln_tensor kiln_pad_at(kiln_tensor x, const int64_t *lo, const int64_t *hi, double value, kiln_loc loc);
/* index_select: out = x indexed by idx (i32/i64, any rank) along axis; the
 * axis is replaced by idx's dims. Embedding lookup: index_select(W, ids, 0).
 * Errors: an index outside [0, dim) (negative included, as in PyTorch) is
 * found when the graph runs: the next sync point that waits for it returns
 * KILN_ERR_INVALID_ARGUMENT (sticky) naming the op, the index, the axis size
 * and this call's file:line; the output's values are then unspecified. */
#define kiln_index_select(x, axis, idx) kiln_index_select_at((x), (axis), (idx), KILN_HERE)
kiln_tensor kiln_index_select_at(kiln_tensor x, int axis, kiln_tensor idx, kiln_loc loc);
/* torch.gather: idx has x's rank; out[i][j] = x[i][idx[i][j]] along axis.
 * Errors: an index outside [0, dim) as for kiln_index_select. */
#define kiln_gather(x, axis, idx) kiln_gather_at((x), (axis), (idx), KILN_HERE)
kiln_tensor kiln_gather_at(kiln_tensor x, int axis, kiln_tensor idx, kiln_loc loc);
/* one_hot(idx, n) -> idx.shape + [n], dtype dt. */
#define kiln_one_hot(idx, n, dt) kiln_one_hot_at((idx), (n), (dt), KILN_HERE)
kiln_tensor kiln_one_hot_at(kiln_tensor idx, int64_t n, kiln_dtype dt, kiln_loc loc);

/* ───────────── sorting and scattering (docs/semantics.md) ───────────── */
/* torch.sort(x, axis, descending, stable=True): *values (x's dtype) and
 * *indices (i64), both of x's shape; either pointer may be NULL. Ties keep
 * their order; NaN sorts as the largest value (last ascending, first
 * descending). Gradient: the values' gradient goes back to the positions
 * they came from. The sort runs as a kernel of its own (docs/codegen.md). */
#define kiln_sort(x, axis, descending, values, indices) \
  kiln_sort_at((x), (axis), (descending), (values), (indices), KILN_HERE)
void kiln_sort_at(kiln_tensor x, int axis, bool descending, kiln_tensor *values, kiln_tensor *indices, kiln_loc loc);
/* The indices of kiln_sort (i64), as torch.argsort(stable=True). */
#define kiln_argsort(x, axis, descending) kiln_argsort_at((x), (axis), (descending), KILN_HERE)
kiln_tensor kiln_argsort_at(kiln_tensor x, int axis, bool descending, kiln_loc loc);
/* torch.topk(x, k, axis, largest, sorted=True): the k largest (smallest)
 * along axis, in order; among equal values the earlier position first (the
 * first k of the stable sort). 0 <= k <= dim (k = 1 for a 0-d x). */
#define kiln_topk(x, k, axis, largest, values, indices) \
  kiln_topk_at((x), (k), (axis), (largest), (values), (indices), KILN_HERE)
void kiln_topk_at(kiln_tensor x, int64_t k, int axis, bool largest, kiln_tensor *values, kiln_tensor *indices,
                  kiln_loc loc);
/* torch.Tensor.scatter(axis, idx, src), out of place: x with src[p] written
 * at position idx[p] along axis, for every p of idx's shape. idx (i32/i64)
 * and src (x's dtype) have x's rank; idx's dims are <= src's, and <= x's
 * off the axis. Duplicate indices: the last along the axis wins
 * (deterministic; PyTorch leaves it unspecified). Errors: an index outside
 * [0, dim) as for kiln_index_select. */
#define kiln_scatter(x, axis, idx, src) kiln_scatter_at((x), (axis), (idx), (src), KILN_HERE)
kiln_tensor kiln_scatter_at(kiln_tensor x, int axis, kiln_tensor idx, kiln_tensor src, kiln_loc loc);
/* torch.Tensor.scatter_add: as kiln_scatter, the values added; duplicates
 * accumulate in order along the axis (the same result on every run). */
#define kiln_scatter_add(x, axis, idx, src) kiln_scatter_add_at((x), (axis), (idx), (src), KILN_HERE)
kiln_tensor kiln_scatter_add_at(kiln_tensor x, int axis, kiln_tensor idx, kiln_tensor src, kiln_loc loc);
/* torch.Tensor.index_add(axis, idx, src): idx 1-D of length m, src of x's
 * shape with m along axis; slice src[.., i, ..] is added to x[.., idx[i], ..]. */
#define kiln_index_add(x, axis, idx, src) kiln_index_add_at((x), (axis), (idx), (src), KILN_HERE)
kiln_tensor kiln_index_add_at(kiln_tensor x, int axis, kiln_tensor idx, kiln_tensor src, kiln_loc loc);
/* torch.Tensor.index_put((idx,), values, accumulate), out of place, for a
 * 1-D index on axis 0: x[idx[i]] = values[i] (accumulate: +=); values
 * broadcast to [m, x.shape[1:]...]. Without accumulate the last duplicate
 * wins. Negative indices are errors (as in kiln_index_select). */
#define kiln_index_put(x, idx, values, accumulate) kiln_index_put_at((x), (idx), (values), (accumulate), KILN_HERE)
kiln_tensor kiln_index_put_at(kiln_tensor x, kiln_tensor idx, kiln_tensor values, bool accumulate, kiln_loc loc);

/* ───────────── composed ops (built from the ops above; gradients flow) ───────────── */
/* torch.clamp(x, lo, hi): NaN stays NaN; -INFINITY / INFINITY: no bound. */
#define kiln_clamp(x, lo, hi) kiln_clamp_at((x), (lo), (hi), KILN_HERE)
kiln_tensor kiln_clamp_at(kiln_tensor x, double lo, double hi, kiln_loc loc);
/* Index of the first minimum along axis, as i64 (a NaN is the minimum, as torch.argmin). */
#define kiln_argmin(x, axis, keep) kiln_argmin_at((x), (axis), (keep), KILN_HERE)
kiln_tensor kiln_argmin_at(kiln_tensor x, int axis, bool keepdim, kiln_loc loc);
/* torch.stack: n tensors of one shape joined along a new axis (in [-rank-1, rank]). */
#define kiln_stack(n, xs, axis) kiln_stack_at((n), (xs), (axis), KILN_HERE)
kiln_tensor kiln_stack_at(int n, const kiln_tensor *xs, int axis, kiln_loc loc);
/* torch.flip: reversed along each of n_axes axes. */
#define kiln_flip(x, n, axes) kiln_flip_at((x), (n), (axes), KILN_HERE)
kiln_tensor kiln_flip_at(kiln_tensor x, int n_axes, const int *axes, kiln_loc loc);
/* torch.roll along one axis: out[(i + shift) mod n] = x[i]. */
#define kiln_roll(x, shift, axis) kiln_roll_at((x), (shift), (axis), KILN_HERE)
kiln_tensor kiln_roll_at(kiln_tensor x, int64_t shift, int axis, kiln_loc loc);
/* torch.tril / torch.triu over the last two axes: keep column - row <= k
 * (tril) or >= k (triu), zero elsewhere. */
#define kiln_tril(x, k) kiln_tril_at((x), (k), KILN_HERE)
#define kiln_triu(x, k) kiln_triu_at((x), (k), KILN_HERE)
kiln_tensor kiln_tril_at(kiln_tensor x, int64_t k, kiln_loc loc);
kiln_tensor kiln_triu_at(kiln_tensor x, int64_t k, kiln_loc loc);
/* Padding modes of F.pad: constant (value), reflect (mirror without the
 * edge; each pad < the axis size), replicate (repeat the edge). lo, hi as
 * kiln_pad's (NULL: none on that side). */
typedef enum kiln_pad_mode { KILN_PAD_CONSTANT = 0, KILN_PAD_REFLECT = 1, KILN_PAD_REPLICATE = 2 } kiln_pad_mode;
#define kiln_pad_with(x, lo, hi, mode, value) kiln_pad_with_at((x), (lo), (hi), (mode), (value), KILN_HERE)
kiln_tensor kiln_pad_with_at(kiln_tensor x, const int64_t *lo, const int64_t *hi, kiln_pad_mode mode, double value,
                             kiln_loc loc);

/* ───────────── autocast (mixed precision) ─────────────
 * Regions (nestable, per tracing thread, like PyTorch's
 * torch.autocast(dtype=...)) in which matmul — and so linear, conv2d and
 * attention — casts f32/bf16/f16 operands to dt (KILN_BF16 or KILN_F16) and
 * returns dt (accumulation stays f32 inside the GEMM), while softmax,
 * log_softmax, the losses and layer norm cast 16-bit inputs to f32 and
 * return f32. Other ops keep their inputs' dtypes (bf16 + f32 promotes to
 * f32). The casts are graph ops, so gradients reach f32 parameters as f32
 * (a cast's gradient casts back). f64 operands are never cast.
 * kiln_autocast_begin(KILN_F32) opens a region with autocast off. Errors
 * (recorded, nothing else changes): another dt, more than 16 nested
 * regions, an end without a begin. See docs/training.md. */
#define kiln_autocast_begin(dt) kiln_autocast_begin_at((dt), KILN_HERE)
#define kiln_autocast_end() kiln_autocast_end_at(KILN_HERE)
void kiln_autocast_begin_at(kiln_dtype dt, kiln_loc loc);
void kiln_autocast_end_at(kiln_loc loc);
/* The innermost region's dtype; KILN_F32 outside every region (no casts). */
kiln_dtype kiln_autocast_dtype(void);

/* ───────────── matmul ─────────────
 * NumPy matmul semantics: 1-D operands are promoted and the added dim
 * removed; batch dims broadcast. Mixed dtypes promote as the elementwise
 * ops. f32, f64; bf16 and f16 give the 16-bit dtype (accumulated in f32);
 * integers: u8, i8, i32 give i32 (accumulated wrapping in i32), i64 gives
 * i64; bool @ bool is an error (docs/semantics.md). */
#define kiln_matmul(a, b) kiln_matmul_at((a), (b), KILN_HERE)
kiln_tensor kiln_matmul_at(kiln_tensor a, kiln_tensor b, kiln_loc loc);

/* ───────────── sync points ───────────── */
/* End the step: compute every kept tensor with pending work in one graph
 * (compiled once, then found in the caches), enqueue it and return without
 * waiting. Releases the step's other tensors. Returns the sticky status. */
#define kiln_mark_step() kiln_mark_step_at(KILN_HERE)
kiln_status kiln_mark_step_at(kiln_loc loc);
/* Read t into host memory (bytes must be >= numel * dtype size). Executes
 * only what t needs and waits for it. Counts as a graph cut (value read)
 * attributed to the caller's line. */
#define kiln_to_host(t, dst, bytes) kiln_to_host_at((t), (dst), (bytes), KILN_HERE)
kiln_status kiln_to_host_at(kiln_tensor t, void *dst, size_t bytes, kiln_loc loc);
/* Read a one-element tensor as a double / int64 (NaN / 0 on error). */
#define kiln_item_f64(t) kiln_item_f64_at((t), KILN_HERE)
#define kiln_item_i64(t) kiln_item_i64_at((t), KILN_HERE)
double kiln_item_f64_at(kiln_tensor t, kiln_loc loc);
int64_t kiln_item_i64_at(kiln_tensor t, kiln_loc loc);
/* Wait for all queued executions. Returns the sticky status. */
kiln_status kiln_wait(void);

/* ───────────── metrics (thread-safe) ─────────────
 * Counters: MarkStep, UncachedCompile, CachedCompile, PersistentCacheHit,
 * PersistentCacheGraphHit (graphs all of whose code came from the disk),
 * PersistentCacheMiss, Execute, StepMarkerCut, ValueReadCut,
 * DataDependentCut, ExplicitCompileCut, DiscardedStep,
 * TransferToDevice(Bytes), TransferFromDevice(Bytes), BufferAlloc,
 * BufferReuse, GraphCacheKeyCollision, LoaderBatches, AllReduceCount,
 * AllReduceBytes (and Broadcast/AllGather). Metrics (times in
 * nanoseconds, names ending in "Time"; the others plain values):
 * CompileTime, ExecuteTime, CachedCutTime (host cost of a cut that hit the
 * graph cache), TransferToDeviceTime, TransferFromDeviceTime,
 * DeviceWaitTime, GraphNodes, ExecutionsPerStep, LoaderWaitTime,
 * CollectiveTime, CollectiveFlightTime.
 * Every name is described in docs/metrics.md. More views (short report,
 * JSON, names, per-line tables, kiln_explain) are in kiln/debug.h.
 * KILN_METRICS=1 prints the full report at exit, KILN_METRICS_FILE=path
 * writes it there. */
typedef struct kiln_metric_stats {
  int64_t count;   /* samples */
  double sum;      /* accumulator */
  double min, max; /* over all samples */
  /* over the retained window of recent samples: p50 the median (the mean of the
   * middle two for an even count), p90 and p99 by nearest rank */
  double p50, p90, p99;
} kiln_metric_stats;
/* Value of a counter (0 if it never counted). */
int64_t kiln_counter_value(const char *name);
/* Stats of a metric; returns 0 if it exists, -1 if not (out zeroed). */
int kiln_metric_data(const char *name, kiln_metric_stats *out);
/* The full report as text, in PyTorch/XLA's form ("Metric: X" with
 * TotalSamples, Accumulator, ValueRate, Rate, Percentiles; "Counter: X" with
 * Value), then the per-source-line table of graph cuts and reads. Owned by
 * kiln, valid until the next call. */
const char *kiln_metrics_report(void);
/* Reset every counter, metric and per-line record. */
void kiln_metrics_clear(void);

#ifdef __cplusplus
}
#endif

#include "kiln/autograd.h"
#include "kiln/nn.h"
#include "kiln/optim.h"
#include "kiln/io.h"
#include "kiln/data.h"
#include "kiln/models.h"
#include "kiln/summary.h"
#include "kiln/debug.h"
#include "kiln/profiler.h"
#include "kiln/profiler_server.h"
#include "kiln/doctor.h"
#include "kiln/graphfile.h"
#include "kiln/dist.h"

#endif /* KILN_KILN_H */
