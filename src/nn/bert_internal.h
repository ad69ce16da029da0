/* What bert.c (the model) and bert_folder.c (the model folder's files) share. */
#ifndef KILN_BERT_INTERNAL_H
#define KILN_BERT_INTERNAL_H

#include "kiln/bert.h"

/* How hidden states become a sentence's embedding: the model folder's
 * sentence-transformers Pooling module (mean when the folder has none) */
enum { POOL_MEAN, POOL_CLS, POOL_MAX };

/* INVALID_ARGUMENT naming `what` unless c's sizes make a model. */
kiln_status kiln_bert_check_config(const kiln_bert_config *c, const char *what, kiln_loc loc);
/* config.json at path into *c (the sizes; an activation, position type or
 * model type other than BERT's is UNSUPPORTED). */
kiln_status kiln_bert_read_config(const char *path, kiln_bert_config *c, kiln_loc loc);
/* The folder's modules.json and Pooling config: *pooling a POOL_* (mean
 * without modules.json); another module or pooling mode is UNSUPPORTED. */
kiln_status kiln_bert_read_modules(const char *dir, const kiln_bert_config *c, int *pooling, kiln_loc loc);

#endif
