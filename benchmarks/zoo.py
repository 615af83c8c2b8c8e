"""A zoo of real models through both of aicc's model frontends.

Every model installs from the package registries and needs no download at run time:
`torchvision.models` with `weights=None` and `transformers` architectures built from their
configs, all with seeded random weights, in eval mode. Each goes through

* the torch frontend: `compiler.compile(module, example_inputs)` (torch.export), checked
  against torch eager and timed next to it;
* the ONNX frontend: `torch.onnx.export` (the TorchScript exporter, opset 17; LLaMA with
  transformers' vmap-free attention mask, `Spec.onnx_attn`) then
  `compiler.compile(model_proto)`, checked against torch eager and timed next to ONNX Runtime.

    python benchmarks/zoo.py                     # every model at its real size
    python benchmarks/zoo.py --quick             # small configs (2 layers, hidden 64; 64x64 images)
    python benchmarks/zoo.py --only bert,resnet18 --frontends torch

Check: every output o against torch's r with `|o - r| <= 1e-4 * s + 1e-3 * |r|`, where
s = max |r| is the scale of that output (atol 1e-4 relative to the output's scale: the
logits of a random-weight model may run to hundreds, a feature map to 0.01); "max err" is
max |o - r| / s. A model that fails at any step is a row saying where
and why, never dropped. Rows go to benchmarks/results/zoo.json, merged by (model, frontend)
with the rows of earlier runs of the same mode (so `--only` runs one model at a time), and
the whole table to benchmarks/results/zoo.md (or zoo-quick.md).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import platform
import sys
import time
import traceback
import warnings
from pathlib import Path

os.environ.setdefault("AICC_CACHE", "0")  # compile seconds are cold compiles
os.environ.setdefault("AICC_PROGRESS", "0")

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

RTOL, ATOL = 1e-3, 1e-4
RESULTS = ROOT / "benchmarks" / "results"


# -- the packages ---------------------------------------------------------------------------------


def import_torchvision():
    """torchvision, also where its C++ extension cannot load.

    PyPI's torchvision wheels are built against CUDA torch; next to the CPU-only torch the
    extension (`_C.so`, the detection ops) fails to load, and torchvision 0.28 then stops at
    registering fake kernels for `torchvision::nms` / `qnms`, ops that do not exist without
    it. The classification and segmentation models need none of the extension's ops, so the
    two schemas are declared (never called) and the import retried."""
    import torch

    try:
        import torchvision
    except RuntimeError as e:
        if "torchvision::" not in str(e):
            raise
        for k in [k for k in sys.modules if k == "torchvision" or k.startswith("torchvision.")]:
            del sys.modules[k]
        global _TV_LIB
        _TV_LIB = torch.library.Library("torchvision", "DEF")  # noqa: PLW0603 (kept alive)
        _TV_LIB.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
        _TV_LIB.define("qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
        import torchvision
    return torchvision


_TV_LIB = None


# -- the models -----------------------------------------------------------------------------------


class Spec:
    """One zoo model: `build(quick)` returns (module, example inputs as torch tensors).

    `onnx_attn`: the transformers attention implementation to export to ONNX with, where the
    model's own cannot be traced (None: the model as built)."""

    def __init__(self, name, family, build, note="", onnx_attn=None):
        self.name, self.family, self.build, self.note = name, family, build, note
        self.onnx_attn = onnx_attn


def _seed(n=0):
    import torch

    torch.manual_seed(n)
    np.random.seed(n)


def _image(quick, size=224, small=64, batch=1):
    import torch

    s = small if quick else size
    return torch.randn(batch, 3, s, s, generator=torch.Generator().manual_seed(1))


