"""The torch op without a GPU: its fake implementation, tracing and compiling through it, the chapter it picks,
and the errors it and the transformers attention function raise."""

from types import SimpleNamespace

import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

from kernels import AttentionKernel, Chapter, chapters, op
from kernels.op import chapter_for, fastest_chapter, transformers_attention

OP = torch.ops.fa_ladder.attention.default
LSE_OP = torch.ops.fa_ladder.attention_with_lse.default


def qkv(device: str, *, seq_q: int = 5, seq_k: int = 9, dtype: torch.dtype = torch.bfloat16) -> list[torch.Tensor]:
    """q of 16 heads and k, v of 8 (grouped-query attention), more keys than queries, in the op's layout."""
    shapes = [(2, seq_q, 16, 128), (2, seq_k, 8, 128), (2, seq_k, 8, 128)]
    return [torch.zeros(shape, dtype=dtype, device=device) for shape in shapes]


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_fake_output_is_shaped_like_q(dtype):
    q, k, v = qkv("meta", dtype=dtype)
    out = OP(q, k, v, causal=True)
    assert out.shape == q.shape and out.dtype == dtype and out.device.type == "meta" and out.is_contiguous()


def test_fake_output_is_contiguous_for_a_transposed_q():
    """The kernels write a new contiguous output whatever q's strides: the fake must say the same."""
    q, k, v = (x.transpose(1, 2).contiguous().transpose(1, 2) for x in qkv("meta"))
    assert not q.is_contiguous()
    assert OP(q, k, v).is_contiguous()


def test_make_fx_traces_the_op_without_running_it():
    def model(q, k, v):
        return torch.ops.fa_ladder.attention(q, k, v, causal=True, chapter=4).sum(-1)

    graph = make_fx(model, tracing_mode="fake")(*qkv("cpu"))
    [call] = [node for node in graph.graph.nodes if node.target is OP]
    assert (call.args[3:], call.kwargs) in [((True, None, None, 4), {}), ((True,), {"chapter": 4})]
    assert call.meta["val"].shape == (2, 5, 16, 128)


def lengths(device: str) -> torch.Tensor:
    return torch.tensor([9, 0], dtype=torch.int32, device=device)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_fake_lse_is_float32_per_head_and_query(dtype):
    q, k, v = qkv("meta", dtype=dtype)
    out, lse = LSE_OP(q, k, v, causal=True, scale=0.1, seq_lens_k=lengths("meta"))
    assert out.shape == q.shape and out.dtype == dtype and out.is_contiguous()
    assert lse.shape == (2, 16, 5) and lse.dtype == torch.float32 and lse.device.type == "meta" and lse.is_contiguous()


def test_make_fx_records_scale_and_lengths():
    def model(q, k, v, seq_lens_k):
        out, lse = torch.ops.fa_ladder.attention_with_lse(q, k, v, scale=0.25, seq_lens_k=seq_lens_k)
        return out.sum(-1), lse

    graph = make_fx(model, tracing_mode="fake")(*qkv("cpu"), lengths("cpu"))
    [call] = [node for node in graph.graph.nodes if node.target is LSE_OP]
    arguments = dict(zip(("causal", "scale", "seq_lens_k", "chapter"), call.args[3:], strict=False)) | call.kwargs
    assert arguments["scale"] == 0.25 and arguments["seq_lens_k"].op == "placeholder"
    assert [tuple(value.shape) for value in call.meta["val"]] == [(2, 5, 16, 128), (2, 16, 5)]


def test_compile_fullgraph_keeps_the_op_in_one_graph():
    """Dynamo traces through the op with no graph break; meta inputs run the fake, so no GPU is needed."""
    graphs = []

    def record(graph_module, example_inputs):
        graphs.append(graph_module)
        return graph_module.forward

    def model(q, k, v):
        return torch.ops.fa_ladder.attention(q, k, v, causal=True) * 2

    out = torch.compile(model, fullgraph=True, backend=record)(*qkv("meta"))
    assert out.shape == (2, 5, 16, 128)
    [graph] = graphs
    assert sum(node.target is torch.ops.fa_ladder.attention for node in graph.graph.nodes) == 1


def test_compile_fullgraph_with_scale_lengths_and_lse():
    graphs = []

    def record(graph_module, example_inputs):
        graphs.append(graph_module)
        return graph_module.forward

    def model(q, k, v, seq_lens_k):
        out, lse = torch.ops.fa_ladder.attention_with_lse(q, k, v, causal=True, scale=0.1, seq_lens_k=seq_lens_k)
        return out * 2, lse.exp()

    out, denominator = torch.compile(model, fullgraph=True, backend=record)(*qkv("meta"), lengths("meta"))
    assert out.shape == (2, 5, 16, 128) and denominator.shape == (2, 16, 5) and denominator.dtype == torch.float32
    [graph] = graphs
    assert sum(node.target is torch.ops.fa_ladder.attention_with_lse for node in graph.graph.nodes) == 1


