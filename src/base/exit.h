/* Work still running when the process exits.
 *
 * A program may return from main while kiln executes its last steps on
 * worker threads (execution is asynchronous: kiln_mark_step does not wait).
 * exit() then runs the C++ static destructors of the libraries kiln loaded
 * (oneDNN, OpenBLAS) while a worker is inside them: a crash after the
 * program's own work was done. An exit handler registered after a library
 * is loaded runs before that library's destructors (handlers run in
 * reverse order), so whoever loads one arms the drain again afterwards;
 * the drain (set by the layer that owns the workers) waits for them. A
 * library that registers destructors on its first call (oneDNN's kernel
 * generation) is called once on the caller's thread before any worker does,
 * and the drain armed after that (kiln_gemm_warm): a destructor registered
 * by a worker mid-step would run before every handler armed earlier.
 *
 * Thread-safety: both functions may be called from any thread. */
#ifndef KILN_BASE_EXIT_H
#define KILN_BASE_EXIT_H

/* The function the exit handlers call (NULL: none). */
void kiln_exit_drain_set(void (*fn)(void));

/* Call the drain now: an exit handler of a lower layer that would stop
 * something the steps in flight still need (dist's MPI_Finalize) drains
 * first. */
void kiln_exit_drain_now(void);

/* Register one more exit handler that calls the drain: after loading a
 * library whose destructors must not run under a worker. Bounded (a few
 * per process); the drain itself must be cheap when nothing runs. */
void kiln_exit_drain_arm(void);

#endif
