"""Real models from torchvision, transformers and timm with random weights (nothing downloaded).

Each entry builds (module in eval mode, example inputs). Configurations are small where the library
allows it (transformers configs, image sizes) so that the whole set exports and runs in minutes on
two cores; the architectures, and so the operators they produce, are the libraries' own.
"""

from __future__ import annotations

import sys
import types
from typing import Any, Callable

import torch

Factory = Callable[[], "tuple[torch.nn.Module, tuple[Any, ...]]"]


def import_torchvision() -> Any:
    """torchvision, importable next to a CPU-only torch.

    PyPI's torchvision is built against a CUDA torch; with the CPU one its C operators (nms,
    roi_align) fail to load, and the module that registers their meta kernels raises at import.
    The model definitions need none of them, so that one module is replaced by an empty one.
    """
    if "torchvision" not in sys.modules:
        try:
            torch.ops.torchvision.nms  # noqa: B018 - present when the C extension matches torch
        except (AttributeError, RuntimeError):
            sys.modules["torchvision._meta_registrations"] = types.ModuleType("torchvision._meta_registrations")
    import torchvision

    return torchvision


def _image(size: int, batch: int = 1) -> tuple[torch.Tensor]:
    return (torch.randn(batch, 3, size, size),)


def _tokens(vocab: int, length: int = 16) -> torch.Tensor:
    return torch.randint(0, vocab, (1, length))


def _seeded(build: Callable[[], torch.nn.Module]) -> torch.nn.Module:
    """The module in eval mode, with parameters that its library initializes to zero (ViT's
    classifier head, say) drawn at random, so that every output depends on the input."""
    torch.manual_seed(0)
    model = build().eval()
    with torch.no_grad():
        for p in model.parameters():
            if p.numel() and not p.abs().max():
                p.normal_(0, 0.02)
    return model


# torchvision ----------------------------------------------------------------------------------

def _tv(name: str, size: int = 96, **kwargs: Any) -> Factory:
    def factory():
        tv = import_torchvision()
        model = _seeded(lambda: getattr(tv.models, name)(weights=None, **kwargs))
        return model, _image(size)

    return factory


def _video(name: str, frames: int = 8, size: int = 56) -> Factory:
    def factory():
        tv = import_torchvision()
        model = _seeded(lambda: getattr(tv.models.video, name)(weights=None))
        return model, (torch.randn(1, 3, frames, size, size),)

    return factory


def _segmentation(name: str, size: int = 96) -> Factory:
    class Out(torch.nn.Module):
        def __init__(self, inner: torch.nn.Module) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.inner(x)["out"]

    def factory():
        tv = import_torchvision()
        inner = getattr(tv.models.segmentation, name)(weights=None, weights_backbone=None, aux_loss=False)
        return _seeded(lambda: Out(inner)), _image(size)

    return factory


# transformers ---------------------------------------------------------------------------------

class _Keywords(torch.nn.Module):
    """Passes the inputs by name: models whose forward takes past_key_values second (BLOOM, Falcon)."""

    def __init__(self, inner: torch.nn.Module, names: tuple[str, ...]) -> None:
        super().__init__()
        self.inner, self.names = inner, names

    def forward(self, *args: Any) -> Any:
        return self.inner(**dict(zip(self.names, args)))


def _hf(config_name: str, model_name: str, inputs: Callable[[Any], tuple[Any, ...]],
        keywords: tuple[str, ...] | None = None, **config: Any) -> Factory:
    """A transformers model from a small config; single-shot (use_cache=False: no KV cache object out).
    With `keywords`, the inputs are passed by these names."""

    def factory():
        import_torchvision()  # transformers imports it where it is installed
        import transformers

        cfg = getattr(transformers, config_name)(use_cache=False, **config)
        module = transformers
        for part in model_name.split(".")[:-1]:
            module = getattr(module, part)
        model = _seeded(lambda: getattr(module, model_name.split(".")[-1])(cfg))
        return (_Keywords(model, keywords) if keywords else model), inputs(cfg)

    return factory


_SMALL = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128)


def _ids(cfg: Any) -> tuple[torch.Tensor]:
    return (_tokens(cfg.vocab_size),)


