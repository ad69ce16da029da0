/* kiln text: the WordPiece tokenizer of BERT models (e.g.
 * sentence-transformers/all-MiniLM-L6-v2), in C, so that a program needs no
 * Python to turn sentences into token ids.
 *
 * What it does (the same as Hugging Face's BertTokenizerFast: the `tokenizers`
 * BertNormalizer + BertPreTokenizer + WordPiece; the slow BertTokenizer
 * differs slightly, docs/text.md):
 *   1. clean: drop U+0000, U+FFFD and control characters (Unicode categories
 *      Cc, Cf, Cs, Co, except tab, newline, carriage return; unassigned code
 *      points, Cn, stay in their word); whitespace becomes a space;
 *   2. put spaces around CJK ideographs (each becomes a word);
 *   3. strip accents (canonical decomposition NFD, then drop category Mn);
 *   4. lower-case (per code point, Unicode simple lower-case mapping, except
 *      U+0130, which becomes i + U+0307 as Rust's char::to_lowercase);
 *   5. split on whitespace and on punctuation (Unicode P* and the ASCII
 *      symbols 33-47, 58-64, 91-96, 123-126: each its own word);
 *   6. WordPiece: greedy longest match first, continuation pieces prefixed
 *      "##"; a word with no full cover, or of more than 100 characters after
 *      normalization, becomes [UNK];
 *   7. [CLS] pieces [SEP], truncated to max_len ids in all.
 * Before step 1, the special tokens [UNK], [SEP], [PAD], [CLS] and [MASK]
 * (those the vocabulary has) written in the text are found in its raw
 * bytes, case-sensitive, anywhere (inside a word too): each is that token's
 * id, and the text between them goes through steps 1-6 (as Hugging Face's
 * tokenizers do: "x[SEP]y" is x [SEP] y; "[mask]" is three words).
 *
 * Ownership: kiln_tokenizer_create returns a tokenizer owned by the caller,
 * freed with kiln_tokenizer_destroy (NULL is a no-op). Strings returned by
 * kiln_tokenizer_token belong to the tokenizer.
 *
 * Errors: a constructor or encode error returns the status and records it in
 * the sticky status with the caller's file:line (kiln_last_error()).
 *
 * Threads: a tokenizer is immutable after creation: any number of threads may
 * encode with one tokenizer at once. */
#ifndef KILN_TEXT_H
#define KILN_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kiln/kiln.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kiln_tokenizer kiln_tokenizer;

/* Normalization switches. NULL options mean BERT uncased: both true. */
typedef struct kiln_tokenizer_options {
  bool lowercase;     /* step 4 above */
  bool strip_accents; /* step 3 above */
} kiln_tokenizer_options;

/* Largest vocabulary file accepted (bounds memory on a hostile file). */
#define KILN_TOKENIZER_MAX_VOCAB_BYTES ((size_t)64 << 20)
/* Words longer than this many characters (after normalization) are [UNK]. */
#define KILN_TOKENIZER_MAX_WORD_CHARS 100

/* Load a WordPiece vocabulary (vocab.txt: one token a line; the token on
 * line i, counted from 0, has id i; a repeated token keeps its last line, as
 * in transformers' load_vocab). The file must hold [UNK], [CLS] and [SEP].
 * Memory: the file size plus at most 24 bytes per token.
 * Errors (*out NULL): INVALID_ARGUMENT (NULL path or out), IO (missing or
 * unreadable file, not a regular file), CORRUPT (empty, larger than
 * KILN_TOKENIZER_MAX_VOCAB_BYTES, a NUL byte, a missing special token; the
 * message names the file), OUT_OF_MEMORY. Thread-safe. */
#define kiln_tokenizer_create(vocab_path, opts, out) \
  kiln_tokenizer_create_at((vocab_path), (opts), (out), KILN_HERE)
kiln_status kiln_tokenizer_create_at(const char *vocab_path, const kiln_tokenizer_options *opts,
                                     kiln_tokenizer **out, kiln_loc loc);
/* Free a tokenizer. NULL is a no-op. */
void kiln_tokenizer_destroy(kiln_tokenizer *t);

/* Encode len bytes of UTF-8 (utf8 need not be NUL-terminated; NULL with len
 * 0 is the empty text) as [CLS] wordpieces [SEP], truncated to max_len ids in
 * all (specials included: at most max_len - 2 wordpieces; max_len >= 2).
 * Writes the first min(n, cap) ids to ids[] and the full count n to *n_out,
 * so a call with cap 0 (ids may be NULL) asks for the size.
 * Errors (*n_out 0, nothing written): INVALID_ARGUMENT for a NULL tokenizer
 * or n_out, max_len < 2, cap < 0, ids NULL with cap > 0, and for invalid
 * UTF-8 (overlong forms, surrogates, truncated sequences, bytes over
 * U+10FFFF): the message names the byte offset. OUT_OF_MEMORY.
 * Thread-safe (the tokenizer is only read). */
#define kiln_tokenizer_encode(t, utf8, len, max_len, ids, cap, n_out) \
  kiln_tokenizer_encode_at((t), (utf8), (len), (max_len), (ids), (cap), (n_out), KILN_HERE)
kiln_status kiln_tokenizer_encode_at(const kiln_tokenizer *t, const char *utf8, size_t len, int64_t max_len,
                                     int64_t *ids, int64_t cap, int64_t *n_out, kiln_loc loc);

/* The id of a token ("[PAD]", "[CLS]", "[SEP]", "[UNK]", "[MASK]", "##ing",
 * ...), or -1 if the vocabulary lacks it or an argument is NULL. */
int64_t kiln_tokenizer_token_id(const kiln_tokenizer *t, const char *token);
/* The token of an id (owned by the tokenizer), or NULL if out of range. */
const char *kiln_tokenizer_token(const kiln_tokenizer *t, int64_t id);
/* The number of ids (lines of the vocabulary file); 0 for NULL. */
int64_t kiln_tokenizer_vocab_size(const kiln_tokenizer *t);

#ifdef __cplusplus
}
#endif

#endif
