load("@bazel_tools//tools/python:toolchain.bzl", "py_runtime_pair")
load("@rules_cc//cc:defs.bzl", "cc_library")

package(default_visibility = ["//visibility:public"])

cc_library(
    name = "python_headers",
    hdrs = glob(["include/**/*.h"]),
    includes = ["include"],
)

cc_library(
    name = "pybind11",
    hdrs = glob(["pybind11/**/*.h"]),
    includes = ["pybind11"],
    deps = [":python_headers"],
)

py_runtime(
    name = "runtime",
    interpreter_path = "%{executable}",
    python_version = "PY3",
    stub_shebang = "#!%{executable}",
)

py_runtime_pair(
    name = "runtime_pair",
    py3_runtime = ":runtime",
)

toolchain(
    name = "toolchain",
    toolchain = ":runtime_pair",
    toolchain_type = "@bazel_tools//tools/python:toolchain_type",
)