def calibrate_batch_norm(model, image):
    """Give every BatchNorm the statistics of its input and a random affine map.

    torchvision's random init (BN at mean 0 / var 1, classifier weights ~ N(0, 0.01)) lets the
    activations of MobileNet / EfficientNet shrink layer by layer to outputs of 1e-10 or less,
    which any compiler matches. Like a model after training, each BN here gets a random
    affine map (a scale in [0.5, 1.5), a shift ~ N(0, 0.1)) and then the statistics of its
    input (one train-mode pass over 4 seeded images with momentum 1 records them), so
    that eval mode computes what that pass computed: activations stay of order 1, the network
    stays well conditioned (float32 torch agrees with float64), and the constant-folded
    conv + BN is really tested."""
    import torch

    bns = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    if not bns:
        return model.eval()
    momenta = [m.momentum for m in bns]
    g = torch.Generator().manual_seed(4)
    with torch.no_grad():
        for m in bns:  # the affine maps first, so that the statistics below are those of eval mode
            m.momentum = 1.0
            if m.affine:
                m.weight.copy_(torch.rand(m.weight.shape, generator=g) + 0.5)
                m.bias.copy_(torch.randn(m.bias.shape, generator=g) * 0.1)
        batch = torch.randn((4,) + tuple(image.shape[1:]), generator=g)
        model.train()
        model(batch)
    for m, mom in zip(bns, momenta):
        m.momentum = mom
    return model.eval()


def _tv(fn_name, size=224, small=64, **kw):
    def build(quick):
        tv = import_torchvision()
        _seed()
        m = getattr(tv.models, fn_name)(weights=None, **kw)
        x = _image(quick, size, small)
        return calibrate_batch_norm(m, x), (x,)

    return build


def _tv_segmentation(fn_name, size=224, small=64, **kw):
    def build(quick):
        tv = import_torchvision()
        _seed()
        m = getattr(tv.models.segmentation, fn_name)(weights=None, weights_backbone=None, **kw)
        x = _image(quick, size, small)
        return _Select(calibrate_batch_norm(m, x), "out"), (x,)

    return build


def _vit_tv(quick):
    tv = import_torchvision()
    _seed()
    if quick:
        from torchvision.models.vision_transformer import VisionTransformer

        m = VisionTransformer(image_size=64, patch_size=16, num_layers=2, num_heads=2,
                              hidden_dim=64, mlp_dim=128, num_classes=10)
    else:
        m = tv.models.vit_b_16(weights=None)
    import torch

    with torch.no_grad():  # torchvision starts the head at zero: every output would be 0
        m.heads.head.weight.normal_(0.0, 0.02, generator=torch.Generator().manual_seed(5))
    return m.eval(), (_image(quick),)


def _swin_tv(quick):
    tv = import_torchvision()
    _seed()
    if quick:
        from torchvision.models.swin_transformer import SwinTransformer

        m = SwinTransformer(patch_size=[4, 4], embed_dim=32, depths=[1, 1, 2, 1],
                            num_heads=[1, 2, 2, 4], window_size=[4, 4], num_classes=10)
        return m.eval(), (_image(True),)
    return tv.models.swin_t(weights=None).eval(), (_image(False),)


