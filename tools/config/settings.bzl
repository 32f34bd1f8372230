"""select() helpers for the build settings //:cuda and //:shared (see //:BUILD.bazel)."""

def cuda_only():
    """target_compatible_with for targets that need the CUDA toolkit: skipped with --//:cuda=False."""
    return select({
        Label("//:cuda_enabled"): [],
        "//conditions:default": [Label("@platforms//:incompatible")],
    })
