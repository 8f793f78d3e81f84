#!/usr/bin/env python3
"""Build the tiny model-family test models of tests/data/families (issue 19, part 4).

    /work/.venv-corpus/bin/python scripts/build_family_models.py OUT [--corpus DIR] [--only a,b]

One small model per family a user brings: OCR detection (DBNet-style) and recognition (CRNN with
a bidirectional LSTM), a YOLO-style detector, UNet and DeepLab-style segmenters, an LSTM
voice-activity model, and transformers' EfficientNet, ResNet-50 (bottleneck), Swin, ConvNeXt,
DeBERTa-v2, BLOOM, Whisper encoder and T5 encoder at tiny widths (8-64 channels, 1-2 layers)
so the committed data stays small. Weights are seeded random (transformers init, or kaiming
convs with BatchNorm statistics calibrated on random batches). Uses the corpus tooling
(../shared/corpus/build_corpus.py: export, scrub, onnx checks, onnxruntime vs torch on two input
sets, reference.npz). Transformers families are exported with both torch exporters; one that
fails is reported with its reason in OUT/families_manifest.json and left out. Needs torch +
transformers (the corpus venv); the product and its tests never do.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np


def _modules():
    """torch.nn definitions, built lazily so that --help needs no torch."""
    import torch
    from torch import nn
    import torch.nn.functional as F

    def cbr(i, o, k=3, s=1, d=1, act=nn.ReLU):
        return nn.Sequential(nn.Conv2d(i, o, k, s, padding=d * (k // 2), dilation=d, bias=False),
                             nn.BatchNorm2d(o), act())

    class DBNet(nn.Module):
        """DBNet-style text detector: 4-stage backbone, FPN (nearest upsample + add), the four
        levels resized to 1/4 and concatenated, probability head with two ConvTranspose x2."""

        def __init__(self, w=(8, 16, 32, 32), inner=16):
            super().__init__()
            self.stem = cbr(3, w[0], s=2)
            self.stages = nn.ModuleList(cbr(a, b, s=2) for a, b in zip((w[0],) + w[:-1], w))
            self.lateral = nn.ModuleList(nn.Conv2d(c, inner, 1) for c in w)
            self.smooth = nn.ModuleList(nn.Conv2d(inner, inner // 4, 3, padding=1) for _ in w)
            self.head = nn.Sequential(cbr(inner, inner // 4), nn.ConvTranspose2d(inner // 4, inner // 4, 2, 2),
                                      nn.BatchNorm2d(inner // 4), nn.ReLU(), nn.ConvTranspose2d(inner // 4, 1, 2, 2),
                                      nn.Sigmoid())

        def forward(self, x):
            feats, y = [], self.stem(x)
            for s in self.stages:
                y = s(y)
                feats.append(y)
            lat = [l(f) for l, f in zip(self.lateral, feats)]
            for i in range(len(lat) - 2, -1, -1):
                lat[i] = lat[i] + F.interpolate(lat[i + 1], scale_factor=2.0, mode="nearest")
            size = lat[0].shape[-2:]
            outs = [F.interpolate(sm(l), size=size, mode="nearest") for sm, l in zip(self.smooth, lat)]
            return self.head(torch.cat(outs, dim=1))

    class CRNN(nn.Module):
        """CRNN text recogniser: conv stack to height 1, a 2-layer bidirectional LSTM over the
        width, per-step class log-probabilities (T, N, classes) as CTC decoders take them."""

        def __init__(self, classes=11, hidden=16):
            super().__init__()
            self.cnn = nn.Sequential(cbr(1, 8), nn.MaxPool2d(2), cbr(8, 16), nn.MaxPool2d(2),
                                     cbr(16, 32), nn.MaxPool2d((2, 1)), cbr(32, 32), nn.MaxPool2d((4, 1)))
            self.rnn = nn.LSTM(32, hidden, num_layers=2, bidirectional=True)
            self.fc = nn.Linear(2 * hidden, classes)

        def forward(self, x):
            f = self.cnn(x).squeeze(2).permute(2, 0, 1)  # (W, N, C)
            y, _ = self.rnn(f)
            return F.log_softmax(self.fc(y), dim=-1)

    class C2f(nn.Module):
        def __init__(self, c, n=1):
            super().__init__()
            self.cv1 = cbr(c, c, 1, act=nn.SiLU)
            self.m = nn.ModuleList(nn.Sequential(cbr(c // 2, c // 2, act=nn.SiLU), cbr(c // 2, c // 2, act=nn.SiLU))
                                   for _ in range(n))
            self.cv2 = cbr(c // 2 * (2 + n), c, 1, act=nn.SiLU)

        def forward(self, x):
            y = list(self.cv1(x).chunk(2, 1))
            for m in self.m:
                y.append(y[-1] + m(y[-1]))
            return self.cv2(torch.cat(y, 1))

    class YOLO(nn.Module):
        """YOLOv8-style detector: SiLU convs, C2f blocks (split / concat), SPPF (three chained
        5x5 max-pools), an upsample + concat neck, and a decoupled head whose box branch is a
        DFL (softmax over 8 bins, expectation) at two strides; outputs (N, 4 + classes, anchors)."""

        def __init__(self, nc=4, reg=8):
            super().__init__()
            self.reg = reg
            self.b1 = nn.Sequential(cbr(3, 8, s=2, act=nn.SiLU), cbr(8, 16, s=2, act=nn.SiLU), C2f(16))
            self.b2 = nn.Sequential(cbr(16, 32, s=2, act=nn.SiLU), C2f(32))
            self.sppf_cv1 = cbr(32, 16, 1, act=nn.SiLU)
            self.sppf_cv2 = cbr(64, 32, 1, act=nn.SiLU)
            self.neck = C2f(48)
            self.box = nn.ModuleList(nn.Conv2d(c, 4 * reg, 1) for c in (48, 32))
            self.cls = nn.ModuleList(nn.Conv2d(c, nc, 1) for c in (48, 32))
            self.register_buffer("bins", torch.arange(reg, dtype=torch.float32))

        def forward(self, x):
            p3 = self.b1(x)
            p4 = self.b2(p3)
            y = [self.sppf_cv1(p4)]
            for _ in range(3):
                y.append(F.max_pool2d(y[-1], 5, 1, 2))
            p4 = self.sppf_cv2(torch.cat(y, 1))
            p3 = self.neck(torch.cat([F.interpolate(p4, scale_factor=2.0, mode="nearest"), p3], 1))
            outs = []
            for f, box, cls in zip((p3, p4), self.box, self.cls):
                b = box(f).flatten(2)  # (N, 4*reg, HW)
                b = b.view(b.shape[0], 4, self.reg, -1).softmax(2)
                b = (b * self.bins.view(1, 1, -1, 1)).sum(2)
                outs.append(torch.cat([b, cls(f).flatten(2).sigmoid()], 1))
            return torch.cat(outs, 2)

    class UNet(nn.Module):
        """UNet: double conv blocks, max-pool down, ConvTranspose x2 up with skip concatenation."""

        def __init__(self, w=(8, 16, 32), classes=2):
            super().__init__()
            dbl = lambda i, o: nn.Sequential(cbr(i, o), cbr(o, o))  # noqa: E731
            self.down = nn.ModuleList([dbl(3, w[0]), dbl(w[0], w[1])])
            self.mid = dbl(w[1], w[2])
            self.up = nn.ModuleList([nn.ConvTranspose2d(w[2], w[1], 2, 2), nn.ConvTranspose2d(w[1], w[0], 2, 2)])
            self.dec = nn.ModuleList([dbl(2 * w[1], w[1]), dbl(2 * w[0], w[0])])
            self.out = nn.Conv2d(w[0], classes, 1)

        def forward(self, x):
            skips = []
            for d in self.down:
                x = d(x)
                skips.append(x)
                x = F.max_pool2d(x, 2)
            x = self.mid(x)
            for up, dec, s in zip(self.up, self.dec, reversed(skips)):
                x = dec(torch.cat([up(x), s], 1))
            return self.out(x)

    class DeepLab(nn.Module):
        """DeepLabV3-style segmenter: strided backbone with a dilated last stage, ASPP (1x1,
        3x3 at dilations 2 and 3, image pooling upsampled back), 1x1 projection, classifier,
        bilinear upsampling to the input size (FCN-style)."""

        def __init__(self, classes=3):
            super().__init__()
            self.backbone = nn.Sequential(cbr(3, 8, s=2), cbr(8, 16, s=2), cbr(16, 32, s=2), cbr(32, 32, d=2))
            self.aspp = nn.ModuleList([cbr(32, 16, 1), cbr(32, 16, d=2), cbr(32, 16, d=3)])
            self.pool = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(32, 16, 1, bias=False), nn.ReLU())
            self.project = cbr(64, 16, 1)
            self.cls = nn.Conv2d(16, classes, 1)

        def forward(self, x):
            size = x.shape[-2:]
            f = self.backbone(x)
            parts = [a(f) for a in self.aspp]
            parts.append(F.interpolate(self.pool(f), size=f.shape[-2:], mode="bilinear", align_corners=False))
            y = self.cls(self.project(torch.cat(parts, 1)))
            return F.interpolate(y, size=size, mode="bilinear", align_corners=False)

    class VAD(nn.Module):
        """LSTM voice-activity detector: log-mel frames (N, T, 40) -> 2-layer LSTM -> per-frame
        speech probability (N, T, 1)."""

        def __init__(self, feats=40, hidden=32):
            super().__init__()
            self.rnn = nn.LSTM(feats, hidden, num_layers=2, batch_first=True)
            self.fc = nn.Linear(hidden, 1)

        def forward(self, x):
            y, _ = self.rnn(x)
            return torch.sigmoid(self.fc(y))

    return dict(DBNet=DBNet, CRNN=CRNN, YOLO=YOLO, UNet=UNet, DeepLab=DeepLab, VAD=VAD)


def _plain(bc, spec, module, inputs_fn, out_name, bn=True):
    """A torch.nn model with seeded kaiming convs and calibrated BatchNorm statistics."""
    rng = np.random.default_rng(spec.seed)
    inputs, alt = inputs_fn(rng), inputs_fn(rng)
    if bn and any("BatchNorm" in type(m).__name__ for m in module.modules()):
        shape = next(iter(inputs.values())).shape
        bc.randomize_and_calibrate_bn(module, (4,) + tuple(shape[1:]), spec.seed)
    return bc.Built(module=module.eval(), inputs=inputs, alt_inputs=alt, output_names=[out_name],
                    source={"kind": "torch.nn", "class": type(module).__name__, "doc": type(module).__doc__,
                            "weights": f"random: torch init, torch.manual_seed({spec.seed}); BatchNorm "
                                       "statistics calibrated on seeded random batches",
                            "torch_params": bc.count_torch_params(module)})


def _hf(bc, spec, cls_name, cfg_kwargs, wrapper, inputs_fn, out_names, **kw):
    import torch
    import transformers
    cfg = getattr(transformers, kw.pop("config"))(**cfg_kwargs)
    torch.manual_seed(spec.seed)
    cls = getattr(transformers, cls_name)
    extra = {"attn_implementation": "eager"} if kw.pop("eager", True) else {}
    m = cls._from_config(cfg, **extra).eval()
    with torch.no_grad():  # a zero-initialised classifier would make every logit 0
        for lin in (x for x in m.modules() if isinstance(x, torch.nn.Linear) and not x.weight.any()):
            torch.nn.init.normal_(lin.weight, std=0.1, generator=torch.Generator().manual_seed(spec.seed))
    rng = np.random.default_rng(spec.seed)
    if any(isinstance(x, torch.nn.BatchNorm2d) for x in m.modules()):
        inputs = inputs_fn(np.random.default_rng(spec.seed))
        shape = next(iter(inputs.values())).shape
        bc.randomize_and_calibrate_bn(wrapper(m), (4,) + tuple(shape[1:]), spec.seed)
    return bc.Built(module=wrapper(m).eval(), inputs=inputs_fn(rng), alt_inputs=inputs_fn(rng),
                    output_names=out_names,
                    source={"kind": "transformers", "library": f"transformers {bc.hf_version()}",
                            "class": cls_name, "config": cfg_kwargs,
                            "weights": f"random (transformers init, zero Linear weights ~N(0, 0.1), BatchNorm "
                                       f"statistics calibrated on random batches), torch.manual_seed({spec.seed})",
                            "torch_params": bc.count_torch_params(m)})


def _wrappers():
    from torch import nn

    class Hidden(nn.Module):
        """model(**inputs) -> last_hidden_state."""

        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, input_ids, attention_mask):
            return self.m(input_ids=input_ids, attention_mask=attention_mask, return_dict=True).last_hidden_state

    class Logits(nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, input_ids, attention_mask):
            return self.m(input_ids=input_ids, attention_mask=attention_mask, use_cache=False,
                          return_dict=True).logits

    class Audio(nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, input_features):
            return self.m(input_features=input_features, return_dict=True).last_hidden_state

    return Hidden, Logits, Audio


def specs(bc):
    import torch
    M = _modules()
    Hidden, Logits, Audio = _wrappers()
    img = lambda shape: (lambda rng: {"input": rng.standard_normal(shape).astype(np.float32)})  # noqa: E731
    pix = lambda s: (lambda rng: bc.image_batch(rng, (1, 3, s, s)))  # noqa: E731
    tok = lambda seq, vocab: (lambda rng: bc.token_batch(rng, 1, seq, vocab))  # noqa: E731

    def plain(cls, inputs_fn, out="output"):
        def build(spec):
            torch.manual_seed(spec.seed)
            return _plain(bc, spec, M[cls](), inputs_fn, out)
        return build

    def hf(cls_name, config, cfg, wrapper, inputs_fn, outs, **kw):
        return lambda spec: _hf(bc, spec, cls_name, cfg, wrapper, inputs_fn, outs, config=config, **dict(kw))

    def whisper_encoder(spec):
        import transformers
        from transformers.models.whisper.modeling_whisper import WhisperEncoder
        cfg = dict(num_mel_bins=16, d_model=32, encoder_layers=1, encoder_attention_heads=2,
                   encoder_ffn_dim=64, max_source_positions=16, vocab_size=64, decoder_layers=1,
                   decoder_attention_heads=2, decoder_ffn_dim=64)
        torch.manual_seed(spec.seed)
        m = WhisperEncoder(transformers.WhisperConfig(**cfg, attn_implementation="eager")).eval()
        rng = np.random.default_rng(spec.seed)
        feats = lambda r: {"input_features": r.standard_normal((1, 16, 32)).astype(np.float32)}  # noqa: E731
        return bc.Built(module=Audio(m).eval(), inputs=feats(rng), alt_inputs=feats(rng),
                        output_names=["last_hidden_state"],
                        source={"kind": "transformers", "library": f"transformers {bc.hf_version()}",
                                "class": "WhisperEncoder", "config": cfg,
                                "weights": f"random (transformers init), torch.manual_seed({spec.seed})",
                                "torch_params": bc.count_torch_params(m)})

    return {
        # name: (build, seed, description, exporters)
        "dbnet_small": (plain("DBNet", img((1, 3, 64, 64))), 1901,
                        "DBNet-style text detector: 4-stage backbone, FPN, ConvTranspose head, 1x3x64x64",
                        ("torchscript",)),
        "crnn_small": (plain("CRNN", img((1, 1, 32, 64))), 1902,
                       "CRNN text recogniser: conv stack + 2-layer BiLSTM + log_softmax, 1x1x32x64",
                       ("torchscript",)),
        "yolo_small": (plain("YOLO", img((1, 3, 64, 64))), 1903,
                       "YOLOv8-style detector: C2f, SPPF, upsample+concat neck, DFL head, 1x3x64x64",
                       ("torchscript",)),
        "unet_small": (plain("UNet", img((1, 3, 32, 32))), 1904,
                       "UNet: 2 levels, ConvTranspose up, skip concat, 1x3x32x32", ("torchscript",)),
        "deeplab_small": (plain("DeepLab", img((1, 3, 32, 32))), 1905,
                          "DeepLabV3-style: dilated backbone, ASPP with image pooling, bilinear upsample, 1x3x32x32",
                          ("torchscript",)),
        "lstm_vad_small": (plain("VAD", img((1, 20, 40))), 1906,
                           "LSTM voice-activity detector: 2-layer LSTM 32 over 20 frames of 40 log-mels",
                           ("torchscript",)),
        "efficientnet_small": (hf("EfficientNetForImageClassification", "EfficientNetConfig",
                                  dict(image_size=32, width_coefficient=0.1, depth_coefficient=0.2,
                                       num_labels=10, hidden_dim=128), bc.ImageLogits, pix(32), ["logits"],
                                  eager=False), 1907,
                               "EfficientNet (MBConv, depthwise, squeeze-excite, SiLU), width 0.1, 32x32",
                               # TorchScript writes the logits' batch dim as a symbol: refused by the corpus checks
                               ("dynamo",)),
        "resnet50_small": (hf("ResNetForImageClassification", "ResNetConfig",
                              dict(layer_type="bottleneck", embedding_size=8, hidden_sizes=[16, 32, 64, 128],
                                   depths=[1, 1, 1, 1], num_labels=10), bc.ImageLogits, pix(32), ["logits"],
                              eager=False), 1908,
                           "ResNet-50 structure (bottleneck blocks) at widths 16-128, one block per stage, 32x32",
                           ("torchscript",)),
        "swin_small": (hf("SwinForImageClassification", "SwinConfig",
                          dict(image_size=32, patch_size=2, embed_dim=16, depths=[1, 1], num_heads=[2, 4],
                               window_size=4, num_labels=10), bc.ImageLogits, pix(32), ["logits"]), 1909,
                       "Swin (shifted windows, relative position bias, patch merging), 2 stages, 32x32",
                       ("torchscript", "dynamo")),
        "convnext_small": (hf("ConvNextForImageClassification", "ConvNextConfig",
                              dict(image_size=32, num_channels=3, patch_size=4, num_stages=2, hidden_sizes=[16, 32], depths=[1, 1],
                                   num_labels=10), bc.ImageLogits, pix(32), ["logits"], eager=False), 1910,
                           "ConvNeXt (7x7 depthwise, LayerNorm over channels, layer scale), 2 stages, 32x32",
                           ("torchscript", "dynamo")),
        "deberta_small": (hf("DebertaV2Model", "DebertaV2Config",
                             dict(vocab_size=64, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                  intermediate_size=64, max_position_embeddings=64, relative_attention=True,
                                  position_buckets=16, pos_att_type=["p2c", "c2p"], max_relative_positions=32),
                             Hidden, tok(16, 64), ["last_hidden_state"]), 1911,
                          "DeBERTa-v2 (disentangled c2p/p2c relative attention), 1 layer, hidden 32, 16 tokens",
                          ("torchscript", "dynamo")),
        "bloom_small": (hf("BloomForCausalLM", "BloomConfig",
                           dict(vocab_size=64, hidden_size=32, n_layer=1, n_head=2), Logits, tok(16, 64),
                           ["logits"]), 1912,
                        "BLOOM (ALiBi, embedding LayerNorm, tanh-GELU), 1 layer, hidden 32, 16 tokens",
                        ("torchscript", "dynamo")),
        "whisper_encoder_small": (whisper_encoder, 1913,
                                  "Whisper encoder (two Conv1d + GELU, sinusoidal positions, pre-LN), 16 mels x 32 "
                                  "frames, d_model 32, 1 layer", ("torchscript", "dynamo")),
        "t5_encoder_small": (hf("T5EncoderModel", "T5Config",
                                dict(vocab_size=64, d_model=32, d_kv=8, d_ff=64, num_layers=1, num_heads=2,
                                     relative_attention_num_buckets=8, feed_forward_proj="gated-gelu"),
                                Hidden, tok(16, 64), ["last_hidden_state"]), 1914,
                             "T5 encoder (RMS LayerNorm, bucketed relative position bias, gated GELU), 1 layer, "
                             "d_model 32, 16 tokens", ("torchscript", "dynamo")),
    }


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--corpus", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "corpus")
    ap.add_argument("--only", default="")
    a = ap.parse_args()
    sys.path.insert(0, str(a.corpus))
    import build_corpus as bc
    results = {}
    for name, (build, seed, desc, exporters) in specs(bc).items():
        if a.only and name not in a.only.split(","):
            continue
        for exporter in exporters:
            suffix = "" if exporter == "torchscript" else "_dynamo"

            def run(s, b=build, e=exporter):
                built = b(s)
                built.exporter = e
                built.opset = 18 if e == "dynamo" else 17
                return built
            spec = bc.Spec(name + suffix, "small", "family", seed, desc, run)
            entry, failure = bc.build_one(spec, a.out, rel_tol=1e-4)
            results[spec.name] = entry or failure
            print(spec.name, "ok" if entry else f"FAILED: {str(failure)[:300]}", flush=True)
    prev = a.out / "families_manifest.json"
    merged = json.loads(prev.read_text()) if prev.exists() else {}
    merged.update(results)
    prev.write_text(json.dumps(merged, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