class _Select:
    """A module whose forward returns one entry / attribute of the wrapped model's output
    (aicc compiles models that return tensors; HF models return ModelOutput objects)."""

    def __new__(cls, model, key, names=None):
        import torch

        class Select(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.model = model
                self.key = key
                self.names = names

            def forward(self, *inputs):
                out = self.model(**dict(zip(self.names, inputs))) if self.names else self.model(*inputs)
                if isinstance(self.key, str):
                    return out[self.key]
                return out[self.key]

        Select.__name__ = type(model).__name__
        return Select().eval()


def _tokens(quick, vocab, seq=None, batch=1, pad=True):
    import torch

    s = seq or (16 if quick else 128)
    g = torch.Generator().manual_seed(2)
    ids = torch.randint(0, vocab, (batch, s), generator=g)
    mask = torch.ones(batch, s, dtype=torch.int64)
    if pad:
        mask[:, s - s // 4:] = 0  # padding at the end: the mask matters
    return ids, mask


SMALL = dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=2, intermediate_size=128,
             vocab_size=1000, max_position_embeddings=128)


def _hf(config_cls, model_cls, small, key="last_hidden_state", inputs="text", mask=True,
        seq=None, part=None, **full):
    def build(quick):
        try:  # transformers imports torchvision where it is installed: with the fix-up above
            import_torchvision()
        except ImportError:
            pass
        import transformers

        _seed()
        cfg = getattr(transformers, config_cls)(**(small if quick else full))
        model = getattr(transformers, model_cls)(cfg).eval()
        if part:
            model = getattr(model, part)()
        if inputs == "text":
            ids, m = _tokens(quick, cfg.vocab_size, seq)
            names = ["input_ids", "attention_mask"] if mask else ["input_ids"]
            args = (ids, m) if mask else (ids,)
        elif inputs == "image":
            size = getattr(cfg, "image_size", 224)
            size = size if isinstance(size, int) else size[0]
            names, args = ["pixel_values"], (_image(True, size, size),)
        elif inputs == "wave":  # wav2vec2: one second of 16 kHz audio (0.1 s quick)
            import torch

            names = ["input_values"]
            args = (torch.randn(1, 1600 if quick else 16000, generator=torch.Generator().manual_seed(3)),)
        elif inputs == "audio":  # whisper: log-mel features, 2 x max_source_positions frames
            import torch

            n = 2 * cfg.max_source_positions
            names = ["input_features"]
            args = (torch.randn(1, cfg.num_mel_bins, n, generator=torch.Generator().manual_seed(3)),)
        if inputs == "image":
            model = calibrate_batch_norm(model, args[0])
        return _Select(model, key, names), args

    return build


def _specs():
    S = SMALL
    text = [
        Spec("bert", "transformers", _hf("BertConfig", "BertModel", S)),
        Spec("distilbert", "transformers", _hf(
            "DistilBertConfig", "DistilBertModel",
            dict(n_layers=2, dim=64, n_heads=2, hidden_dim=128, vocab_size=1000,
                 max_position_embeddings=128))),
        Spec("roberta", "transformers", _hf(
            "RobertaConfig", "RobertaModel", {**S, "max_position_embeddings": 130})),
        Spec("gpt2", "transformers", _hf(
            "GPT2Config", "GPT2Model", dict(n_layer=2, n_embd=64, n_head=2, vocab_size=1000,
                                             n_positions=128), mask=False)),
        Spec("t5-encoder", "transformers", _hf(
            "T5Config", "T5EncoderModel", dict(num_layers=2, d_model=64, d_kv=32, num_heads=2,
                                               d_ff=128, vocab_size=1000))),
        Spec("vit", "transformers", _hf(
            "ViTConfig", "ViTModel", {**{k: v for k, v in S.items() if k not in ("vocab_size", "max_position_embeddings")},
                                      "image_size": 64, "patch_size": 16}, inputs="image")),
        Spec("whisper-encoder", "transformers", _hf(
            "WhisperConfig", "WhisperModel", dict(encoder_layers=2, decoder_layers=1, d_model=64,
                                                  encoder_attention_heads=2, decoder_attention_heads=2,
                                                  encoder_ffn_dim=128, decoder_ffn_dim=128,
                                                  num_mel_bins=80, max_source_positions=50,
                                                  vocab_size=1000, pad_token_id=0, bos_token_id=1,
                                                  eos_token_id=2, decoder_start_token_id=1),
            key="last_hidden_state", inputs="audio", part="get_encoder")),
        Spec("llama", "transformers", _hf(
            "LlamaConfig", "LlamaModel", {**S, "num_key_value_heads": 1, "head_dim": 32},
            # the default LlamaConfig is 7B: a 12-layer, 768-wide one instead (about 150M)
            hidden_size=768, num_hidden_layers=12, num_attention_heads=12, num_key_value_heads=4,
            intermediate_size=2048),
            # transformers builds LLaMA's causal + padding mask with torch.vmap, which the
            # TorchScript exporter cannot trace (RuntimeError: unordered_map::at): exported with
            # transformers' own vmap-free mask for export (integrations.executorch), same values
            onnx_attn="sdpa_without_vmap"),
        Spec("albert", "transformers", _hf(
            "AlbertConfig", "AlbertModel", {**S, "embedding_size": 32},
            # albert-base (the default config is xxlarge)
            hidden_size=768, num_attention_heads=12, intermediate_size=3072, embedding_size=128)),
        Spec("deberta-v2", "transformers", _hf(
            "DebertaV2Config", "DebertaV2Model", {**S, "relative_attention": True, "position_buckets": 8,
                                                  "pos_att_type": ["p2c", "c2p"], "max_relative_positions": 16},
            # deberta-v3-base's shape (the default config is xlarge)
            hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072,
            vocab_size=128100, relative_attention=True, position_buckets=256, norm_rel_ebd="layer_norm",
            share_att_key=True, pos_att_type=["p2c", "c2p"], max_relative_positions=-1)),
        Spec("bart-encoder", "transformers", _hf(
            "BartConfig", "BartModel", dict(encoder_layers=2, decoder_layers=1, d_model=64,
                                            encoder_attention_heads=2, decoder_attention_heads=2,
                                            encoder_ffn_dim=128, decoder_ffn_dim=128, vocab_size=1000,
                                            max_position_embeddings=128), part="get_encoder",
            # bart-base (the default config is bart-large)
            d_model=768, encoder_layers=6, decoder_layers=6, encoder_attention_heads=12,
            decoder_attention_heads=12, encoder_ffn_dim=3072, decoder_ffn_dim=3072)),
        Spec("opt", "transformers", _hf(
            "OPTConfig", "OPTModel", dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=2,
                                          ffn_dim=128, vocab_size=1000, max_position_embeddings=128,
                                          word_embed_proj_dim=64))),
        Spec("bloom", "transformers", _hf(
            "BloomConfig", "BloomModel", dict(n_layer=2, hidden_size=64, n_head=2, vocab_size=1000))),
        Spec("wav2vec2", "transformers", _hf(
            "Wav2Vec2Config", "Wav2Vec2Model", dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=2,
                                                    intermediate_size=128, conv_dim=(32, 32, 32),
                                                    conv_stride=(5, 2, 2), conv_kernel=(10, 3, 3),
                                                    num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4),
            inputs="wave")),
        Spec("mobilevit", "transformers", _hf(
            "MobileViTConfig", "MobileViTModel", dict(image_size=64, hidden_sizes=[32, 48, 64],
                                                      neck_hidden_sizes=[8, 16, 24, 32, 40, 48, 64],
                                                      num_attention_heads=2), inputs="image")),
        Spec("segformer", "transformers", _hf(
            "SegformerConfig", "SegformerModel", dict(image_size=64, depths=[1, 1, 1, 1], hidden_sizes=[16, 32, 48, 64],
                                                      num_attention_heads=[1, 1, 2, 2], decoder_hidden_size=64),
            inputs="image")),
        Spec("clip-text", "transformers", _hf(
            "CLIPTextConfig", "CLIPTextModel", {**S, "max_position_embeddings": 77},
            key="pooler_output", seq=16)),
        Spec("clip-vision", "transformers", _hf(
            "CLIPVisionConfig", "CLIPVisionModel",
            {k: v for k, v in S.items() if k not in ("vocab_size", "max_position_embeddings")}
            | {"image_size": 64, "patch_size": 16}, key="pooler_output", inputs="image")),
    ]
    vision = [
        Spec("resnet18", "torchvision", _tv("resnet18")),
        Spec("resnet50", "torchvision", _tv("resnet50")),
        Spec("mobilenet_v2", "torchvision", _tv("mobilenet_v2")),
        Spec("mobilenet_v3_small", "torchvision", _tv("mobilenet_v3_small")),
        Spec("efficientnet_b0", "torchvision", _tv("efficientnet_b0")),
        Spec("regnet_y_400mf", "torchvision", _tv("regnet_y_400mf")),
        Spec("convnext_tiny", "torchvision", _tv("convnext_tiny")),
        Spec("squeezenet1_1", "torchvision", _tv("squeezenet1_1")),
        Spec("shufflenet_v2_x0_5", "torchvision", _tv("shufflenet_v2_x0_5")),
        Spec("densenet121", "torchvision", _tv("densenet121")),
        Spec("vit_b_16", "torchvision", _vit_tv),
        Spec("swin_t", "torchvision", _swin_tv),
        Spec("deeplabv3_mobilenet_v3", "torchvision", _tv_segmentation("deeplabv3_mobilenet_v3_large")),
        Spec("lraspp_mobilenet_v3", "torchvision", _tv_segmentation("lraspp_mobilenet_v3_large")),
    ]
    return {s.name: s for s in vision + text}


