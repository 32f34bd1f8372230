"""Code generation from FlatBuffers schemas with flatc."""

load("@rules_cc//cc:defs.bzl", "cc_library")

def flatbuffer_cc_library(name, src, include_prefix, visibility = None):
    """A header-only cc_library with the C++ code flatc generates for `src` (<stem>_generated.h)."""
    stem = src.replace(":", "/").split("/")[-1].rsplit(".", 1)[0]
    native.genrule(
        name = name + "_gen",
        srcs = [src],
        outs = [stem + "_generated.h"],
        cmd = "$(execpath @local_flatbuffers//:flatc) --cpp --scoped-enums -o $(RULEDIR) $<",
        tools = ["@local_flatbuffers//:flatc"],
    )
    cc_library(
        name = name,
        hdrs = [stem + "_generated.h"],
        include_prefix = include_prefix,
        visibility = visibility,
        deps = ["@local_flatbuffers//:runtime"],
    )

def flatbuffer_py_module(name, src, out, visibility = None):
    """The Python module flatc generates for `src`, written to `out` (a path in this package)."""
    stem = src.replace(":", "/").split("/")[-1].rsplit(".", 1)[0]
    native.genrule(
        name = name,
        srcs = [src],
        outs = [out],
        cmd = "$(execpath @local_flatbuffers//:flatc) --python --gen-onefile -o $(@D)/_flatc $< && mv $(@D)/_flatc/%s_generated.py $@" % stem,
        tools = ["@local_flatbuffers//:flatc"],
        visibility = visibility,
    )
