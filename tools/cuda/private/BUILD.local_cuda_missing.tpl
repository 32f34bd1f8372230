load(":missing.bzl", "missing_toolkit")

package(default_visibility = ["//visibility:public"])

[missing_toolkit(name = n) for n in ["cuda_headers", "cudart", "cuobjdump"]]
