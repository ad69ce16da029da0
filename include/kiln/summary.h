/* kiln summaries: scalar curves (loss, accuracy, learning rate, ...) logged
 * as TensorBoard event files, so `tensorboard --logdir DIR` plots a kiln
 * training run like a TensorFlow or PyTorch one.
 *
 * A writer owns one file DIR/events.out.tfevents.<unix_time>.<host>.<pid>.<n>
 * (n counts writers opened by this process, from 0): TFRecord framing around
 * hand-encoded `tensorflow.Event` protobufs. See docs/tensorboard.md.
 *
 * Errors: functions record a sticky error (kiln_last_error) naming the file,
 * the problem and the caller's file:line, and return a status. A failing
 * disk (full, removed, read-only) never aborts the process: the writer
 * reports KILN_ERR_IO, writes nothing more (a partly written record would
 * make the rest of the file unreadable) and answers every later call with
 * the same failure, so a training loop may choose to keep training without
 * its logs. It must still be destroyed.
 *
 * Threads: a writer must not be used from two threads at once; distinct
 * writers are independent. None of these functions needs kiln_init().
 */
#ifndef KILN_SUMMARY_H
#define KILN_SUMMARY_H

#include <stdint.h>

#include "kiln/kiln.h"

#ifdef __cplusplus
extern "C" {
#endif

/* An open TensorBoard event file. */
typedef struct kiln_summary_writer kiln_summary_writer;

/* Create `logdir` (and missing parents, mode 0755 before the umask) if
 * needed and start a new event file in it; the file-version record is
 * written and flushed at once, so TensorBoard lists the run immediately.
 * An existing event file is never overwritten (the name's last number is
 * bumped instead). On success *out is a new writer (free with
 * kiln_summary_writer_destroy); on error *out is NULL and the status is
 * KILN_ERR_INVALID_ARGUMENT (NULL/empty logdir), KILN_ERR_IO (cannot create
 * the directory or the file: the message has the path and the system's
 * reason) or KILN_ERR_OUT_OF_MEMORY. */
#define kiln_summary_writer_create(logdir, out) kiln_summary_writer_create_at((logdir), (out), KILN_HERE)
kiln_status kiln_summary_writer_create_at(const char *logdir, kiln_summary_writer **out, kiln_loc loc);

/* Append the scalar `value` (stored as a 32-bit float, TensorBoard's
 * simple_value; NaN and infinities are kept) for `tag` at `step`, stamped
 * with the current wall-clock time. The record goes to a stdio buffer: call
 * kiln_summary_flush to make it visible to a running TensorBoard.
 *   tag: a non-empty UTF-8 string (TensorBoard groups tags by the part
 *        before the first '/', e.g. "train/loss"); the caller keeps it.
 * Errors: KILN_ERR_INVALID_ARGUMENT (NULL writer, NULL/empty tag, a tag that
 * is not valid UTF-8: TensorBoard's proto3 parser would reject the whole
 * record), KILN_ERR_IO (a write failed now or earlier). */
#define kiln_summary_scalar(w, tag, step, value) kiln_summary_scalar_at((w), (tag), (step), (value), KILN_HERE)
kiln_status kiln_summary_scalar_at(kiln_summary_writer *w, const char *tag, int64_t step, double value,
                                   kiln_loc loc);

/* Push buffered records to the file (fflush; no fsync: logs are not worth
 * a disk sync per step). Errors: KILN_ERR_INVALID_ARGUMENT (NULL writer),
 * KILN_ERR_IO (e.g. disk full: the message has the path and the reason). */
#define kiln_summary_flush(w) kiln_summary_flush_at((w), KILN_HERE)
kiln_status kiln_summary_flush_at(kiln_summary_writer *w, kiln_loc loc);

/* Flush, close the file and free the writer (always freed, even on error).
 * NULL is a no-op returning KILN_OK. The one destroy function that returns
 * a status (kiln.h, "API conventions"): closing a file is its last write.
 * Errors: KILN_ERR_IO when the final flush or close failed (or an earlier
 * write had failed). */
#define kiln_summary_writer_destroy(w) kiln_summary_writer_destroy_at((w), KILN_HERE)
kiln_status kiln_summary_writer_destroy_at(kiln_summary_writer *w, kiln_loc loc);

/* The event file's path ("<logdir>/events.out.tfevents...."), owned by the
 * writer and valid until kiln_summary_writer_destroy; NULL for NULL. */
const char *kiln_summary_path(const kiln_summary_writer *w);

#ifdef __cplusplus
}
#endif

#endif
