/* End-to-end: the `kiln` program on inputs and arguments nobody meant to
 * give it. The oracle is the command-line contract (tools/kiln.c): a bad
 * argument or input is a clear error naming it, with a meaningful exit
 * status (2 usage, 1 a problem; `graph diff` 2), never a crash, never
 * success when the output could not be written, and memory bounded by
 * what the input holds. `kiln embed --ids` runs on a small vocabulary
 * written here (a model folder needs only vocab.txt for ids): no model
 * download. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kt.h"

static char g_bin[1024]; /* <build>/bin */
static char g_tmp[1024]; /* a scratch directory of this run */

static void cleanup(void) {
  char cmd[4200];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_tmp);
  if (g_tmp[0] && system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", g_tmp);
}

static void setup(void) {
  if (g_bin[0]) return;
  ssize_t n = readlink("/proc/self/exe", g_bin, sizeof g_bin - 1);
  g_bin[n > 0 ? n : 0] = 0;
  for (int i = 0; i < 2; i++) { /* <build>/bin/tests/test_cli_inputs -> <build>/bin */
    char *s = strrchr(g_bin, '/');
    if (s) *s = 0;
  }
  const char *t = getenv("TMPDIR");
  snprintf(g_tmp, sizeof g_tmp, "%s/kiln-cli-inputs-XXXXXX", t && *t ? t : "/tmp");
  if (!mkdtemp(g_tmp)) KT_FAIL("mkdtemp %s", g_tmp);
  atexit(cleanup);
  /* a vocabulary for `embed --ids` */
  char path[4200];
  snprintf(path, sizeof path, "%s/model", g_tmp);
  mkdir(path, 0700);
  snprintf(path, sizeof path, "%s/model/vocab.txt", g_tmp);
  FILE *f = fopen(path, "w");
  if (f) {
    fputs("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nhello\nworld\n##s\n", f);
    fclose(f);
  }
}

/* Run a shell command (sh -c) with stderr merged into stdout, read into out
 * (cap bytes); returns the exit status (-1 if it did not exit). */
static int run_cmd(const char *cmd, char *out, size_t cap) {
  char full[12300];
  snprintf(full, sizeof full, "{ %s ; } 2>&1", cmd);
  FILE *p = popen(full, "r");
  if (!p) return -1;
  size_t n = fread(out, 1, cap - 1, p);
  out[n] = 0;
  while (fgetc(p) != EOF) {
  }
  int st = pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void write_file(const char *name, const char *data, size_t n) {
  char path[4200];
  snprintf(path, sizeof path, "%s/%s", g_tmp, name);
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(data, 1, n, f) != n) KT_FAIL("cannot write %s", path);
  if (f) fclose(f);
}

/* Every command's output to a full device: an error naming the write, and
 * exit status 1 (graph: 2), not 0. */
KT_TEST(output_to_a_full_device_fails) {
  setup();
  static const struct {
    const char *args;
    int status;
  } cases[] = {{"version", 1}, {"--version", 1}, {"help", 1},        {"ops", 1},
               {"ops --markdown", 1}, {"graph --help", 2}, {"train --help", 1}, {"embed --help", 1}};
  char cmd[12288], out[8192];
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    snprintf(cmd, sizeof cmd, "'%s/kiln' %s > /dev/full", g_bin, cases[i].args);
    KT_EQ_INT(run_cmd(cmd, out, sizeof out), cases[i].status);
    KT_STR_CONTAINS(out, "cannot write standard output: No space left on device");
    snprintf(cmd, sizeof cmd, "'%s/kiln' %s > /dev/null", g_bin, cases[i].args);
    KT_EQ_INT(run_cmd(cmd, out, sizeof out), 0);
  }
  snprintf(cmd, sizeof cmd, "printf 'hello\\n' | '%s/kiln' embed --model '%s/model' --ids > /dev/full", g_bin, g_tmp);
  KT_EQ_INT(run_cmd(cmd, out, sizeof out), 1);
  KT_STR_CONTAINS(out, "kiln embed: cannot write standard output: No space left on device");
}

