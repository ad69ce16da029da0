/* Internals of reverse-mode autograd: the vector-Jacobian product rules
 * (vjp.c) used by the backward driver (autograd.c). */
#ifndef KILN_AUTOGRAD_INTERNAL_H
#define KILN_AUTOGRAD_INTERNAL_H

#include <stdint.h>

#include "frontend/api.h"

/* 1 if op has a VJP rule (for float nodes); 0 for ops that carry no
 * gradient (comparisons, logic, indices, sources). */
int kiln_ag_differentiable(int op);
/* NULL, or the message naming the op table gradient formula that does not
 * parse (compiled once, at the first call). */
const char *kiln_ag_formula_error(void);

/* Build the gradients of node n's inputs given g, the gradient of n (a node
 * of n's dtype and shape). want[k] != 0 asks for input k; gin[k] receives
 * the gradient node (input k's dtype and shape) or NULL when input k gets
 * none. Nodes are built with the frontend's builders, tagged with loc.
 * Returns 0, or -1 on failure with the error recorded (out of memory). */
int kiln_ag_vjp(kiln_frontend *fe, kiln_node *n, kiln_node *g, const uint8_t *want, kiln_node **gin,
                kiln_loc loc);

/* 1 if n is a PERMUTE that swaps the last two axes only. */
int kiln_ag_is_swap_last2(const kiln_node *n);
/* For a MATMUL node mm = a @ b, a new node computing its transpose
 * (swap of the last two axes) as b^T @ a^T: a GEMM that writes the
 * transposed layout directly (NULL on out-of-memory). */
kiln_node *kiln_ag_transposed_matmul(kiln_frontend *fe, kiln_node *mm, kiln_loc loc);

/* Forget every requiring-grad record (their gradient tensors were released
 * with the runtime). Slot numbers restart with a new runtime, so stale
 * records could match new tensors: kiln_autograd_attach makes the runtime's
 * stop (KILN_EV_STOP, runtime/events.h) call it. */
void kiln_autograd_reset(void);
/* Register that reset as an observer of the runtime's events. Idempotent;
 * called by kiln_init before the runtime starts. */
void kiln_autograd_attach(void);

#endif
