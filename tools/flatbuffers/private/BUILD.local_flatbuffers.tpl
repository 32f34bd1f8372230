load("@rules_cc//cc:defs.bzl", "cc_library")

package(default_visibility = ["//visibility:public"])

exports_files(["flatc"])

cc_library(
    name = "runtime",
    hdrs = glob(["include/flatbuffers/**/*.h"]),
    includes = ["include"],
)