/* A reader that goes away while SIGPIPE is ignored (as under Python's
 * subprocess with restore_signals=False): embed stops at the next chunk
 * with status 1 and says why, instead of reading all its input. */
KT_TEST(embed_stops_when_its_reader_goes_away) {
  setup();
  char cmd[12288], out[8192];
  snprintf(cmd, sizeof cmd,
           "trap '' PIPE; yes 'hello worlds' | head -n 400000 | "
           "{ '%s/kiln' embed --model '%s/model' --ids; echo \"kiln status $?\" >&2; } | head -n 1",
           g_bin, g_tmp);
  run_cmd(cmd, out, sizeof out);
  KT_STR_CONTAINS(out, "2 5 6 7 3\n");
  KT_STR_CONTAINS(out, "kiln embed: cannot write standard output: Broken pipe");
  KT_STR_CONTAINS(out, "kiln status 1");
}

/* An IDX file (big-endian magic and dims) of n bytes of data. */
static void write_idx(const char *path, int rank, const int *dims, const unsigned char *data, size_t n) {
  FILE *f = fopen(path, "wb");
  if (!f) {
    KT_FAIL("cannot write %s", path);
    return;
  }
  unsigned char head[4] = {0, 0, 0x08, (unsigned char)rank};
  fwrite(head, 1, 4, f);
  for (int i = 0; i < rank; i++) {
    unsigned char d[4] = {0, 0, (unsigned char)(dims[i] >> 8), (unsigned char)dims[i]};
    fwrite(d, 1, 4, f);
  }
  fwrite(data, 1, n, f);
  fclose(f);
}

/* A Fashion-MNIST directory of 16 random 28x28 images (train and test). */
static void write_tiny_fashion_mnist(const char *dir) {
  mkdir(dir, 0700);
  static unsigned char img[16 * 28 * 28], lab[16];
  unsigned x = 12345;
  for (size_t i = 0; i < sizeof img; i++) img[i] = (unsigned char)((x = x * 1103515245u + 12345u) >> 24);
  for (int i = 0; i < 16; i++) lab[i] = (unsigned char)(i % 10);
  char path[4300];
  for (int t = 0; t < 2; t++) {
    const char *pre = t ? "t10k" : "train";
    snprintf(path, sizeof path, "%s/%s-images-idx3-ubyte", dir, pre);
    write_idx(path, 3, (const int[]){16, 28, 28}, img, sizeof img);
    snprintf(path, sizeof path, "%s/%s-labels-idx1-ubyte", dir, pre);
    write_idx(path, 1, (const int[]){16}, lab, sizeof lab);
  }
}

/* A learning rate that makes the loss NaN: status 1, a message that says
 * so, and no checkpoint (it would hold NaN weights). */
KT_TEST(train_refuses_a_diverged_run) {
  setup();
  char cmd[12288], out[8192], data[1200], ckpt[1200];
  snprintf(data, sizeof data, "%s/fm", g_tmp);
  write_tiny_fashion_mnist(data);
  snprintf(ckpt, sizeof ckpt, "%s/ckpt/m.safetensors", g_tmp);
  char ckdir[1200];
  snprintf(ckdir, sizeof ckdir, "%s/ckpt", g_tmp);
  mkdir(ckdir, 0700);
  static const char *const steps[] = {"1", "3"}; /* 1: only the final evaluation sees the NaN weights */
  for (int i = 0; i < 2; i++) {
    snprintf(cmd, sizeof cmd,
             "'%s/kiln' train --quiet --data '%s' --batch 4 --max-steps %s --lr 1e30 --checkpoint '%s'", g_bin,
             data, steps[i], ckpt);
    KT_EQ_INT(run_cmd(cmd, out, sizeof out), 1);
    KT_STR_CONTAINS(out, "training diverged (try a smaller --lr)");
    KT_CHECK_MSG(strstr(out, "final test accuracy") == NULL, "%s", out);
    KT_CHECK_MSG(access(ckpt, F_OK) != 0, "a checkpoint was written after: %s", out);
  }
  snprintf(cmd, sizeof cmd, "ls -A '%s'", ckdir);
  KT_EQ_INT(run_cmd(cmd, out, sizeof out), 0);
  KT_CHECK_MSG(out[0] == 0, "left in the checkpoint's directory: %s", out);
  /* the same data with a sane rate trains and checkpoints */
  snprintf(cmd, sizeof cmd, "'%s/kiln' train --quiet --data '%s' --batch 4 --max-steps 2 --checkpoint '%s'", g_bin,
           data, ckpt);
  KT_EQ_INT(run_cmd(cmd, out, sizeof out), 0);
  KT_CHECK(access(ckpt, F_OK) == 0);
}

