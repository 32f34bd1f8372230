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