SPECS = _specs()


# -- running one model ----------------------------------------------------------------------------


def outputs_of(out):
    """A model's outputs as a list of NumPy arrays."""
    import torch

    if isinstance(out, torch.Tensor):
        return [out.detach().numpy()]
    if isinstance(out, np.ndarray):
        return [out]
    if isinstance(out, list | tuple):
        return [a for o in out for a in outputs_of(o)]
    raise TypeError(f"unexpected output {type(out).__name__}")


def compare(got, want):
    """(ok, max err relative to each output's scale, why) of aicc's outputs against torch's."""
    if len(got) != len(want):
        return False, float("nan"), f"{len(got)} outputs, torch has {len(want)}"
    worst, ok = 0.0, True
    for o, r in zip(got, want):
        if o.shape != r.shape:
            return False, float("nan"), f"shape {o.shape}, torch has {r.shape}"
        o, r = o.astype(np.float64), r.astype(np.float64)
        scale = float(np.abs(r).max()) if r.size else 1.0
        scale = scale if scale > 0 else 1.0
        if not np.all(np.isfinite(o) == np.isfinite(r)):
            return False, float("inf"), "non-finite values where torch has finite ones"
        diff = np.abs(o - r)
        worst = max(worst, float(diff.max() / scale) if r.size else 0.0)
        ok &= bool(np.all(diff <= ATOL * scale + RTOL * np.abs(r)))
    return ok, worst, "" if ok else f"max err {worst:.2e} over rtol {RTOL} / atol {ATOL} x scale"


