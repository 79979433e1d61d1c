"""Plain PyTorch GDN prefill: the recurrence token by token, all heads of a sequence at once."""
import math

import torch
import torch.nn.functional as F


@torch.no_grad()
def run(q, k, v, state, A_log, a, dt_bias, b, cu_seqlens, scale):
    total, hq, d = q.shape
    hv = v.shape[1]
    scale = float(scale) if scale else 1.0 / math.sqrt(d)
    qf = q.float().repeat_interleave(hv // hq, dim=1)
    kf = k.float().repeat_interleave(hv // hq, dim=1)
    vf = v.float()
    decay = torch.exp(-torch.exp(A_log.float()) * F.softplus(a.float() + dt_bias.float()))
    beta = torch.sigmoid(b.float())
    n = cu_seqlens.numel() - 1
    bounds = cu_seqlens.tolist()
    out = torch.empty((total, hv, d), dtype=torch.float32, device=q.device)
    final = torch.empty((n, hv, d, d), dtype=torch.float32, device=q.device)
    for s in range(n):
        S = state[s].float().clone() if state is not None else q.new_zeros((hv, d, d), dtype=torch.float32)
        for t in range(bounds[s], bounds[s + 1]):
            S.mul_(decay[t][:, None, None])
            err = vf[t] - torch.bmm(S, kf[t][:, :, None])[..., 0]
            S.add_(beta[t][:, None, None] * err[:, :, None] * kf[t][:, None, :])
            out[t] = torch.bmm(S, qf[t][:, :, None])[..., 0]
        final[s] = S
    return (out * scale).to(torch.bfloat16), final
