"""`build_variant`: the files of a target built with other values of //:shared and //:cuda.

Lets one `bazel test //tests/...` check the shared, static and CPU-only builds side by side.
"""

_SHARED = str(Label("//:shared"))
_CUDA = str(Label("//:cuda"))

def _variant_transition_impl(settings, attr):
    return {
        _SHARED: attr.shared == "True" if attr.shared != "inherit" else settings[_SHARED],
        _CUDA: attr.cuda == "True" if attr.cuda != "inherit" else settings[_CUDA],
    }

_variant_transition = transition(
    implementation = _variant_transition_impl,
    inputs = [_SHARED, _CUDA],
    outputs = [_SHARED, _CUDA],
)

def _build_variant_impl(ctx):
    # Outputs of other configurations keep their short paths, so two variants of //wheel would
    # collide in runfiles: each variant's files are linked under <name>/ instead.
    outs = []
    for target in ctx.attr.srcs:
        for f in target[DefaultInfo].files.to_list():
            path = ctx.label.name + "/" + f.basename
            out = ctx.actions.declare_directory(path) if f.is_directory else ctx.actions.declare_file(path)
            ctx.actions.symlink(output = out, target_file = f)
            outs.append(out)
    return [DefaultInfo(files = depset(outs), runfiles = ctx.runfiles(files = outs))]

_build_variant = rule(
    implementation = _build_variant_impl,
    attrs = {
        "srcs": attr.label_list(cfg = _variant_transition),
        "shared": attr.string(default = "inherit"),
        "cuda": attr.string(default = "inherit"),
        "_allowlist_function_transition": attr.label(
            default = "@bazel_tools//tools/allowlists/function_transition_allowlist",
        ),
    },
)

def build_variant(name, srcs, shared = None, cuda = None, **kwargs):
    """Builds `srcs` with --//:shared=`shared` and --//:cuda=`cuda` (None: as the build is)."""
    _build_variant(
        name = name,
        srcs = srcs,
        shared = "inherit" if shared == None else str(shared),
        cuda = "inherit" if cuda == None else str(cuda),
        **kwargs
    )

def _default_config_transition_impl(settings, attr):
    return {_SHARED: True, _CUDA: True}

_default_config_transition = transition(
    implementation = _default_config_transition_impl,
    inputs = [],
    outputs = [_SHARED, _CUDA],
)

def _default_config_cc_impl(ctx):
    dep = ctx.attr.deps[0]
    return [dep[CcInfo], DefaultInfo(files = dep[DefaultInfo].files)]

default_config_cc = rule(
    implementation = _default_config_cc_impl,
    doc = """A cc_library dep built with //:shared and //:cuda at their defaults, whatever the
variant around it. For third-party code that reads neither (XNNPACK): every variant of the build
then links the one compiled copy instead of compiling it again in a configuration of its own.""",
    attrs = {
        "deps": attr.label_list(cfg = _default_config_transition, providers = [CcInfo]),
        "_allowlist_function_transition": attr.label(
            default = "@bazel_tools//tools/allowlists/function_transition_allowlist",
        ),
    },
    provides = [CcInfo],
)
