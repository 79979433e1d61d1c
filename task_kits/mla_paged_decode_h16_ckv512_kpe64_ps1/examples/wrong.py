"""Wrong: natural-log LSE instead of base 2."""
import torch

from_baseline = None


@torch.no_grad()
def run(q_nope, q_pe, ckv_cache, kpe_cache, kv_indptr, kv_indices, sm_scale):
    import math
    batch = q_nope.shape[0]
    outs, lses = [], []
    for b in range(batch):
        rows = kv_indices[int(kv_indptr[b]):int(kv_indptr[b + 1])].long()
        kc, kp = ckv_cache[rows, 0].float(), kpe_cache[rows, 0].float()
        s = (q_nope[b].float() @ kc.T + q_pe[b].float() @ kp.T) * float(sm_scale)
        lses.append(torch.logsumexp(s, -1))
        outs.append((torch.softmax(s, -1) @ kc).to(torch.bfloat16))
    return torch.stack(outs), torch.stack(lses)
