# requires: flashinfer
"""FlashInfer's chunked GDN prefill as the baseline (used where flashinfer is installed).

FlashInfer takes the log-decay and beta directly and keeps its state in the k-last layout. If this
baseline does not match the reference on a machine, the harness times against the next baseline."""
import math

import torch
import torch.nn.functional as F
from flashinfer.gdn_prefill import chunk_gated_delta_rule


@torch.no_grad()
def run(q, k, v, state, A_log, a, dt_bias, b, cu_seqlens, scale):
    d = q.shape[-1]
    scale = float(scale) if scale else 1.0 / math.sqrt(d)
    log_decay = -torch.exp(A_log.float()) * F.softplus(a.float() + dt_bias.float())
    beta = torch.sigmoid(b.float())
    out, final = chunk_gated_delta_rule(
        q, k, v, g=torch.exp(log_decay), beta=beta, scale=scale, initial_state=state,
        output_final_state=True, cu_seqlens=cu_seqlens, use_qk_l2norm_in_kernel=False)
    return out.to(torch.bfloat16), final.float()