@pytest.mark.parametrize("arch", ["sm_80", "sm_86", "sm_89", "sm_90", "sm_100", "sm_120"])
def test_fastest_chapter_is_the_last_that_runs_on_the_gpu(arch):
    ladder = chapters()
    chosen = fastest_chapter(arch)
    assert chosen.kernel.runs_on(arch)
    assert not any(c.kernel.runs_on(arch) for c in ladder if c.number > chosen.number)


def test_hopper_gets_the_top_of_the_ladder_and_other_gpus_a_portable_chapter():
    assert fastest_chapter("sm_90") == chapters()[-1]
    assert fastest_chapter("sm_80").kernel.arch is None


def fake_chapter(number: int, arch: str | None) -> Chapter:
    """A chapter that is never built or run: only its number and architecture matter here."""
    kernel = AttentionKernel(chapters()[0].source, arch=arch)  # kernel 1's launch shape, another architecture
    return Chapter(number, "x", "", kernel)


def test_fastest_chapter_falls_back_past_chapters_for_other_gpus():
    ladder = [fake_chapter(1, None), fake_chapter(2, None), fake_chapter(3, "sm_90a"), fake_chapter(4, "sm_100a")]
    assert fastest_chapter("sm_80", ladder).number == 2
    assert fastest_chapter("sm_90", ladder).number == 3
    assert fastest_chapter("sm_100", ladder).number == 4


def stub_chapter(number: int, arch: str | None, kv_cache: bool) -> Chapter:
    """A chapter that is only a number, the architecture it runs on and whether it takes KV lengths."""
    kernel = SimpleNamespace(kv_cache=kv_cache, runs_on=lambda gpu: arch is None or arch.removesuffix("a") == gpu)
    return Chapter(number, "x", "", kernel)


def test_kv_cache_picks_the_fastest_chapter_with_lengths_and_lse():
    ladder = [stub_chapter(1, None, False), stub_chapter(2, None, True), stub_chapter(3, None, False)]
    ladder += [stub_chapter(4, "sm_90a", True), stub_chapter(5, "sm_90a", False)]
    assert fastest_chapter("sm_80", ladder).number == 3
    assert fastest_chapter("sm_80", ladder, kv_cache=True).number == 2
    assert fastest_chapter("sm_90", ladder).number == 5
    assert fastest_chapter("sm_90", ladder, kv_cache=True).number == 4
    with pytest.raises(ValueError, match="no chapter runs on sm_80 with per-sequence KV lengths or the log-sum-exp"):
        fastest_chapter("sm_80", ladder[:1], kv_cache=True)


def test_no_chapter_for_the_gpu_names_it():
    with pytest.raises(ValueError, match="no chapter runs on sm_80"):
        fastest_chapter("sm_80", [fake_chapter(9, "sm_90a")])


def test_a_chapter_asked_for_by_number():
    assert chapter_for(0, 4).number == 4
    with pytest.raises(ValueError, match="no chapter '99'"):
        chapter_for(0, 99)


@pytest.mark.parametrize(
    "call",
    [OP, torch.ops.fa_ladder.attention, LSE_OP, torch.ops.fa_ladder.attention_with_lse],
    ids=["overload", "packet", "lse-overload", "lse-packet"],
)
def test_input_errors_pass_through_the_op(call):
    q = torch.zeros(2, 5, 16, 128, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="q is on cpu; the kernels need tensors on a CUDA device"):
        call(q, q, q)
    with pytest.raises(TypeError, match="q has dtype torch.float32"):
        call(q.float(), q, q)
    with pytest.raises(ValueError, match="causal attention needs seq_len_q <= seq_len_k"):
        call(q, q[:, :4], q[:, :4], causal=True)


def test_a_bad_scale_is_named_before_a_chapter_is_picked(monkeypatch):
    """The scale is checked with the inputs; only then is a chapter picked (here: never, the checks stop first)."""
    monkeypatch.setattr(op, "check_inputs", lambda q, k, v, causal: (q, k, v))  # as if the tensors were on a GPU
    monkeypatch.setattr(op, "chapter_for", lambda *args, **kwargs: pytest.fail("a chapter was picked"))
    q = torch.zeros(2, 5, 16, 128, dtype=torch.bfloat16)
    for scale, message in ((0.0, "scale must be finite and above zero, got 0.0"), (float("nan"), "got nan")):
        with pytest.raises(ValueError, match=message):
            torch.ops.fa_ladder.attention(q, q, q, scale=scale)


