"""Exposes --//tools/cuda:archs as the make variable $(CUDA_ARCHS)."""

load("@bazel_skylib//rules:common_settings.bzl", "BuildSettingInfo")

def _archs_make_variable_impl(ctx):
    return [platform_common.TemplateVariableInfo({
        "CUDA_ARCHS": ",".join(ctx.attr._archs[BuildSettingInfo].value),
    })]

archs_make_variable = rule(
    implementation = _archs_make_variable_impl,
    attrs = {"_archs": attr.label(default = Label("//tools/cuda:archs"))},
)
