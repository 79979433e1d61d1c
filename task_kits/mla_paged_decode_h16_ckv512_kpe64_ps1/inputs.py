"""Input generator for the MLA paged decode kit.

Workload axes: batch_size and kv_len; request b gets a KV length drawn from [kv_len/2, kv_len],
its pages scattered at random over a cache with spare pages."""
import math

import torch


def make_inputs(axes, seed, device):
    g = torch.Generator(device="cpu").manual_seed(int(seed))
    batch, max_len = int(axes["batch_size"]), int(axes["kv_len"])
    lengths = torch.randint(max(1, max_len // 2), max_len + 1, (batch,), generator=g)
    total = int(lengths.sum())
    num_pages = total + max(16, total // 8)
    indptr = torch.zeros(batch + 1, dtype=torch.int32)
    indptr[1:] = torch.cumsum(lengths, 0).to(torch.int32)
    indices = torch.randperm(num_pages, generator=g)[:total].to(torch.int32)

    def randn(*shape, scale=1.0):
        return (torch.randn(*shape, generator=g) * scale).to(torch.bfloat16).to(device)

    return {
        "q_nope": randn(batch, 16, 512, scale=0.5),
        "q_pe": randn(batch, 16, 64, scale=0.5),
        "ckv_cache": randn(num_pages, 1, 512, scale=0.5),
        "kpe_cache": randn(num_pages, 1, 64, scale=0.5),
        "kv_indptr": indptr.to(device),
        "kv_indices": indices.to(device),
        "sm_scale": axes.get("sm_scale", 1.0 / math.sqrt(192.0)),
    }
