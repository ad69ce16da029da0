/* kiln's profiler server and its client: on-demand captures from outside
 * the process, over the tensorflow.ProfilerService gRPC protocol that
 * TensorBoard's profile plugin ("Capture Profile") speaks. See
 * docs/profiling.md.
 *
 *   kiln_profiler_server_start(0);            // loopback, any free port
 *   printf("port %d\n", kiln_profiler_server_port());
 *   ... train ...                             // annotated with kiln/profiler.h
 *   kiln_profiler_server_stop();
 *
 * A Profile request names a duration and a directory; the server records
 * for that long (kiln_profiler_capture) and writes
 * <repository_root>/<session_id>/<host_name>.xplane.pb and .trace.json.gz.
 * Requests are checked before anything is touched: the duration must be in
 * 1..600000 ms, repository_root a path without ".." (a relative one is
 * resolved against the process's working directory at the time of the
 * request, as TensorFlow's server does, and the server prints where the
 * capture went on stderr), session_id and host_name single file-name
 * components. Every failure, a bad or hostile request or a capture that
 * cannot be written, gets a gRPC error whose message is the reason (also
 * printed on stderr); it never aborts the process and never changes the
 * calling program's sticky status.
 *
 * Security: whoever can reach the port can make the process write capture
 * files into any directory it may write to. The server therefore binds to
 * 127.0.0.1 unless the program (kiln_profiler_server_start_addr) or the
 * environment (KILN_PROFILER_BIND, e.g. "0.0.0.0") says otherwise.
 *
 * Threads: all functions are thread-safe. The server is a process-wide
 * singleton: one at a time. Requests are served on gRPC's own threads (at
 * most a few at once); one capture runs at a time, a second concurrent
 * Profile request is refused. */
#ifndef KILN_PROFILER_SERVER_H
#define KILN_PROFILER_SERVER_H

#include <stddef.h>
#include <stdint.h>

#include "kiln/kiln.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Longest capture a request may ask for, in milliseconds (10 minutes). */
#define KILN_PROFILER_MAX_DURATION_MS 600000u

/* Start the profiler server on `port` (0: let the system pick a free one;
 * read it back with kiln_profiler_server_port). Binds 127.0.0.1, or the
 * host in $KILN_PROFILER_BIND ("0.0.0.0", "[::]", "192.168.1.5").
 * Errors (sticky status, with the caller's file:line): INVALID_ARGUMENT for
 * a port outside 0..65535 or a server already running; IO when the address
 * cannot be bound (port in use); UNSUPPORTED when kiln was built without
 * gRPC. In a distributed job (kiln/dist.h, a world of N > 1) rank R
 * listens on port + R (port 0: a free port on each rank), and its captures
 * are written as <host>-rank<R>. */
#define kiln_profiler_server_start(port) kiln_profiler_server_start_at((port), KILN_HERE)
kiln_status kiln_profiler_server_start_at(int port, kiln_loc loc);

/* Same, on an explicit "host:port" address ("0.0.0.0:6009", "[::1]:0",
 * "localhost:0"); it overrides $KILN_PROFILER_BIND. */
#define kiln_profiler_server_start_addr(addr) kiln_profiler_server_start_addr_at((addr), KILN_HERE)
kiln_status kiln_profiler_server_start_addr_at(const char *addr, kiln_loc loc);

/* The port the running server listens on; 0 when none is running. */
int kiln_profiler_server_port(void);

/* Stop the server: refuse new requests, wait for the ones in flight
 * (a running capture finishes, at most its duration), release the port,
 * then wait until gRPC's own threads have ended (gRPC shuts down
 * asynchronously, up to about a second after a failed connection; at most
 * 10 s when something else in the process keeps gRPC running).
 * kiln_shutdown calls it. Safe to call when no server runs. Do not call it
 * from a request handler (there are none in user code). */
void kiln_profiler_server_stop(void);

/* Whether addr is an address kiln_profiler_client_capture can ask:
 * "HOST:PORT" or "[IPv6]:PORT" with a host of 1..255 bytes and a port in
 * 1..65535. A check of the text only: nothing is resolved, and nothing is
 * recorded in the sticky status (false is an answer, not an error).
 * Thread-safe. */
bool kiln_profiler_client_addr_valid(const char *addr);

/* Client side (`kiln profile capture`): ask the server at `addr`
 * ("localhost:6009") for a capture of duration_ms milliseconds written
 * under <logdir>/plugins/profile/<YYYY_MM_DD_HH_MM_SS>/, the layout
 * TensorBoard reads. logdir is created if missing and made absolute (the
 * server writes it, so it must be on a file system both processes see).
 * On success the run directory is copied to out_dir (out_cap bytes,
 * truncated if needed; out_dir may be NULL). Blocks for the duration plus
 * the time to write the files (deadline: duration + 60 s).
 * Errors (sticky status): INVALID_ARGUMENT for a bad address or duration,
 * or a request the server refused (its message is included); IO when the
 * server cannot be reached, the logdir cannot be created, or the server
 * could not write the capture; UNSUPPORTED without gRPC. Thread-safe.
 * addr may be a comma-separated list ("node1:6009,node2:6009", at most
 * 256): every server is asked at once, over the same window, into the same
 * run directory (the ranks of a distributed job); each file is then named
 * by its address's host and port. The first failure is reported, naming
 * its address. */
#define kiln_profiler_client_capture(addr, duration_ms, logdir, out_dir, out_cap) \
  kiln_profiler_client_capture_at((addr), (duration_ms), (logdir), (out_dir), (out_cap), KILN_HERE)
kiln_status kiln_profiler_client_capture_at(const char *addr, uint32_t duration_ms, const char *logdir,
                                            char *out_dir, size_t out_cap, kiln_loc loc);

#ifdef __cplusplus
}
#endif
#endif
