"""Plain PyTorch MLA decode: gather each request's rows, pad the batch, one masked softmax."""
import math

import torch


@torch.no_grad()
def run(q_nope, q_pe, ckv_cache, kpe_cache, kv_indptr, kv_indices, sm_scale):
    batch = q_nope.shape[0]
    lengths = (kv_indptr[1:] - kv_indptr[:-1]).long()
    longest = int(lengths.max())
    pos = torch.arange(longest, device=q_nope.device)
    valid = pos[None, :] < lengths[:, None]
    slot = (kv_indptr[:-1].long()[:, None] + pos[None, :]).clamp(max=kv_indices.numel() - 1)
    rows = kv_indices.long()[slot]  # [batch, longest]
    keys_c = ckv_cache[rows, 0].float()  # [batch, longest, 512]
    keys_p = kpe_cache[rows, 0].float()
    scores = (torch.einsum("bhd,bld->bhl", q_nope.float(), keys_c)
              + torch.einsum("bhd,bld->bhl", q_pe.float(), keys_p)) * float(sm_scale)
    scores = scores.masked_fill(~valid[:, None, :], float("-inf"))
    lse = torch.logsumexp(scores, dim=-1) / math.log(2.0)
    out = torch.einsum("bhl,bld->bhd", torch.softmax(scores, dim=-1), keys_c)
    return out.to(torch.bfloat16), lse
