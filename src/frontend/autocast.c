/* Autocast regions (include/kiln/kiln.h): a small stack of dtypes on the
 * frontend, read by the op builders that PyTorch's autocast lists (matmul
 * in 16 bits; softmax, the losses, layer norm in f32). Tracing-thread
 * calls, like the rest of the tracing API. */
#include "frontend/api.h"
#include "frontend/session.h"

void kiln_autocast_begin_at(kiln_dtype dt, kiln_loc loc) {
  kiln_frontend *fe = kiln_api_frontend_at(loc);
  if (!fe) return;
  if (dt != KILN_BF16 && dt != KILN_F16 && dt != KILN_F32) {
    kiln_error(KILN_ERR_INVALID_ARGUMENT, loc, "autocast_begin: dtype %s is not bf16, f16 or f32 (off)",
               kiln_dtype_name(dt));
    return;
  }
  if (fe->autocast_depth >= sizeof fe->autocast) {
    kiln_error(KILN_ERR_INVALID_ARGUMENT, loc, "autocast_begin: more than %d nested regions",
               (int)sizeof fe->autocast);
    return;
  }
  fe->autocast[fe->autocast_depth++] = (uint8_t)dt;
}

void kiln_autocast_end_at(kiln_loc loc) {
  kiln_frontend *fe = kiln_api_frontend_at(loc);
  if (!fe) return;
  if (!fe->autocast_depth) {
    kiln_error(KILN_ERR_INVALID_ARGUMENT, loc, "autocast_end: not inside an autocast region");
    return;
  }
  fe->autocast_depth--;
}

kiln_dtype kiln_api_autocast(const kiln_frontend *fe) {
  return fe && fe->autocast_depth ? (kiln_dtype)fe->autocast[fe->autocast_depth - 1] : KILN_F32;
}

kiln_dtype kiln_autocast_dtype(void) { return kiln_api_autocast(kiln_api_frontend_at((kiln_loc){0})); }
