"""The op on the GPU: it runs the chapter it says, torch.compile(fullgraph=True) compiles it, CUDA graphs replay it;
with a scale, per-sequence KV lengths of a padded cache and the log-sum-exp it matches the exact attention."""

import math

import pytest
import torch

from kernels.launch import gpu_arch
from kernels.op import fastest_chapter, transformers_attention
from reference import attention_error, exact_attention
from tests.helpers import requires_gpu

pytestmark = requires_gpu


def attention(q, k, v, **options):
    return torch.ops.fa_ladder.attention(q, k, v, **options)


def gqa_inputs(
    seq_q: int = 300, seq_k: int = 300, *, seed: int = 0, batch: int = 2, n_heads: int = 16
) -> list[torch.Tensor]:
    """bf16 q of 16 heads, k and v of 8 (Qwen3's grouping), in the op's (batch, seq, heads, 128) layout."""
    generator = torch.Generator(device="cuda").manual_seed(seed)
    shapes = [(batch, seq_q, n_heads, 128), (batch, seq_k, 8, 128), (batch, seq_k, 8, 128)]
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


def kv_cache_inputs(
    seq_q: int, seq_k: int, lengths: list[int], *, n_heads: int = 16, seed: int = 0
) -> tuple[torch.Tensor, ...]:
    """q, a padded cache k, v whose slots past each sequence's length hold NaN (a kernel that reads them shows it),
    and the lengths as the op takes them: int32 on the GPU."""
    q, k, v = gqa_inputs(seq_q, seq_k, seed=seed, batch=len(lengths), n_heads=n_heads)
    for b, length in enumerate(lengths):
        k[b, length:] = math.nan
        v[b, length:] = math.nan
    return q, k, v, torch.tensor(lengths, dtype=torch.int32, device="cuda")


def random_lengths(seq_k: int, batch: int, seed: int) -> list[int]:
    """An empty sequence, a full one, and the rest anywhere in between."""
    generator = torch.Generator().manual_seed(seed)
    return [0, seq_k, *torch.randint(0, seq_k + 1, (batch - 2,), generator=generator).tolist()]


