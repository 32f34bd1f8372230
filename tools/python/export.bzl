"""`executorch_program`: exports a PyTorch model to a .pte as a build step.

    executorch_program(name = "mlp", src = "model.py")   # -> mlp.pte
    executorch_program(name = "mlp_xnnpack", src = "model.py", backend = "xnnpack")

`src` defines get_model() -> (module, example_inputs), as for `python -m executorch.export`;
`backend` names the delegates, comma-separated, in order ("xnnpack", "cuda", "cuda,xnnpack"). The
exporter runs on the build's Python toolchain, which needs torch.

The exporter is built for the target configuration, not the exec one: it shares the runtime
extension (and XNNPACK and the CUDA kernels under it) with the program's consumers instead of
compiling all of it a second time. The build machine runs it, so it must be able to run the
target's binaries (no cross-compilation).
"""

def _export_impl(ctx):
    out = ctx.actions.declare_file(ctx.label.name + ".pte")
    tool = ctx.attr._exporter[DefaultInfo].files_to_run

    # The exporter asks the runtime extension which operators have kernels; in a build tree the
    # CUDA runtime it links is not next to it as in site-packages, so it is preloaded.
    preload = 'LD_PRELOAD="$PWD/%s" ' % ctx.file.preload.path if ctx.file.preload else ""
    backend = " --backend " + ctx.attr.backend if ctx.attr.backend else ""
    ctx.actions.run_shell(
        command = '%s"%s" "%s" -o "%s"%s >/dev/null' % (preload, tool.executable.path, ctx.file.src.path, out.path, backend),
        inputs = [ctx.file.src] + ([ctx.file.preload] if ctx.file.preload else []),
        outputs = [out],
        tools = [tool],
        mnemonic = "ExecutorchExport",
        progress_message = "Exporting %{label}",
    )
    return [DefaultInfo(files = depset([out]), runfiles = ctx.runfiles(files = [out]))]

_executorch_program = rule(
    implementation = _export_impl,
    attrs = {
        "src": attr.label(allow_single_file = [".py"], mandatory = True),
        "backend": attr.string(),
        "preload": attr.label(allow_single_file = True),
        "_exporter": attr.label(default = Label("//py:export"), executable = True, cfg = "target"),
    },
)

def executorch_program(name, src, backend = None, **kwargs):
    _executorch_program(
        name = name,
        src = src,
        backend = backend or "",
        preload = select({
            Label("//:cuda_enabled"): Label("@local_cuda//:lib/libcudart.so.13"),
            "//conditions:default": None,
        }),
        **kwargs
    )