/* An unknown option is called one, wherever it stands (at the end it was
 * "needs a value"). */
KT_TEST(train_names_an_unknown_option) {
  setup();
  static const char *const args[] = {"--bogus", "--epochs 3 --bogus", "--bogus 3", "--max-steps 1 --resume"};
  char cmd[12288], out[8192];
  for (size_t i = 0; i < sizeof args / sizeof args[0]; i++) {
    snprintf(cmd, sizeof cmd, "'%s/kiln' train %s", g_bin, args[i]);
    KT_EQ_INT(run_cmd(cmd, out, sizeof out), 2);
    KT_STR_CONTAINS(out, "kiln train: unknown option '--");
    KT_CHECK_MSG(strstr(out, "needs a value") == NULL, "%s: %s", args[i], out);
  }
  snprintf(cmd, sizeof cmd, "'%s/kiln' train --lr", g_bin);
  KT_EQ_INT(run_cmd(cmd, out, sizeof out), 2);
  KT_STR_CONTAINS(out, "kiln train: --lr needs a value");
}

/* Run cmd in a child of a child, so that RUSAGE_CHILDREN counts it alone:
 * its exit status; *max_rss_kb the largest resident size among its
 * processes. */
static int run_measured(const char *cmd, char *out, size_t cap, long *max_rss_kb) {
  int fds[2];
  if (pipe(fds) != 0) return -1;
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    long r[2] = {run_cmd(cmd, out, cap), 0};
    struct rusage ru;
    if (getrusage(RUSAGE_CHILDREN, &ru) == 0) r[1] = ru.ru_maxrss;
    if (write(fds[1], r, sizeof r) != (ssize_t)sizeof r) _exit(1);
    if (write(fds[1], out, strlen(out) + 1) < 0) _exit(1);
    _exit(0);
  }
  close(fds[1]);
  long r[2] = {-1, 0};
  if (pid < 0 || read(fds[0], r, sizeof r) != (ssize_t)sizeof r) r[0] = -1;
  ssize_t n = pid < 0 ? 0 : read(fds[0], out, cap - 1);
  out[n > 0 ? n : 0] = 0;
  close(fds[0]);
  if (pid > 0) waitpid(pid, NULL, 0);
  *max_rss_kb = r[1];
  return (int)r[0];
}

/* A 32 MiB line that is one word: [UNK], with memory for the line and a
 * segment of it (it took ~9 bytes per byte: 280 MiB for 30 MB). Words cut
 * into segments keep their ids: controls inside a word are dropped, and
 * the pieces on either side of a cut are one word. */
