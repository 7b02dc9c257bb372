"""Run attention kernels once each at one shape: chapters, or torch's FA2 or cuDNN kernel through SDPA.

The program `runner.py profile` runs under Nsight Compute, and scripts/sanitize.py under compute-sanitizer:

    python -m kernels.tools.run_once 8 fa2 cudnn --batch 16 --seq-len 4096 --heads 16 [--causal] [--dtype fp16]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from kernels.chapters import Chapter, chapters
from kernels.launch import DTYPES, HEAD_DIM, gpu_arch
from kernels.tools.ablations import chapter_or_variant, is_variant
from kernels.tools.cli import ToolError, UsageError, names, run
from kernels.tools.commands import run_once_parser
from reference import FA4, SDPA_BACKENDS, fa4, sdpa_function

# Every chapter's kernel is named flash_attention, and a chapter's decode kernel, which its decoding calls launch
# instead, decode_attention. Torch's FA2 backend launches flash_fwd_kernel (or
# flash_fwd_splitkv_kernel where too few blocks would fill the GPU), cuDNN a generated
# cudnn_..._sdpa_..._flash_fprop_... kernel. Nsight Compute matches these regular expressions against their names.
CHAPTER_KERNEL = "flash_attention|decode_attention"
REFERENCES = {  # command-line name -> (row name, short name, kernel)
    "fa2": ("torch FA2", "FA2", "flash_fwd"),
    "cudnn": ("torch cuDNN", "cuDNN", "cudnn.*sdpa|fprop"),
    "fa4": (FA4, "FA4", "FlashAttentionForward|flash_fwd_sm"),
}


@dataclass(frozen=True)
class Target:
    """One kernel to run: how the command line names it, how tables head it, ``attention(q, k, v, *, causal)``,
    a regular expression for the name of the GPU kernel it launches, and the chapter it is (None: torch's)."""

    token: str
    name: str
    short_name: str
    attention: Callable[..., torch.Tensor]
    kernel: str
    chapter: Chapter | None = None

    def runs_on(self, gpu: str) -> bool:
        """Whether it runs on a GPU of this architecture ("sm_90"): torch's kernels run on any it supports."""
        return self.chapter is None or self.chapter.kernel.runs_on(gpu)


def chapter_target(chapter: Chapter) -> Target:
    """A chapter, or an ablation variant, as a target."""
    short_name = chapter.name if is_variant(chapter) else f"k{chapter.number:02d}"
    return Target(chapter.name, chapter.name, short_name, chapter.attention, CHAPTER_KERNEL, chapter)


def reference_target(token: str) -> Target:
    """Torch's FA2 ("fa2") or cuDNN ("cudnn") kernel, called through SDPA in the chapters' layout, or
    FlashAttention-4's ("fa4") where the package is installed."""
    name, short_name, kernel = REFERENCES[token]
    attention = fa4 if name == FA4 else sdpa_function(SDPA_BACKENDS[name])
    return Target(token, name, short_name, attention, kernel)


def targets(wanted: Sequence[str]) -> list[Target]:
    """Targets in the order named: chapter numbers or slugs ("5", "pipelining"), ablation variants ("k28_one_head"),
    "fa2", "cudnn", "fa4", as words or comma lists; none named: every chapter, then fa2 and cudnn. A UsageError
    names an unknown one."""
    tokens = [token.strip() for word in wanted for token in word.split(",") if token.strip()]
    all_chapters = chapters()
    found: list[Target] = []
    for token in tokens or [*(chapter.name for chapter in all_chapters), "fa2", "cudnn"]:
        if token.lower() in REFERENCES:
            found.append(reference_target(token.lower()))
            continue
        try:
            found.append(chapter_target(chapter_or_variant(token)))
        except UsageError as error:
            others = f"an ablation variant by name, or {', '.join(REFERENCES)} for the reference kernels"
            raise UsageError(f"{error}; or {others}") from error
    return list({target.token: target for target in found}.values())  # each once, in the order first named


def runnable(chosen: list[Target], gpu: str) -> list[Target]:
    """The targets that run on a GPU of this architecture; the others named on stderr as left out."""
    for target in chosen:
        if not target.runs_on(gpu):
            print(f"{target.name} left out: it is built for {target.chapter.kernel.arch} only", file=sys.stderr)
    return [target for target in chosen if target.runs_on(gpu)]


def run_once(
    target: Target,
    batch: int,
    seq_len: int,
    heads: int,
    dtype: torch.dtype,
    causal: bool,
    kv_heads: int | None = None,
    kv_len: int | None = None,
) -> None:
    """Launch the target's kernel once on random inputs, q (batch, seq_len, heads, 128) and k, v (batch, kv_len,
    kv_heads, 128), by default as long and with as many heads as q, and wait for it."""
    q = torch.randn(batch, seq_len, heads, HEAD_DIM, dtype=dtype, device="cuda")
    k, v = (
        torch.randn(batch, kv_len or seq_len, kv_heads or heads, HEAD_DIM, dtype=dtype, device="cuda") for _ in "kv"
    )
    target.attention(q, k, v, causal=causal)
    torch.cuda.synchronize()


def no_gpu(chosen: list[Target]) -> str:
    """Why nothing ran, naming what was asked for."""
    return f"No CUDA GPU found: running {names([target.name for target in chosen])} needs an NVIDIA GPU"


def run_targets(args: argparse.Namespace) -> int:
    """Run each target once; the first that fails stops the run."""
    chosen = targets(args.targets)
    if not torch.cuda.is_available():
        raise ToolError(no_gpu(chosen))
    shape = f"({args.batch}, {args.seq_len}, {args.heads}, {HEAD_DIM}) {args.dtype}{', causal' if args.causal else ''}"
    if args.kv_heads or args.kv_len:
        shape += f" against {args.kv_len or args.seq_len} keys of {args.kv_heads or args.heads} K/V heads"
    for target in runnable(chosen, gpu_arch(0)):
        try:
            shape_args = (args.batch, args.seq_len, args.heads, DTYPES[args.dtype], args.causal)
            run_once(target, *shape_args, args.kv_heads, args.kv_len)
        except (RuntimeError, ValueError) as error:  # a kernel that failed, or an SDPA backend that declined
            raise ToolError(f"{target.name} failed on {shape}: {error}") from error
        print(f"ran {target.name} once on {shape}")
    return 0


def main(argv: list[str], prog: str = "python -m kernels.tools.run_once") -> int:
    """Run the targets named in ``argv``; a bad name, no GPU or a failing kernel is one line on stderr."""
    return run(run_once_parser(prog), run_targets, argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
