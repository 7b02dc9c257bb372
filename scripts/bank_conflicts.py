"""Run chosen chapters once each at one shape, for Nsight Compute to count their shared-memory conflicts.

    M=l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum
    ncu --clock-control none -k regex:flash_attention --metrics $M python scripts/bank_conflicts.py 3 4
"""

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from kernels import chapters, select  # noqa: E402

q, k, v = (torch.randn(4, 1024, 16, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
for chapter in select(chapters(), ",".join(sys.argv[1:])):
    chapter.attention(q, k, v)
    torch.cuda.synchronize()
    print(f"ran {chapter.name} on {tuple(q.shape)}")
