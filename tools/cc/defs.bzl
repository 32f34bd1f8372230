"""C++ macros shared by every BUILD file."""

load("@rules_cc//cc:defs.bzl", "cc_binary", "cc_shared_library")

def executorch_shared_library(name, shared_lib_name, deps, dynamic_deps = [], runpaths = ["$ORIGIN"], user_link_flags = [], **kwargs):
    """A cc_shared_library with a soname equal to its file name and relative runpaths.

    Every definition in `deps` is linked into this library and nowhere else; `dynamic_deps` are other
    shared libraries it NEEDs. Undefined symbols are an error at link time (-z defs), so a library
    cannot silently rely on its loader to provide the runtime.

    Args:
      name: target name.
      shared_lib_name: file name and soname, e.g. "libexecutorch.so.1".
      deps: cc_library targets whose code this library owns (whole-archived, exported).
      dynamic_deps: executorch_shared_library targets it links against.
      runpaths: DT_RUNPATH entries; "$ORIGIN" is the library's own directory.
      user_link_flags: extra linker flags.
      **kwargs: passed to cc_shared_library (visibility, tags, target_compatible_with, ...).
    """
    cc_shared_library(
        name = name,
        shared_lib_name = shared_lib_name,
        deps = deps,
        dynamic_deps = dynamic_deps,
        user_link_flags = [
            "-Wl,-soname," + shared_lib_name,
            "-Wl,-z,defs",
            # Keep every dynamic dep in DT_NEEDED: some (the CUDA delegate) matter only for the
            # static initializer that registers them, not for any symbol.
            "-Wl,--no-as-needed",
        ] + ["-Wl,-rpath," + r for r in runpaths] + user_link_flags,
        **kwargs
    )

def executorch_binary(name, srcs, deps = [], **kwargs):
    """A command-line program over the runtime, as the wheel ships it in executorch/bin/.

    With --//:shared (the default) it NEEDs the runtime, thread pool, kernel and (with --//:cuda)
    delegate libraries, found through runpaths relative to bin/; otherwise it links them statically.

    Args:
      name: target name.
      srcs: its sources.
      deps: cc_library targets beyond the runtime's (extension/module, extension/tensor, ...).
      **kwargs: passed to cc_binary (visibility, ...).
    """
    cc_binary(
        name = name,
        srcs = srcs,
        dynamic_deps = select({
            "//:shared_and_cuda": [
                "//runtime:executorch",
                "//extension/threadpool",
                "//kernels",
                "//backends/cuda:cuda_backend",
                "//backends/cuda/shims",
                "//extension/cuda",
            ],
            "//:shared_enabled": [
                "//runtime:executorch",
                "//extension/threadpool",
                "//kernels",
            ],
            "//conditions:default": [],
        }),
        linkopts = [
            # The kernel and delegate libraries matter for their registrations only.
            "-Wl,--no-as-needed",
            "-Wl,-rpath,$$ORIGIN/../lib",
            "-Wl,-rpath,$$ORIGIN/../backends/cuda",
            "-Wl,-rpath,$$ORIGIN/../../nvidia/cu13/lib",
        ],
        deps = deps + [
            "//extension/threadpool:threadpool_lib",
            "//runtime:executorch_lib",
        ] + select({
            "//:static_and_cuda": [
                "//backends/cuda:cuda_backend_lib",
                "//kernels:kernels_lib",
            ],
            "//:shared_enabled": [],
            "//conditions:default": ["//kernels:kernels_lib"],
        }),
        **kwargs
    )
