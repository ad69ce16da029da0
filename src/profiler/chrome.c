/* Chrome Trace Event JSON (gzipped), as Perfetto UI and chrome://tracing
 * read it: "X" complete events in microseconds relative to the capture
 * start, process/thread names as "M" metadata events. pid 1 holds the host
 * threads (tid = OS thread id), pid 2 the kernel lanes (tid = lane + 1), so
 * the viewers show kernels apart from the host work that launched them.
 * Kernels carry their user's line ("source"); each allocator's bytes in use
 * is a counter ("C") of pid 1, one sample per allocation or free. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "base/fs.h"
#include "base/text.h"
#include "profiler/capture.h"

static int device_tid(const kiln_prof_thread_events *t, int index) { return t->lane >= 0 ? t->lane + 1 : 1000 + index; }

static void meta(kiln_text *b, int pid, int64_t tid, const char *what, const char *name, int sort) {
  kiln_text_printf(b, "{\"ph\":\"M\",\"pid\":%d,\"tid\":%lld,\"name\":\"%s\",\"args\":{\"name\":", pid,
                   (long long)tid, what);
  kiln_text_json_str(b, name);
  kiln_text_printf(b, "}},\n");
  if (sort >= 0)
    kiln_text_printf(b,
                     "{\"ph\":\"M\",\"pid\":%d,\"tid\":%lld,\"name\":\"%s_sort_index\","
                     "\"args\":{\"sort_index\":%d}},\n",
                     pid, (long long)tid, what[0] == 'p' ? "process" : "thread", sort);
}

kiln_status kiln_prof_chrome_json(const kiln_prof_capture *c, char **out, size_t *n, kiln_err *err) {
  *out = NULL;
  *n = 0;
  kiln_text b = {0};
  kiln_text_printf(&b, "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"producer\":\"kiln\",\"host\":");
  kiln_text_json_str(&b, c->host);
  kiln_text_printf(&b, ",\"dropped_events\":%llu,\"capture_ns\":%llu},\n\"traceEvents\":[\n",
                   (unsigned long long)c->dropped, (unsigned long long)(c->end_ns - c->start_ns));
  meta(&b, 1, 0, "process_name", "/host:CPU (kiln host threads)", -1);
  meta(&b, 2, 0, "process_name", "/device:CUSTOM:0 (kiln kernels, one lane per worker thread)", -1);
  for (int i = 0; i < c->n_threads; i++) {
    const kiln_prof_thread_events *t = &c->threads[i];
    int has_host = 0, has_dev = 0;
    for (uint32_t k = 0; k < t->n && !(has_host && has_dev); k++) {
      if (t->ev[k].kind == KILN_PROF_KERNEL) has_dev = 1;
      else if (t->ev[k].kind != KILN_PROF_MEMORY) has_host = 1;
    }
    if (has_host || t->dropped) meta(&b, 1, t->tid, "thread_name", t->name, i);
    if (has_dev) {
      char nm[96];
      snprintf(nm, sizeof nm, "lane %d (%s)", t->lane >= 0 ? t->lane : 1000 + i, t->name);
      meta(&b, 2, device_tid(t, i), "thread_name", nm, device_tid(t, i));
    }
  }
  int first = 1;
  if (c->dropped) {
    kiln_text_printf(&b,
                     "{\"ph\":\"i\",\"s\":\"g\",\"pid\":1,\"tid\":0,\"ts\":0,\"name\":\"kiln: %llu events dropped "
                     "(full per-thread buffers)\"}",
                     (unsigned long long)c->dropped);
    first = 0;
  }
  for (int i = 0; i < c->n_threads; i++) {
    const kiln_prof_thread_events *t = &c->threads[i];
    for (uint32_t k = 0; k < t->n && !b.failed; k++) {
      const kiln_prof_event *e = &t->ev[k];
      int dev = e->kind == KILN_PROF_KERNEL;
      uint64_t eb = e->begin_ns < c->start_ns ? c->start_ns : e->begin_ns; /* as in xplane.c */
      double ts = (double)(eb - c->start_ns) / 1e3;
      if (e->kind == KILN_PROF_MEMORY) { /* a counter track per allocator: its bytes in use */
        kiln_text_printf(&b, "%s{\"ph\":\"C\",\"pid\":1,\"ts\":%.3f,\"cat\":\"memory\",\"name\":", first ? "" : ",\n", ts);
        kiln_text_json_str(&b, e->name);
        kiln_text_printf(&b, ",\"args\":{\"in_use_bytes\":%lld}}", (long long)e->in_use);
        first = 0;
        continue;
      }
      double dur = e->end_ns > eb ? (double)(e->end_ns - eb) / 1e3 : 0;
      kiln_text_printf(&b, "%s{\"ph\":\"X\",\"pid\":%d,\"tid\":%lld,\"ts\":%.3f,\"dur\":%.3f,\"cat\":\"%s\",\"name\":",
                       first ? "" : ",\n", dev ? 2 : 1, dev ? (long long)device_tid(t, i) : (long long)t->tid, ts,
                       dur, kiln_prof_kind_name((kiln_prof_kind)e->kind));
      first = 0;
      kiln_text_json_str(&b, e->name);
      kiln_text_printf(&b, ",\"args\":{");
      int comma = 0;
      if (e->kind == KILN_PROF_STEP) kiln_text_printf(&b, "\"step_num\":%lld", (long long)e->arg), comma = 1;
      else if (e->arg >= 0 && e->kind == KILN_PROF_TRANSFER)
        kiln_text_printf(&b, "\"bytes\":%lld", (long long)e->arg), comma = 1;
      if (e->flops > 0) kiln_text_printf(&b, "%s\"flops\":%.0f", comma ? "," : "", e->flops), comma = 1;
      if (e->bytes > 0) kiln_text_printf(&b, "%s\"bytes_accessed\":%.0f", comma ? "," : "", e->bytes), comma = 1;
      if (dev && e->src) {
        kiln_text_printf(&b, "%s\"source\":", comma ? "," : "");
        kiln_text_json_str(&b, e->src);
        comma = 1;
      }
      kiln_text_printf(&b, "}}");
    }
  }
  kiln_text_printf(&b, "\n]}\n");
  if (b.failed) {
    kiln_text_free(&b);
    return kiln_err_set(err, KILN_ERR_OUT_OF_MEMORY, "profiler: out of memory writing the Chrome trace");
  }
  *n = b.len;
  *out = kiln_text_take(&b);
  return KILN_OK;
}

