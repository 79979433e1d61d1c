"""Wrong: forgets the decay."""
import math

import torch


@torch.no_grad()
def run(q, k, v, state, A_log, a, dt_bias, b, cu_seqlens, scale):
    total, hq, d = q.shape
    hv = v.shape[1]
    scale = float(scale) if scale else 1.0 / math.sqrt(d)
    qf = q.float().repeat_interleave(hv // hq, dim=1)
    kf = k.float().repeat_interleave(hv // hq, dim=1)
    beta = torch.sigmoid(b.float())
    out = torch.empty((total, hv, d), device=q.device)
    final = torch.empty((cu_seqlens.numel() - 1, hv, d, d), device=q.device)
    bounds = cu_seqlens.tolist()
    for s in range(len(bounds) - 1):
        S = state[s].float().clone()
        for t in range(bounds[s], bounds[s + 1]):
            err = v[t].float() - torch.bmm(S, kf[t][:, :, None])[..., 0]
            S += beta[t][:, None, None] * err[:, :, None] * kf[t][:, None, :]
            out[t] = torch.bmm(S, qf[t][:, :, None])[..., 0]
        final[s] = S
    return (out * scale).to(torch.bfloat16), final