KT_TEST(embed_long_word_memory_is_bounded) {
  setup();
  char cmd[12288], out[8192];
  long rss = 0;
  /* under AddressSanitizer, freed blocks wait in its quarantine (256 MiB by default): the line's buffer as it
   * grew would count; without the quarantine the bound holds there too (71 MiB measured) */
#if defined(__SANITIZE_ADDRESS__)
  const char *asan = "ASAN_OPTIONS=\"$ASAN_OPTIONS:quarantine_size_mb=0\" ";
#else
  const char *asan = "";
#endif
  snprintf(cmd, sizeof cmd, "head -c 33554432 /dev/zero | tr '\\0' x | %s'%s/kiln' embed --model '%s/model' --ids",
           asan, g_bin, g_tmp);
  KT_EQ_INT(run_measured(cmd, out, sizeof out, &rss), 0);
  KT_CHECK_MSG(strcmp(out, "2 1 3\n") == 0, "got: %.200s", out);
  KT_CHECK_MSG(rss > 0 && rss < 3 * 32768, "max RSS %ld KiB for a 32 MiB line", rss);
  /* 6000 controls, then hello: one word, the controls dropped; a word cut
   * by 5000 controls; a 5000-letter word then a short one */
  snprintf(cmd, sizeof cmd,
           "{ head -c 6000 /dev/zero | tr '\\0' '\\001'; printf 'hello\\n'; printf 'hel'; "
           "head -c 5000 /dev/zero | tr '\\0' '\\001'; printf 'lo worlds\\n'; head -c 5000 /dev/zero | tr '\\0' a; "
           "printf ' hello\\n'; } | '%s/kiln' embed --model '%s/model' --ids",
           g_bin, g_tmp);
  KT_EQ_INT(run_cmd(cmd, out, sizeof out), 0);
  KT_CHECK_MSG(strcmp(out, "2 5 3\n2 5 6 7 3\n2 1 5 3\n") == 0, "got: %.200s", out);
}

static const char k_graph[] = "# kiln graph dump, text format v1 (docs/graphs.md)\nkey 0x1\n"
                               "cause step marker at x.c:1\ngraph 0x2: 3 nodes, 2 inputs, 1 outputs\n"
                               "%0 = leaf f32[4] input=0 @ x.c:1\n%1 = leaf f32[4] input=1 @ x.c:2\n"
                               "%2 = add f32[4] %0, %1 @ x.c:3\ninputs: %0 %1\noutputs: %2\n";

/* graph diff on files that are no graphs: status 2 and a message that
 * names the file; the same file twice, or one read from a pipe, is equal. */
KT_TEST(graph_diff_names_the_unusable_file) {
  setup();
  write_file("g.txt", k_graph, sizeof k_graph - 1);
  write_file("empty.txt", "", 0);
  write_file("cut.txt", k_graph, 150);
  write_file("junk.bin", "\x7f\x00\xff\x12garbage\n\x01", 14);
  char dir[1200];
  snprintf(dir, sizeof dir, "%s/adir", g_tmp);
  mkdir(dir, 0700);
  static const struct {
    const char *file, *says;
  } bad[] = {{"empty.txt", "empty.txt:1: "}, {"cut.txt", "cut.txt:5: "},    {"junk.bin", "junk.bin:1: "},
             {"adir", "adir: is a directory, not a graph file"}, {"nonexistent", "cannot open "}};
  char cmd[12288], out[8192];
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    snprintf(cmd, sizeof cmd, "cd '%s' && '%s/kiln' graph diff g.txt %s", g_tmp, g_bin, bad[i].file);
    KT_EQ_INT(run_cmd(cmd, out, sizeof out), 2);
    KT_STR_CONTAINS(out, bad[i].says);
    snprintf(cmd, sizeof cmd, "cd '%s' && '%s/kiln' graph diff %s g.txt", g_tmp, g_bin, bad[i].file);
    KT_EQ_INT(run_cmd(cmd, out, sizeof out), 2);
    KT_STR_CONTAINS(out, bad[i].says);
  }
  snprintf(cmd, sizeof cmd, "cd '%s' && '%s/kiln' graph diff g.txt g.txt", g_tmp, g_bin);
  KT_EQ_INT(run_cmd(cmd, out, sizeof out), 0);
  KT_STR_CONTAINS(out, "no differences");
  snprintf(cmd, sizeof cmd, "cd '%s' && cat g.txt | '%s/kiln' graph diff /dev/stdin g.txt", g_tmp, g_bin);
  KT_EQ_INT(run_cmd(cmd, out, sizeof out), 0);
}

KT_MAIN(KT_CASE(output_to_a_full_device_fails), KT_CASE(embed_stops_when_its_reader_goes_away),
        KT_CASE(train_refuses_a_diverged_run), KT_CASE(train_names_an_unknown_option),
        KT_CASE(graph_diff_names_the_unusable_file), KT_CASE(embed_long_word_memory_is_bounded))
