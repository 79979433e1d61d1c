# requires: flashinfer
"""FlashInfer's MLA paged decode as the baseline (used where flashinfer is installed).

Planning happens inside the call, because every timed call gets fresh page tables."""
import torch
import flashinfer

_workspace = {}


@torch.no_grad()
def run(q_nope, q_pe, ckv_cache, kpe_cache, kv_indptr, kv_indices, sm_scale):
    device = q_nope.device
    if device not in _workspace:
        _workspace[device] = torch.empty(128 * 1024 * 1024, dtype=torch.int8, device=device)
    wrapper = flashinfer.mla.BatchMLAPagedAttentionWrapper(_workspace[device], backend="auto")
    batch = q_nope.shape[0]
    qo_indptr = torch.arange(batch + 1, dtype=torch.int32, device=device)
    kv_lens = (kv_indptr[1:] - kv_indptr[:-1]).to(torch.int32)
    wrapper.plan(qo_indptr, kv_indptr, kv_indices, kv_lens, 16, 512, 64, 1, False, float(sm_scale),
                 q_nope.dtype, ckv_cache.dtype)
    out, lse = wrapper.run(q_nope, q_pe, ckv_cache, kpe_cache, return_lse=True)
    return out, lse
