/* A program that returns from main while its last steps still execute
 * (kiln_mark_step does not wait; kiln_shutdown is never called) exits with
 * its own status: the GEMM library made its kernels in kiln_init
 * (kiln_gemm_warm), so no destructor it registers comes after the
 * exit drain, which lets the steps finish first (base/exit.h). Without the
 * warm-up, 4 to 6 of the 6 children died. Each child traces a matmul and a
 * triangle of its result at seven sizes of one dynamic family (the later
 * sizes are planned, not compiled: the program reaches exit while the first
 * step's GEMM would still initialise its library) and returns at once. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kiln/kiln.h"
#include "kt.h"

static void child(void) {
  if (kiln_init(NULL) != KILN_OK) _exit(3);
  static const int64_t sizes[] = {37, 2, 3, 5, 16, 61, 300};
  for (int i = 0; i < 7; i++) {
    int64_t T = sizes[i], sh[2] = {T, 5};
    float *d = malloc(sizeof(float) * (size_t)(T * 5));
    if (!d) _exit(4);
    for (int64_t j = 0; j < T * 5; j++) d[j] = (float)(j % 7) - 3;
    kiln_tensor x = kiln_dynamic(kiln_from_host(d, KILN_F32, 2, sh), 0);
    kiln_tensor y = kiln_keep(kiln_triu(kiln_matmul(x, kiln_transpose(x, 0, 1)), 1));
    (void)y;
    kiln_mark_step();
    free(d);
  }
  exit(0); /* as returning from main: the exit handlers run with the steps in flight */
}

KT_TEST(exit_with_steps_in_flight_is_clean) {
  for (int run = 0; run < 6; run++) {
    fflush(NULL);
    pid_t pid = fork();
    KT_CHECK(pid >= 0);
    if (pid == 0) child();
    int status = 0;
    KT_CHECK(waitpid(pid, &status, 0) == pid);
    KT_CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "run %d: %s %d", run,
                 WIFSIGNALED(status) ? "killed by signal" : "exit status",
                 WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
  }
}

KT_MAIN(KT_CASE(exit_with_steps_in_flight_is_clean))
