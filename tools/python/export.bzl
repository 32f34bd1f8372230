"""`executorch_program`: exports a PyTorch model to a .pte as a build step.

    executorch_program(name = "mlp", src = "model.py")   # -> mlp.pte
    executorch_program(name = "mlp_xnnpack", src = "model.py", backend = "xnnpack")

`src` defines get_model() -> (module, example_inputs), as for `python -m executorch.export`;
`backend` names the delegates, comma-separated, in order ("xnnpack", "cuda", "cuda,xnnpack"). The
exporter runs on the build's Python toolchain, which needs torch.
"""

def executorch_program(name, src, backend = None, **kwargs):
    cudart = Label("@local_cuda//:lib/libcudart.so.13")
    native.genrule(
        name = name,
        srcs = [src],
        outs = [name + ".pte"],
        # The exporter asks the runtime extension which operators have kernels; in a build tree the
        # CUDA runtime it links is not next to it as in site-packages, so it is preloaded.
        cmd = select({
            Label("//:cuda_enabled"): "LD_PRELOAD=$$PWD/$(execpath %s) " % cudart,
            "//conditions:default": "",
        }) + "$(execpath %s) $(location %s) -o $@%s >/dev/null" % (
            Label("//py:export"),
            src,
            " --backend " + backend if backend else "",
        ),
        tools = [Label("//py:export")] + select({
            Label("//:cuda_enabled"): [cudart],
            "//conditions:default": [],
        }),
        **kwargs
    )
