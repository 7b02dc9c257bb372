"""Every chapter and ablation variant against the exact attention on the GPU: no worse than torch's own SDPA,
nothing unwritten; and each chapter's launch: layouts, streams, errors."""

import math

import pytest
import torch

from kernels import DTYPES, AttentionKernel, KernelError
from kernels.launch import gpu_arch
from reference import attention_error, exact_attention
from tests.helpers import GROUPED, check_chapter, random_qkv, requires_gpu

pytestmark = requires_gpu


@pytest.fixture(autouse=True)
def runs_on_this_gpu(request):
    """A kernel written for another GPU (wgmma: Hopper only) is skipped, naming why."""
    for name in ("chapter", "chapter_or_variant"):
        if name in request.fixturenames:
            try:
                request.getfixturevalue(name).kernel.build_arch(gpu_arch(0))
            except ValueError as error:
                pytest.skip(str(error))


@pytest.mark.parametrize("seq_len", [1, 77, 1000, 4096])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("dtype", DTYPES.values(), ids=DTYPES.keys())
def test_matches_exact_attention(chapter_or_variant, seq_len, causal, dtype):
    """Output poisoned with NaN first: a row or column the kernel leaves unwritten fails."""
    batch, heads = (1, 2) if seq_len == 4096 else (2, 3)
    check_chapter(chapter_or_variant, *random_qkv(batch, seq_len, heads, dtype, seed=seq_len), causal)


@pytest.mark.parametrize("seq_len", [63, 130, 515])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("dtype", DTYPES.values(), ids=DTYPES.keys())
def test_large_magnitude_inputs(chapter_or_variant, seq_len, causal, dtype):
    """Scores of several hundred: the softmax is nearly one-hot and the running max moves a lot."""
    check_chapter(chapter_or_variant, *random_qkv(2, seq_len, 2, dtype, scale=6.0, seed=seq_len), causal)


@pytest.mark.parametrize("shape", GROUPED, ids=[f"q{q}-k{k}-h{h}-kv{kv}" for _, q, k, h, kv in GROUPED])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("dtype", DTYPES.values(), ids=DTYPES.keys())
def test_grouped_heads_and_longer_kv(chapter_or_variant, shape, causal, dtype):
    """Query heads sharing K/V heads, query blocks at the end of more keys (see GROUPED)."""
    batch, seq_len_q, seq_len_k, heads, kv_heads = shape
    qkv = random_qkv(batch, seq_len_q, heads, dtype, seed=seq_len_k, seq_len_k=seq_len_k, kv_heads=kv_heads)
    check_chapter(chapter_or_variant, *qkv, causal)


@pytest.mark.parametrize("dtype", DTYPES.values(), ids=DTYPES.keys())
def test_more_queries_than_keys_without_a_mask(chapter_or_variant, dtype):
    """Without the causal mask the lengths are free: 515 queries on 63 keys, the keys all in one ragged tile."""
    check_chapter(chapter_or_variant, *random_qkv(1, 515, 16, dtype, seq_len_k=63, kv_heads=8), False)


def test_returns_new_tensor_in_input_layout(chapter):
    q, k, v = random_qkv(2, 100, 3, torch.bfloat16)
    out = chapter.attention(q, k, v)
    assert out.shape == q.shape and out.dtype == q.dtype and out.device == q.device
    assert out.data_ptr() not in (q.data_ptr(), k.data_ptr(), v.data_ptr())


def test_strided_and_misaligned_inputs_are_copied(chapter):
    """A view with other strides, or storage 2 bytes off 16-byte alignment, gives the same result."""
    q, k, v = random_qkv(2, 200, 4, torch.float16, seq_len_k=260, kv_heads=2)
    expected = chapter.attention(q, k, v, causal=True)
    transposed = [x.transpose(1, 2).contiguous().transpose(1, 2) for x in (q, k, v)]
    assert not transposed[0].is_contiguous()
    torch.testing.assert_close(chapter.attention(*transposed, causal=True), expected, rtol=0, atol=0)
    misaligned = []
    for x in (q, k, v):
        storage = torch.empty(x.numel() + 1, dtype=x.dtype, device="cuda")
        view = storage[1:].view(x.shape)
        view.copy_(x)
        misaligned.append(view)
    assert misaligned[0].data_ptr() % 16 != 0
    torch.testing.assert_close(chapter.attention(*misaligned, causal=True), expected, rtol=0, atol=0)


def test_launches_on_torchs_current_stream(chapter):
    """Captured into a CUDA graph: a launch on any other stream would break the capture or be missed."""
    q, k, v = random_qkv(1, 300, 2, torch.bfloat16)
    out = torch.full_like(q, math.nan)
    chapter.attention(q, k, v, out=out)  # compile and load outside the capture
    out.fill_(math.nan)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        chapter.attention(q, k, v, out=out)
    assert out.isnan().all(), "the kernel ran during capture: it was not launched on the capturing stream"
    graph.replay()
    torch.cuda.synchronize()
    assert attention_error(out, exact_attention(q, k, v)).rel_l2 < 1e-2


def test_deterministic(chapter):
    q, k, v = random_qkv(2, 333, 2, torch.bfloat16)
    first = chapter.attention(q, k, v, causal=True)
    assert torch.equal(first, chapter.attention(q, k, v, causal=True))


def test_out_of_another_shape_is_rejected(chapter):
    """An ``out`` that does not match q gets a ValueError before anything is launched."""
    q, k, v = random_qkv(1, 10, 1, torch.bfloat16)
    with pytest.raises(ValueError, match="out must match q"):
        chapter.attention(q, k, v, out=torch.empty(1, 10, 1, 64, device="cuda", dtype=torch.bfloat16))


def test_launch_error_names_the_chapter(chapter):
    """A launch the GPU refuses (twice the threads the kernel's launch bounds allow) is a KernelError that
    names the chapter, and leaves the GPU usable."""
    kernel = chapter.kernel
    too_many_threads = AttentionKernel(
        kernel.source, arch=kernel.arch, tensor_maps=kernel.tensor_map_box is not None, persistent=kernel.persistent
    )
    too_many_threads.n_threads = 2 * kernel.n_threads
    q, k, v = random_qkv(1, 100, 2, torch.bfloat16)
    with pytest.raises(KernelError, match=f"{chapter.name}: launch of grid"):
        too_many_threads(q, k, v)
    assert attention_error(chapter.attention(q, k, v), exact_attention(q, k, v)).rel_l2 < 1e-2


def test_a_plain_prefill_variant_refuses_kv_lengths_and_the_lse():
    """k20_no_splits compiles out per-sequence KV lengths and the log-sum-exp: asked for either, it says so."""
    from kernels.tools.ablations import find_ablation

    [plain] = [c for c in find_ablation("prefill_instance").contenders if c.name == "k20_no_splits"]
    q, k, v = (torch.randn(1, 64, 2, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    with pytest.raises(
        ValueError, match="k20_no_splits: compiled for plain prefill calls alone, without per-sequence KV lengths"
    ):
        plain.attention(q, k, v, seq_lens_k=torch.full((1,), 64, dtype=torch.int32, device="cuda"))
    with pytest.raises(
        ValueError, match="k20_no_splits: compiled for plain prefill calls alone, without the log-sum-exp"
    ):
        plain.attention(q, k, v, return_lse=True)
