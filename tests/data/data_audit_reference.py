#!/usr/bin/env python3
"""PyTorch reference for kiln's sharded batcher (tests/unit/test_data_audit.c):
the indices torch.utils.data.DistributedSampler(shuffle=False, drop_last=True)
gives each rank. kiln's kiln_batch_options.shard_count / shard_rank is
documented as that sampler with drop_last (docs/semantics.md); the shuffled
orders differ (torch's generator is not kiln's), so only the unshuffled index
lists are compared; the shuffled case is checked in C against
kiln_data_permutation.

Writes tests/data/data_audit_reference.txt, one line per (N, W, rank):

    dsampler <N> <W> <rank>: <index> <index> ...

(N < W: torch gives every rank an empty list; kiln refuses such a batcher.)

Run (PyTorch 1.13):  /usr/bin/python3 tests/data/data_audit_reference.py [out_path]
Without torch installed it uses a transcription of torch 1.13's
torch/utils/data/distributed.py (num_samples, total_size, the slice
indices[rank:total_size:num_replicas]); both give the same lists.
"""
import math
import os
import sys

try:
    from torch.utils.data import DistributedSampler
except ImportError:  # torch 1.13 torch/utils/data/distributed.py, shuffle=False path
    class DistributedSampler:
        def __init__(self, dataset, num_replicas, rank, shuffle=False, drop_last=False):
            assert not shuffle
            self.n, self.w, self.rank, self.drop_last = len(dataset), num_replicas, rank, drop_last
            if drop_last and self.n % self.w != 0:
                self.num_samples = math.ceil((self.n - self.w) / self.w)
            else:
                self.num_samples = math.ceil(self.n / self.w)
            self.total_size = self.num_samples * self.w

        def __iter__(self):
            indices = list(range(self.n))
            if not self.drop_last:
                pad = self.total_size - len(indices)
                indices += (indices * math.ceil(pad / len(indices)))[:pad] if pad else []
            else:
                indices = indices[:self.total_size]
            return iter(indices[self.rank:self.total_size:self.w])

out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                         "data_audit_reference.txt")
lines = ["# torch.utils.data.DistributedSampler(shuffle=False, drop_last=True); see data_audit_reference.py"]
for n in (1, 2, 3, 4, 5, 7, 10, 11, 16, 17):
    for w in (2, 3, 4):
        for r in range(w):
            s = DistributedSampler(list(range(n)), num_replicas=w, rank=r, shuffle=False, drop_last=True)
            lines.append("dsampler %d %d %d: %s" % (n, w, r, " ".join(str(i) for i in s)))
with open(out, "w") as f:
    f.write("\n".join(lines) + "\n")