def _ids_mask(cfg: Any) -> tuple[torch.Tensor, torch.Tensor]:
    ids = _tokens(cfg.vocab_size)
    mask = torch.ones_like(ids)
    mask[:, -3:] = 0
    return ids, mask


def _features(cfg: Any) -> tuple[torch.Tensor]:
    return (torch.randn(1, cfg.num_mel_bins, 2 * cfg.max_source_positions),)


# timm -----------------------------------------------------------------------------------------

def _timm(name: str, size: int = 96, **kwargs: Any) -> Factory:
    def factory():
        import_torchvision()  # as timm does
        import timm

        model = _seeded(lambda: timm.create_model(name, pretrained=False, **kwargs))
        return model, _image(size)

    return factory


class _Recurrent(torch.nn.Module):
    """An nn.LSTM or nn.GRU and a linear head: returns the head of every step and the final state."""

    def __init__(self, cell: type) -> None:
        super().__init__()
        self.rnn = cell(32, 48, num_layers=2, batch_first=True)
        self.head = torch.nn.Linear(48, 10)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        y, state = self.rnn(x)
        return (self.head(y), *(state if isinstance(state, tuple) else (state,)))


def _rnn(cell: str) -> Factory:
    return lambda: (_seeded(lambda: _Recurrent(getattr(torch.nn, cell))), (torch.randn(2, 12, 32),))


# The models the real-model tests and bench/cpu.py run.
MODELS: dict[str, Factory] = {
    "resnet18": _tv("resnet18"),
    "mobilenet_v2": _tv("mobilenet_v2"),
    "mobilenet_v3_small": _tv("mobilenet_v3_small"),
    "efficientnet_b0": _tv("efficientnet_b0"),
    "convnext_tiny": _tv("convnext_tiny", 64),
    "swin_t": _tv("swin_t", 64),
    "vit_b_16": _tv("vit_b_16", 64, image_size=64),
    "deeplabv3_mobilenet_v3_large": _segmentation("deeplabv3_mobilenet_v3_large"),
    "gpt2": _hf("GPT2Config", "GPT2Model", _ids, n_embd=64, n_layer=2, n_head=4, vocab_size=512, n_positions=64),
    "bert": _hf("BertConfig", "BertModel", _ids_mask, vocab_size=512, max_position_embeddings=64, **_SMALL),
    "llama": _hf("LlamaConfig", "LlamaModel", _ids_mask, vocab_size=512, num_key_value_heads=2,
                 max_position_embeddings=64, **_SMALL),
    "t5_encoder": _hf("T5Config", "T5EncoderModel", _ids, vocab_size=512, d_model=64, d_kv=16, d_ff=128,
                      num_layers=2, num_heads=4),
    "whisper_encoder": _hf("WhisperConfig", "models.whisper.modeling_whisper.WhisperEncoder", _features, vocab_size=512, d_model=64,
                           encoder_layers=2, encoder_attention_heads=4, encoder_ffn_dim=128, num_mel_bins=16,
                           max_source_positions=32),
    "lstm": _rnn("LSTM"),
    "gru": _rnn("GRU"),
}

