"""The op on the GPU: it runs the chapter it says, torch.compile(fullgraph=True) compiles it, CUDA graphs replay it."""

import pytest
import torch

from kernels.launch import gpu_arch
from kernels.op import fastest_chapter
from reference import attention_error, exact_attention
from tests.helpers import requires_gpu

pytestmark = requires_gpu


def attention(q, k, v, **options):
    return torch.ops.fa_ladder.attention(q, k, v, **options)


def gqa_inputs(seq_q: int = 300, seq_k: int = 300, *, seed: int = 0) -> list[torch.Tensor]:
    """bf16 q of 16 heads, k and v of 8 (Qwen3's grouping), in the op's (batch, seq, heads, 128) layout."""
    generator = torch.Generator(device="cuda").manual_seed(seed)
    shapes = [(2, seq_q, 16, 128), (2, seq_k, 8, 128), (2, seq_k, 8, 128)]
    return [torch.randn(shape, device="cuda", generator=generator).to(torch.bfloat16) for shape in shapes]


def test_runs_the_fastest_chapter_for_this_gpu():
    q, k, v = gqa_inputs()
    expected = fastest_chapter(gpu_arch(0)).attention(q, k, v, causal=True)
    assert torch.equal(attention(q, k, v, causal=True), expected)


def test_runs_the_chapter_asked_for(chapter):
    if not chapter.kernel.runs_on(gpu_arch(0)):
        pytest.skip(f"{chapter.name} is written for {chapter.kernel.arch}")
    q, k, v = gqa_inputs(seed=chapter.number)
    assert torch.equal(attention(q, k, v, chapter=chapter.number), chapter.attention(q, k, v))


@pytest.mark.parametrize(("seq_q", "seq_k"), [(300, 300), (1, 777), (256, 1024)], ids=["prefill", "decode", "chunk"])
def test_matches_exact_attention_with_grouped_heads_and_a_kv_cache(seq_q, seq_k):
    q, k, v = gqa_inputs(seq_q, seq_k)
    error = attention_error(attention(q, k, v, causal=True), exact_attention(q, k, v, causal=True))
    assert error.rel_l2 < 1e-2, error


def test_opcheck():
    """torch's own checks of a custom op: schema, fake implementation against the real one, AOT dispatch."""
    torch.library.opcheck(torch.ops.fa_ladder.attention.default, tuple(gqa_inputs(200, 333)), {"causal": True})


def block(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """A little model around the op, so the compiler has torch ops on both sides of it."""
    return attention(q * 0.5, k, v, causal=True).float().square().sum(-1)


@pytest.mark.parametrize("mode", ["default", "reduce-overhead"])
def test_compiled_with_fullgraph_matches_eager(mode):
    """Inductor with the op in its graph; "reduce-overhead" also captures it into CUDA graphs. Two lengths, to
    compile for a second shape."""
    torch.compiler.reset()  # nothing compiled for the other mode is reused
    compiled = torch.compile(block, fullgraph=True, mode=mode)
    for seq_len in (300, 513):
        inputs = gqa_inputs(seq_len, seq_len)
        for _ in range(3):  # "reduce-overhead" warms up, records its graph, then replays it
            out = compiled(*inputs)
        torch.testing.assert_close(out, block(*inputs), rtol=1e-5, atol=1e-5)  # only the sums' order may differ


def test_cuda_graph_replays_on_new_inputs():
    q, k, v = gqa_inputs()
    attention(q, k, v, causal=True)  # compile and load the kernel before the capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = attention(q, k, v, causal=True)
    new = gqa_inputs(seed=1)
    for static, fresh in zip((q, k, v), new, strict=True):
        static.copy_(fresh)
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(out, attention(*new, causal=True))