def median_ms(fn, *args, reps=None, budget=2.0):
    fn(*args)
    t0 = time.perf_counter()
    fn(*args)
    once = time.perf_counter() - t0
    n = reps or max(3, min(50, int(budget / max(once, 1e-6))))
    ts = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn(*args)
        ts.append(time.perf_counter() - t0)
    return 1e3 * float(np.median(ts))


@contextlib.contextmanager
def attention_implementation(module, name):
    """Every transformers config in `module` set to attention implementation `name` while in
    the block, and restored after it. "sdpa_without_vmap" is transformers' SDPA attention with
    the mask built without torch.vmap (registered here as transformers' ExecuTorch export
    does): the TorchScript exporter cannot trace vmap."""
    if name is None:
        yield
        return
    if name == "sdpa_without_vmap":
        from transformers.integrations.executorch import sdpa_mask_without_vmap
        from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS
        from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

        ALL_MASK_ATTENTION_FUNCTIONS.register(name, sdpa_mask_without_vmap)
        ALL_ATTENTION_FUNCTIONS.register(name, ALL_ATTENTION_FUNCTIONS["sdpa"])
    configs = {id(c): c for m in module.modules()
               if hasattr(c := getattr(m, "config", None), "_attn_implementation")}
    if not configs:
        raise ValueError(f"attention implementation {name!r} asked for a model without a transformers config")
    old = {k: c._attn_implementation for k, c in configs.items()}
    try:
        for c in configs.values():
            c._attn_implementation = name
        yield
    finally:
        for k, c in configs.items():
            c._attn_implementation = old[k]


def to_onnx(module, inputs, attn=None):
    """The module through torch.onnx.export (the TorchScript exporter, opset 17), with the
    transformers attention implementation `attn` (None: the module's own)."""
    import onnx
    import torch

    f = io.BytesIO()
    names = [f"input{i}" for i in range(len(inputs))]
    with warnings.catch_warnings(), attention_implementation(module, attn):
        warnings.simplefilter("ignore")
        torch.onnx.export(module, tuple(inputs), f, dynamo=False, input_names=names, opset_version=17)
    return onnx.load_from_string(f.getvalue())


