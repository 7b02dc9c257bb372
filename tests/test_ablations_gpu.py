"""Every ablation variant against the exact attention on the GPU, under the ladder's own error rule."""

import pytest

from kernels import DTYPES
from kernels.tools.ablations import ablations, is_variant
from tests.conftest import requires_gpu
from tests.test_kernels_gpu import GROUPED, check_chapter, random_qkv

pytestmark = requires_gpu

VARIANTS = [c for ablation in ablations() for c in ablation.contenders if is_variant(c)]


@pytest.fixture(params=VARIANTS, ids=[c.name for c in VARIANTS])
def variant(request):
    return request.param


@pytest.mark.parametrize("seq_len", [1, 77, 1000, 4096])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("dtype", DTYPES.values(), ids=DTYPES.keys())
def test_variant_matches_exact_attention(variant, seq_len, causal, dtype):
    """Output poisoned with NaN first: a row or column the variant leaves unwritten fails."""
    batch, heads = (1, 2) if seq_len == 4096 else (2, 3)
    check_chapter(variant, *random_qkv(batch, seq_len, heads, dtype, seed=seq_len), causal)


@pytest.mark.parametrize("seq_len", [63, 130, 515])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("dtype", DTYPES.values(), ids=DTYPES.keys())
def test_variant_with_large_magnitude_inputs(variant, seq_len, causal, dtype):
    """Scores of several hundred: the softmax is nearly one-hot and the running max moves a lot."""
    check_chapter(variant, *random_qkv(2, seq_len, 2, dtype, scale=6.0, seed=seq_len), causal)


@pytest.mark.parametrize("shape", GROUPED, ids=[f"q{q}-k{k}-h{h}-kv{kv}" for _, q, k, h, kv in GROUPED])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("dtype", DTYPES.values(), ids=DTYPES.keys())
def test_variant_with_grouped_heads_and_longer_kv(variant, shape, causal, dtype):
    """The chapters' grouped-head shapes: query heads sharing K/V heads, query blocks at the end of more keys."""
    batch, seq_len_q, seq_len_k, heads, kv_heads = shape
    qkv = random_qkv(batch, seq_len_q, heads, dtype, seed=seq_len_k, seq_len_k=seq_len_k, kv_heads=kv_heads)
    check_chapter(variant, *qkv, causal)


@pytest.mark.parametrize("dtype", DTYPES.values(), ids=DTYPES.keys())
def test_variant_with_more_queries_than_keys_without_a_mask(variant, dtype):
    """515 queries on 63 keys, the keys all in one ragged tile: the lengths are free without the mask."""
    check_chapter(variant, *random_qkv(1, 515, 16, dtype, seq_len_k=63, kv_heads=8), False)