kiln_status kiln_prof_write_chrome(const kiln_prof_capture *c, const char *path, kiln_err *err) {
  char *json;
  size_t n;
  KILN_RETURN_IF_ERROR(err, kiln_prof_chrome_json(c, &json, &n, err), "while writing %s", path);
  z_stream z;
  memset(&z, 0, sizeof z);
  /* windowBits 15 + 16: a gzip wrapper, which the viewers expect for .gz */
  if (deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    free(json);
    return kiln_err_set(err, KILN_ERR_OUT_OF_MEMORY, "profiler: cannot start zlib for %s", path);
  }
  uLong cap = deflateBound(&z, (uLong)n) + 64;
  unsigned char *gz = malloc(cap);
  kiln_status s = KILN_OK;
  if (!gz) {
    s = kiln_err_set(err, KILN_ERR_OUT_OF_MEMORY, "profiler: out of memory compressing %s", path);
  } else {
    z.next_in = (unsigned char *)json;
    z.avail_in = (uInt)n;
    z.next_out = gz;
    z.avail_out = (uInt)cap;
    if (deflate(&z, Z_FINISH) != Z_STREAM_END)
      s = kiln_err_set(err, KILN_ERR_INTERNAL, "profiler: zlib failed compressing %s", path);
    else
      s = kiln_fs_write_output(path, "Chrome trace", gz, z.total_out, err);
  }
  deflateEnd(&z);
  free(gz);
  free(json);
  return s;
}