def _why(stage, e):
    line = next((ln.strip() for ln in str(e).splitlines() if ln.strip()), "")
    return f"{stage}: {type(e).__name__}: {line}"[:300]


def run_model(spec, quick, frontends=("torch", "onnx"), threads=1, time_it=True, verbose=False):
    """The rows of one model: one per frontend."""
    import torch

    import compiler

    torch.set_num_threads(threads)
    rows = []
    base = {"model": spec.name, "family": spec.family}
    try:
        module, inputs = spec.build(quick)
        with torch.no_grad():
            want = outputs_of(module(*inputs))
    except Exception as e:
        return [dict(base, frontend=f, compiled=False, why=_why("building the model", e)) for f in frontends]
    shapes = " ".join("x".join(map(str, t.shape)) for t in inputs)
    base["inputs"] = shapes
    base["scale"] = max((float(np.abs(w).max()) for w in want if w.size), default=0.0)
    np_inputs = [t.numpy() for t in inputs]
    eager_ms = None
    if time_it:
        with torch.no_grad():
            eager_ms = median_ms(lambda: module(*inputs))

    for fe in frontends:
        row = dict(base, frontend=fe, compiled=False)
        rows.append(row)
        stage = "export"
        try:
            t0 = time.perf_counter()
            if fe == "torch":
                stage = "compile"
                m = compiler.compile(module, inputs, threads=threads)
            else:
                proto = to_onnx(module, inputs, spec.onnx_attn)
                row["export_s"] = time.perf_counter() - t0
                t0 = time.perf_counter()
                stage = "compile"
                m = compiler.compile(proto, np_inputs, threads=threads)
            row["compile_s"] = time.perf_counter() - t0
            row["compiled"] = True
            row["kernels"] = m.stats.get("kernels")
            stage = "run"
            got = outputs_of(m(*np_inputs))
            ok, err, why = compare(got, want)
            row.update(ok=ok, max_err=err)
            if not ok:
                row["why"] = "mismatch: " + why
            if time_it:
                stage = "timing"
                row["aicc_ms"] = median_ms(m, *np_inputs)
                if fe == "torch":
                    row["peer"], row["peer_ms"] = "torch eager", eager_ms
                else:
                    row["peer"], row["peer_ms"] = "onnxruntime", _ort_ms(proto, np_inputs, threads)
        except Exception as e:
            row["why"] = _why(stage, e)
            if verbose:
                traceback.print_exc()
    return rows


def _ort_ms(proto, inputs, threads):
    try:
        import onnxruntime as ort
    except ImportError:
        return None
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    sess = ort.InferenceSession(proto.SerializeToString(), so, providers=["CPUExecutionProvider"])
    feed = {i.name: a for i, a in zip(sess.get_inputs(), inputs)}
    return median_ms(lambda: sess.run(None, feed))


# -- the table ------------------------------------------------------------------------------------


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} logical CPUs"


def _fmt(v, f):
    return "" if v is None else format(v, f)


def table(rows) -> str:
    head = ("| model | frontend | inputs | compiled? | kernels | scale | max err | compile s | aicc ms | "
            "peer ms | peer | note |")
    lines = [head, "|" + "---|" * 12]
    for r in rows:
        if r.get("compiled") and r.get("ok"):
            status = "yes"
        elif r.get("compiled"):
            status = "MISMATCH" if "mismatch" in r.get("why", "") else "yes (run failed)"
        elif r.get("not_run"):
            status = "not run"
        else:
            status = "no"
        lines.append("| " + " | ".join([
            r["model"], r["frontend"], r.get("inputs", ""), status, _fmt(r.get("kernels"), "d"),
            _fmt(r.get("scale"), ".2g"), _fmt(r.get("max_err"), ".1e"), _fmt(r.get("compile_s"), ".1f"), _fmt(r.get("aicc_ms"), ".2f"),
            _fmt(r.get("peer_ms"), ".2f"), r.get("peer", ""), r.get("why", "").replace("|", "\\|"),
        ]) + " |")
    return "\n".join(lines)