# Further models, outside the list above, that the survey and the benchmark also run.
MORE_MODELS: dict[str, Factory] = {
    "resnet50": _tv("resnet50"),
    "mnasnet": _tv("mnasnet1_0"),
    "shufflenet_v2": _tv("shufflenet_v2_x1_0"),
    "squeezenet": _tv("squeezenet1_1"),
    "densenet121": _tv("densenet121", 64),
    "regnet_y_400mf": _tv("regnet_y_400mf"),
    "efficientnet_v2_s": _tv("efficientnet_v2_s", 64),
    "maxvit_t": _tv("maxvit_t", 224),
    "lraspp": _segmentation("lraspp_mobilenet_v3_large"),
    "r3d_18": _video("r3d_18"),
    "r2plus1d_18": _video("r2plus1d_18"),
    "fcn_resnet50": _segmentation("fcn_resnet50", 64),
    "roberta": _hf("RobertaConfig", "RobertaModel", _ids_mask, vocab_size=512, max_position_embeddings=70, **_SMALL),
    "distilbert": _hf("DistilBertConfig", "DistilBertModel", _ids_mask, vocab_size=512, dim=64, n_layers=2, n_heads=4,
                      hidden_dim=128, max_position_embeddings=64),
    "mistral": _hf("MistralConfig", "MistralModel", _ids_mask, vocab_size=512, num_key_value_heads=2,
                   max_position_embeddings=64, **_SMALL),
    "qwen2": _hf("Qwen2Config", "Qwen2Model", _ids_mask, vocab_size=512, num_key_value_heads=2,
                 max_position_embeddings=64, **_SMALL),
    "phi": _hf("PhiConfig", "PhiModel", _ids_mask, vocab_size=512, max_position_embeddings=64, **_SMALL),
    "rwkv": _hf("RwkvConfig", "RwkvModel", _ids, vocab_size=512, hidden_size=64, num_hidden_layers=2,
                attention_hidden_size=64, intermediate_size=128, context_length=64),
    "mixtral": _hf("MixtralConfig", "MixtralModel", _ids_mask, vocab_size=512, num_key_value_heads=2,
                   num_local_experts=4, num_experts_per_tok=2, **_SMALL),
    "qwen2_moe": _hf("Qwen2MoeConfig", "Qwen2MoeModel", _ids_mask, vocab_size=512, num_key_value_heads=2, num_experts=4,
                     num_experts_per_tok=2, moe_intermediate_size=32, shared_expert_intermediate_size=64, **_SMALL),
    "gemma": _hf("GemmaConfig", "GemmaModel", _ids_mask, vocab_size=512, num_key_value_heads=2, head_dim=16,
                 max_position_embeddings=64, **_SMALL),
    "bloom": _hf("BloomConfig", "BloomModel", _ids_mask, ("input_ids", "attention_mask"), vocab_size=512,
                 hidden_size=64, n_layer=2, n_head=4),
    "falcon": _hf("FalconConfig", "FalconModel", _ids_mask, ("input_ids", "attention_mask"), vocab_size=512,
                  hidden_size=64, num_hidden_layers=2, num_attention_heads=4),
    "wav2vec2": _hf("Wav2Vec2Config", "Wav2Vec2Model", lambda cfg: (torch.randn(1, 4000),), num_feat_extract_norm="group",
                    conv_dim=(32, 32), conv_stride=(5, 2), conv_kernel=(10, 3), num_conv_pos_embeddings=16,
                    num_conv_pos_embedding_groups=4, **_SMALL),
    "vit_hf": _hf("ViTConfig", "ViTModel", lambda cfg: _image(cfg.image_size), image_size=32, patch_size=8, **_SMALL),
    "bart_encoder": _hf("BartConfig", "models.bart.modeling_bart.BartEncoder", _ids_mask, vocab_size=512, d_model=64,
                        encoder_layers=2, encoder_attention_heads=4, encoder_ffn_dim=128, max_position_embeddings=64),
    "clip_text": _hf("CLIPTextConfig", "CLIPTextModel", _ids_mask, vocab_size=512, max_position_embeddings=64,
                     **_SMALL),
    "segformer": _hf("SegformerConfig", "SegformerForSemanticSegmentation", lambda cfg: _image(64),
                     hidden_sizes=[16, 32, 48, 64], decoder_hidden_size=64, depths=[1, 1, 1, 1],
                     num_attention_heads=[1, 2, 2, 4]),
    "timm_efficientnet_b0": _timm("efficientnet_b0"),
    "timm_convnext_atto": _timm("convnext_atto", 64),
    "timm_levit_128s": _timm("levit_128s", 224),
    "timm_poolformer_s12": _timm("poolformer_s12", 64),
    "timm_edgenext_xx_small": _timm("edgenext_xx_small", 64),
    "timm_ghostnet_100": _timm("ghostnet_100"),
    "timm_rexnet_100": _timm("rexnet_100"),
    "timm_mobilevitv2_050": _timm("mobilevitv2_050", 64),
    "timm_fastvit_t8": _timm("fastvit_t8", 64),
    "timm_convmixer": _timm("convmixer_768_32", 64),
    "timm_vit_tiny": _timm("vit_tiny_patch16_224", 224),
    "timm_deit_tiny": _timm("deit_tiny_patch16_224", 224),
    "timm_regnetx_002": _timm("regnetx_002"),
    "timm_mixnet_s": _timm("mixnet_s"),
    "timm_resnet18": _timm("resnet18"),
    "timm_mobilenetv3": _timm("mobilenetv3_small_050"),
}
