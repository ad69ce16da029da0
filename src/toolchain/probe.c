/* kiln_compiler_probe (kiln/doctor.h): the kernel compiler, tested end to
 * end with a one-line kernel. `kiln doctor` prints what it finds. */
#include <stdio.h>
#include <string.h>

#include "base/clock.h"
#include "base/status.h"
#include "kiln/doctor.h"
#include "toolchain/compiler.h"

kiln_status kiln_compiler_probe_at(kiln_compiler_info *out, kiln_loc loc) {
  if (!out) return kiln_error(KILN_ERR_INVALID_ARGUMENT, loc, "kiln_compiler_probe: out is NULL");
  memset(out, 0, sizeof *out);
  kiln_cc_config cfg = {0}; /* cc and flags from the environment; no disk cache */
  kiln_cc *cc = NULL;
  kiln_err err = {0};
  kiln_status s = kiln_cc_create(&cfg, &cc, &err);
  /* The messages are the driver's own (they name the compiler, the file
   * and the system's reason). */
  if (s != KILN_OK) return kiln_error(s, loc, "%s", err.msg);
  out->found = true;
  snprintf(out->command, sizeof out->command, "%s", kiln_cc_command(cc));
  snprintf(out->version, sizeof out->version, "%s", kiln_cc_version(cc));
  static const char probe[] = "int kiln_doctor_probe(int x) { return x * 6; }\n";
  kiln_so *so = NULL;
  kiln_cc_result res = {0};
  uint64_t t0 = kiln_now_ns();
  s = kiln_cc_build(cc, probe, sizeof probe - 1, &so, &res, &err);
  if (s != KILN_OK) {
    kiln_cc_destroy(cc);
    return kiln_error(s, loc, "%s", err.msg);
  }
  out->compiled = true;
  int (*fn)(int) = (int (*)(int))kiln_so_symbol(so, "kiln_doctor_probe");
  out->compile_ms = (double)(kiln_now_ns() - t0) / 1e6;
  out->ran = fn && fn(7) == 42;
  kiln_so_close(so);
  kiln_cc_destroy(cc);
  if (!out->ran)
    return kiln_error(KILN_ERR_COMPILE, loc,
                      "kiln_compiler_probe: the test kernel compiled but did not load or run correctly");
  return KILN_OK;
}