def write_results(rows, quick, threads):
    RESULTS.mkdir(parents=True, exist_ok=True)
    mode = "quick" if quick else "full"
    store = RESULTS / "zoo.json"
    data = json.loads(store.read_text()) if store.exists() else {}
    old = {(r["model"], r["frontend"]): r for r in data.get(mode, {}).get("rows", [])}
    for r in rows:
        old[(r["model"], r["frontend"])] = r
    order = list(SPECS)
    for name in order:  # a model no run has reached yet is a row too
        for fe in ("torch", "onnx"):
            old.setdefault((name, fe), {"model": name, "family": SPECS[name].family, "frontend": fe,
                                        "compiled": False, "not_run": True, "why": "not run yet"})
    merged = sorted(old.values(), key=lambda r: (order.index(r["model"]) if r["model"] in order else 999,
                                                 r["frontend"] != "torch"))
    load = os.getloadavg()[1] if hasattr(os, "getloadavg") else None
    data[mode] = {"machine": machine(), "threads": threads, "rows": merged,
                  "load": data.get(mode, {}).get("load") if load is None else load}
    store.write_text(json.dumps(data, indent=1, default=float) + "\n")
    md = RESULTS / ("zoo-quick.md" if quick else "zoo.md")
    n_ok = sum(1 for r in merged if r.get("ok"))
    n_run = sum(1 for r in merged if not r.get("not_run"))
    md.write_text(
        f"# aicc model zoo ({mode})\n\n"
        f"`python benchmarks/zoo.py{' --quick' if quick else ''}`. Machine: {machine()}; "
        f"aicc, torch and ONNX Runtime on {threads} thread(s)"
        + (f"; load average {load:.1f} at the end of the last run (a shared machine: times are "
           "indicative)" if load is not None else "")
        + ". Random weights (seeded), eval mode.\n"
        f"Check: |aicc - torch| <= {ATOL} x s + {RTOL} x |torch| with s = max |torch output| (the "
        f"output's scale, column 'scale'); "
        f"max err = max |aicc - torch| / s. compile s: a cold compile (AICC_CACHE=0), "
        f"the torch.export / ONNX import included. aicc ms and peer ms: medians.\n\n"
        f"{n_ok} of the {n_run} rows run ({len(merged)} in all) compile and match.\n\n" + table(merged) + "\n")
    return md


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="small configs (fast)")
    p.add_argument("--only", default="", help="comma-separated model names")
    p.add_argument("--frontends", default="torch,onnx")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--no-time", action="store_true", help="check only, no timing")
    p.add_argument("--no-write", action="store_true")
    p.add_argument("--list", action="store_true")
    p.add_argument("-v", "--verbose", action="store_true", help="tracebacks of failures")
    args = p.parse_args(argv)
    if args.list:
        print("\n".join(f"{s.name} ({s.family})" for s in SPECS.values()))
        return 0
    names = [n for n in args.only.split(",") if n] or list(SPECS)
    unknown = [n for n in names if n not in SPECS]
    if unknown:
        p.error(f"unknown model(s) {', '.join(unknown)}; --list shows them")
    frontends = tuple(f for f in args.frontends.split(",") if f)
    rows = []
    for name in names:
        t0 = time.perf_counter()
        new = run_model(SPECS[name], args.quick, frontends, args.threads, not args.no_time, args.verbose)
        rows += new
        for r in new:
            print(f"{name:24s} {r['frontend']:6s} {'ok' if r.get('ok') else 'FAIL':4s} "
                  f"kernels={r.get('kernels')} err={_fmt(r.get('max_err'), '.1e')} "
                  f"compile={_fmt(r.get('compile_s'), '.1f')}s aicc={_fmt(r.get('aicc_ms'), '.2f')}ms "
                  f"peer={_fmt(r.get('peer_ms'), '.2f')}ms {r.get('why', '')}", flush=True)
        print(f"  ({time.perf_counter() - t0:.0f} s)", flush=True)
    print(table(rows))
    if not args.no_write:
        print(f"wrote {write_results(rows, args.quick, args.threads)}")
    return 0 if all(r.get("ok") for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