@pytest.mark.parametrize(
    ("options", "kv_cache"),
    [({}, False), ({"seq_lens_k": "lengths"}, True), ({"return_lse": True}, True), ({"scale": 0.2}, False)],
    ids=["plain", "lengths", "lse", "scale"],
)
def test_the_op_passes_its_arguments_to_the_chapter_it_picks(monkeypatch, options, kv_cache):
    """Lengths or the log-sum-exp ask for a chapter that has them; every argument reaches the chapter's kernel."""
    calls, picked = [], []

    def kernel(q, k, v, **kwargs):
        calls.append(kwargs)
        return (q.clone(), q[..., 0].float()) if kwargs["return_lse"] else q.clone()

    def pick(device_index, number=None, *, kv_cache=False):
        picked.append((number, kv_cache))
        return SimpleNamespace(attention=kernel)

    monkeypatch.setattr(op, "check_inputs", lambda q, k, v, causal: (q, k, v))
    monkeypatch.setattr(op, "chapter_for", pick)
    q = torch.zeros(2, 5, 16, 128, dtype=torch.bfloat16)
    seq_lens_k = lengths("cpu") if options.get("seq_lens_k") else None
    run = op.attention_with_lse if options.get("return_lse") else op.attention
    run(q, q, q, causal=True, scale=options.get("scale"), seq_lens_k=seq_lens_k, chapter=7)
    assert picked == [(7, kv_cache)]
    [passed] = calls
    assert passed["causal"] is True and passed["return_lse"] is bool(options.get("return_lse"))
    assert passed["scale"] == pytest.approx(options.get("scale", 128**-0.5))
    assert passed["seq_lens_k"] is seq_lens_k or torch.equal(passed["seq_lens_k"], seq_lens_k)


def transformers_qkv(seq_q: int = 5, seq_k: int = 9) -> list[torch.Tensor]:
    """transformers' layout, (batch, heads, seq, 128)."""
    return [x.transpose(1, 2) for x in qkv("meta", seq_q=seq_q, seq_k=seq_k)]


def test_transformers_function_returns_transformers_layout():
    query, key, value = transformers_qkv()
    out, weights = transformers_attention(torch.nn.Module(), query, key, value, None, scaling=128**-0.5)
    assert out.shape == (2, 5, 16, 128) and weights is None  # (batch, seq, heads, 128)


@pytest.mark.parametrize("scaling", [None, 128**-0.5, 0.1])
def test_transformers_scaling_is_the_ops_scale(monkeypatch, scaling):
    """Any softmax scale a model asks for reaches the op, which applies it (None: the op's 1/sqrt(128))."""
    calls = []
    monkeypatch.setattr(op, "attention", lambda q, k, v, **options: calls.append(options) or q)
    query, key, value = transformers_qkv()
    transformers_attention(torch.nn.Module(), query, key, value, None, scaling=scaling)
    assert calls == [{"causal": True, "scale": scaling}]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"attention_mask": torch.ones(2, 1, 5, 9, dtype=torch.bool)}, "no attention mask"),
        ({"dropout": 0.1}, "no dropout"),
        ({"sliding_window": 4096}, "no sliding_window"),
        ({"softcap": 30.0}, "no softcap"),
    ],
)
def test_transformers_function_refuses_what_the_kernels_do_not_compute(options, message):
    options = {"attention_mask": None, **options}
    with pytest.raises(ValueError, match=message):
        transformers_attention(torch.nn.Module(), *transformers_qkv(), **options)


def tiny_qwen3(attn_implementation: str):
    """A randomly initialised two-layer Qwen3 in bf16: 16 heads of 128, as many key/value heads (one q, k, v shape)."""
    transformers = pytest.importorskip("transformers")
    config = transformers.Qwen3Config(
        vocab_size=128,
        hidden_size=256,
        intermediate_size=512,
        num_hidden_layers=2,
        num_attention_heads=16,
        num_key_value_heads=16,
        head_dim=128,
    )
    model = transformers.Qwen3ForCausalLM._from_config(config, attn_implementation=attn_implementation)
    return model.to(torch.bfloat16).eval()


def test_transformers_model_calls_the_op():
    """Registered, the model's attention reaches the op: on the CPU, the op's own device error comes back."""
    from kernels.op import register_with_transformers

    model = tiny_qwen3(register_with_transformers())
    with pytest.raises(ValueError, match="q is on cpu"), torch.no_grad():
        model(torch.arange(6)[None])


def test_transformers_padding_mask_is_refused():
    from kernels.op import register_with_transformers

    model = tiny_qwen3(register_with_transformers())
    mask = torch.tensor([[0, 0, 1, 1, 1, 1]])
    with pytest.raises(ValueError, match="no attention mask"), torch.no_grad():
        model(torch.arange(6)[None], attention_mask=mask)
