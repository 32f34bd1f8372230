load("@rules_cc//cc:defs.bzl", "cc_import", "cc_library")

package(default_visibility = ["//visibility:public"])

exports_files(["lib/libcudart.so.13"])

cc_library(
    name = "cuda_headers",
    # nv/target (cuda_fp16.h and cuda_bf16.h include it) has no extension.
    hdrs = glob(["include/**/*.h", "include/**/*.hpp", "include/**/*.cuh", "include/nv/**"], allow_empty = True),
    includes = ["include"],
)

cc_import(
    name = "cudart_shared",
    shared_library = "lib/libcudart.so.13",
)

cc_library(
    name = "cudart",
    deps = [":cuda_headers", ":cudart_shared"],
)

filegroup(
    name = "cuobjdump",
    srcs = %{cuobjdump},
)
