/* Scenario S3: executions per step and their fixed cost (docs/debugging.md).
 *
 * An inference service runs a deep MLP over a batch each step and hands
 * every layer's activations to a monitor on the host. The slow variant
 * copies each layer's output to the host as soon as the layer is traced (a
 * "forward hook"), so the step is split into one graph per layer: each copy
 * is a value read that must execute the layer first. The fixed variant
 * keeps the activations, ends the step with one graph, then copies the same
 * activations: the same work and the same transfers, in one execution.
 *
 * Each execution carries a fixed host cost (linearizing the pending trace,
 * hashing it, finding the graph in the cache, enqueueing it); kiln_explain()
 * reports it. The difference between the variants is that cost times the
 * extra executions, plus the time host and device no longer overlap: the
 * host waits for each layer before it traces the next.
 *
 *   s3_executions [--fixed] [--steps N]
 */
#include <kiln/kiln.h>

#include "scenario_util.h"

#define B 32      /* batch */
#define W 128     /* width */
#define LAYERS 8

int main(int argc, char **argv) {
  scn_args a;
  int pr = scn_parse(argc, argv, "s3_executions", "S3: one graph per step vs. one graph per layer", 200, &a);
  if (pr) return pr < 0 ? 2 : 0;
  if (scn_init("s3_executions")) return 1;
  const char *variant = a.fixed ? "fixed" : "slow";

  kiln_linear *layers[LAYERS];
  for (int l = 0; l < LAYERS; l++) kiln_linear_create(W, W, true, (uint64_t)(l + 1), &layers[l]);
  kiln_mark_step(); /* materialize the weights */

  static float x[B * W], acts[LAYERS][B * W];
  int64_t xs[2] = {B, W};
  uint64_t rng = 7;
  double checksum = 0;
  scn_clock clk = {0};
  /* step -1 is untimed: it compiles the graphs; the timed steps show the
   * steady state */
  for (int step = -1; step < a.steps; step++) {
    if (step == 0) scn_clock_start(&clk);
    for (int i = 0; i < B * W; i++) x[i] = (float)(2 * scn_rand01(&rng) - 1);
    kiln_tensor h = kiln_from_host(x, KILN_F32, 2, xs), kept[LAYERS];
    for (int l = 0; l < LAYERS; l++) {
      h = kiln_tanh(kiln_linear_forward(layers[l], h));
      if (a.fixed)
        kept[l] = kiln_keep(h); /* a step output: computed by the step's one graph */
      else
        kiln_to_host(h, acts[l], sizeof acts[l]); /* S3: the per-layer read */
    }
    kiln_mark_step();
    if (a.fixed) {
      /* the same copies, after the step: they wait for it but cut nothing */
      for (int l = 0; l < LAYERS; l++) {
        kiln_to_host(kept[l], acts[l], sizeof acts[l]);
        kiln_release(kept[l]);
      }
    }
    for (int l = 0; l < LAYERS; l++) checksum += acts[l][step & 7];
  }
  scn_clock_report(&clk, "s3", variant, a.steps, B, "examples");
  printf("monitor checksum %.6f\n\n", checksum);
  printf("%s", kiln_explain());
  int rc = scn_check("s3_executions");
  for (int l = 0; l < LAYERS; l++) kiln_linear_destroy(layers[l]);
  kiln_shutdown();
  return rc;
}
