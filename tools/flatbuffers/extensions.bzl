"""Module extension `local_flatbuffers`: flatc and the FlatBuffers C++ headers on this machine.

flatc is $FLATC or `flatc` on PATH; headers come from $FLATBUFFERS_INCLUDE or /usr/include (Debian's
flatbuffers-compiler and libflatbuffers-dev; the build root installs both). Provides @local_flatbuffers
with :flatc and :runtime (headers). The generated C++ must match these headers' version, which is why
both come from one place.
"""

def _local_flatbuffers_repo_impl(rctx):
    flatc = rctx.os.environ.get("FLATC", "") or rctx.which("flatc")
    if not flatc:
        fail("flatc not found: install Debian's flatbuffers-compiler (and libflatbuffers-dev) or set FLATC")
    include = rctx.path(rctx.os.environ.get("FLATBUFFERS_INCLUDE", "") or "/usr/include")
    if not include.get_child("flatbuffers").get_child("flatbuffers.h").exists:
        fail("no flatbuffers/flatbuffers.h under %s: install libflatbuffers-dev or set FLATBUFFERS_INCLUDE" % include)
    rctx.symlink(flatc, "flatc")
    rctx.symlink(include.get_child("flatbuffers"), "include/flatbuffers")
    rctx.template("BUILD.bazel", Label("//tools/flatbuffers/private:BUILD.local_flatbuffers.tpl"))

local_flatbuffers_repo = repository_rule(
    implementation = _local_flatbuffers_repo_impl,
    environ = ["FLATC", "FLATBUFFERS_INCLUDE", "PATH"],
    local = True,
)

def _local_flatbuffers_impl(_mctx):
    local_flatbuffers_repo(name = "local_flatbuffers")

local_flatbuffers = module_extension(implementation = _local_flatbuffers_impl)
