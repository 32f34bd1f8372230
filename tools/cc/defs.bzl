"""C++ macros shared by every BUILD file."""

load("@rules_cc//cc:defs.bzl", "cc_shared_library")

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