def assert_matches_exact(out: torch.Tensor, lse: torch.Tensor | None, exact: tuple[torch.Tensor, torch.Tensor]):
    """Output within the ladder's budget of the exact one; rows that see no key exactly 0; the log-sum-exp close,
    -inf where the row sees no key."""
    exact_out, exact_lse = exact
    assert torch.isfinite(out).all()
    error = attention_error(out, exact_out)
    assert error.rel_l2 < 1e-2, error
    no_key = exact_lse.isneginf().transpose(1, 2)  # (batch, seq_q, heads), as out is laid out
    assert (out[no_key] == 0).all()
    if lse is not None:
        assert lse.dtype == torch.float32 and lse.shape == exact_lse.shape
        torch.testing.assert_close(lse, exact_lse, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("n_heads", [16, 32], ids=["group-2", "group-4"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize(("seq_q", "seq_k"), [(1, 777), (64, 1000), (300, 517)], ids=["decode", "chunk", "prefill"])
def test_per_sequence_lengths_match_exact_attention(seq_q, seq_k, causal, n_heads):
    """Each sequence sees the first seq_lens_k[b] keys of its padded cache (never the NaN past them); causal aligns
    bottom-right on that length, so lengths below seq_q leave the first queries no key (output 0, lse -inf)."""
    lengths = random_lengths(seq_k, batch=6, seed=seq_q + n_heads)
    if causal and seq_q > 1:
        lengths[2] = seq_q // 2  # a sequence with fewer keys than queries
    q, k, v, seq_lens_k = kv_cache_inputs(seq_q, seq_k, lengths, n_heads=n_heads)
    exact = exact_attention(q, k, v, causal=causal, seq_lens_k=lengths, return_lse=True)
    options = {"causal": causal, "seq_lens_k": seq_lens_k}
    assert_matches_exact(attention(q, k, v, **options), None, exact)
    assert_matches_exact(*torch.ops.fa_ladder.attention_with_lse(q, k, v, **options), exact)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize(("seq_q", "seq_k"), [(1, 777), (300, 300), (256, 1024)], ids=["decode", "prefill", "chunk"])
def test_lse_without_lengths_matches_exact_attention(seq_q, seq_k, causal):
    q, k, v = gqa_inputs(seq_q, seq_k)
    exact = exact_attention(q, k, v, causal=causal, return_lse=True)
    assert_matches_exact(*torch.ops.fa_ladder.attention_with_lse(q, k, v, causal=causal), exact)


@pytest.mark.parametrize("scale", [0.02, 128**-0.5, 0.3])
def test_scale_matches_exact_attention(scale):
    q, k, v = gqa_inputs(200, 333)
    exact = exact_attention(q, k, v, causal=True, scale=scale, return_lse=True)
    assert_matches_exact(*torch.ops.fa_ladder.attention_with_lse(q, k, v, causal=True, scale=scale), exact)
    assert_matches_exact(attention(q, k, v, causal=True, scale=scale), None, exact)


def test_the_default_scale_is_one_over_root_128():
    q, k, v = gqa_inputs(100, 100)
    assert torch.equal(attention(q, k, v, scale=128**-0.5), attention(q, k, v))


@pytest.mark.parametrize(
    ("lengths", "message"),
    [([5, -1], "must not be negative, got a length of -1"), ([5, 301], r"at most seq_len_k = 300 .*got 301")],
    ids=["negative", "past-the-cache"],
)
def test_bad_lengths_are_refused_before_the_launch(lengths, message):
    q, k, v = gqa_inputs(1, 300)
    with pytest.raises(ValueError, match=message):
        attention(q, k, v, seq_lens_k=torch.tensor(lengths, dtype=torch.int32, device="cuda"))
    with pytest.raises(TypeError, match="torch.int32"):
        attention(q, k, v, seq_lens_k=torch.tensor(lengths, device="cuda"))


def test_a_chapter_without_lengths_or_lse_says_so():
    """Chapter 1 predates KV lengths and the log-sum-exp: asked for them by number, it names itself."""
    q, k, v = gqa_inputs(1, 300)
    seq_lens_k = torch.tensor([300, 7], dtype=torch.int32, device="cuda")
    with pytest.raises(ValueError, match="k01_naive"):
        attention(q, k, v, seq_lens_k=seq_lens_k, chapter=1)
    with pytest.raises(ValueError, match="k01_naive"):
        torch.ops.fa_ladder.attention_with_lse(q, k, v, chapter=1)


def test_opcheck_with_scale_lengths_and_lse():
    q, k, v = gqa_inputs(64, 333)
    options = {"causal": True, "scale": 0.1, "seq_lens_k": torch.tensor([333, 80], dtype=torch.int32, device="cuda")}
    torch.library.opcheck(torch.ops.fa_ladder.attention.default, (q, k, v), options)
    torch.library.opcheck(torch.ops.fa_ladder.attention_with_lse.default, (q, k, v), options)


def cache_block(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, seq_lens_k: torch.Tensor):
    """A little model around the LSE op with lengths and a scale, torch ops on both sides of it."""
    out, lse = torch.ops.fa_ladder.attention_with_lse(q * 0.5, k, v, causal=True, scale=0.1, seq_lens_k=seq_lens_k)
    return out.float().square().sum(-1), lse.exp()


@pytest.mark.parametrize("mode", ["default", "reduce-overhead"])
def test_compiled_with_lengths_and_lse_matches_eager(mode):
    """Inductor with the LSE op, its lengths a tensor input; "reduce-overhead" replays CUDA graphs on new lengths."""
    torch.compiler.reset()
    compiled = torch.compile(cache_block, fullgraph=True, mode=mode)
    for seed in (0, 1):
        lengths = random_lengths(700, batch=4, seed=seed)
        inputs = kv_cache_inputs(16, 700, lengths, seed=seed)
        for _ in range(3):  # "reduce-overhead" warms up, records its graph, then replays it
            out, denominator = compiled(*inputs)
        expected_out, expected_denominator = cache_block(*inputs)
        torch.testing.assert_close(out, expected_out, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(denominator, expected_denominator, rtol=1e-5, atol=0)


def test_cuda_graph_reads_the_lengths_at_replay():
    """Captured, the op checks the lengths' type and shape only (their values cannot be read during a capture);
    replayed, the kernel reads whatever lengths the tensor then holds."""
    q, k, v = gqa_inputs(1, 999, batch=3)
    seq_lens_k = torch.tensor([999, 999, 999], dtype=torch.int32, device="cuda")
    attention(q, k, v, seq_lens_k=seq_lens_k)  # compile and load the kernel before the capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = attention(q, k, v, seq_lens_k=seq_lens_k)
    for lengths in ([1, 500, 999], [0, 998, 17]):
        seq_lens_k.copy_(torch.tensor(lengths, dtype=torch.int32))
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(out, attention(q, k, v, seq_lens_k=seq_lens_k))
        assert_matches_exact(out, None, exact_attention(q, k, v, seq_lens_k=lengths, return_lse=True))


@pytest.mark.parametrize("scaling", [None, 0.05])
def test_transformers_function_applies_the_models_scaling(scaling):
    """transformers' layout (batch, heads, seq, 128) and its scaling, through the op."""
    q, k, v = gqa_inputs(40, 90)
    query, key, value = (x.transpose(1, 2) for x in (q, k, v))
    out, _ = transformers_attention(torch.nn.Module(), query, key, value, None, scaling=scaling)
    error = attention_error(out, exact_attention(q, k, v, causal=True, scale=scaling))
    assert error.rel_l2 < 1e-2, error
