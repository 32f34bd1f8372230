"""`cuda_library`: compiles CUDA C++ with nvcc into a static library that C++ rules link.

Keeps rules_cuda's public interface (srcs, hdrs, deps, copts, host_copts, defines, includes,
alwayslink; architectures from a build setting), so that moving to rules_cuda is a load() change.
The output provides CcInfo: cc_library, cc_binary and cc_shared_library accept it in `deps`, and the
CUDA runtime (libcudart.so.13) comes along as a dynamic dependency.

Architectures come from --//tools/cuda:archs (alias --cuda_archs): `sm_XY` embeds real code for
compute capability X.Y, `compute_XY` embeds PTX for it (JIT-compiled on newer GPUs).
"""

load("@bazel_skylib//rules:common_settings.bzl", "BuildSettingInfo")
load("@bazel_tools//tools/cpp:toolchain_utils.bzl", "find_cpp_toolchain", "use_cpp_toolchain")
load("@local_cuda//:defs.bzl", "CUDA_AVAILABLE", "HOST_COMPILER", "MISSING_REASON", "NVCC")

_CUDA_EXTENSIONS = [".cu"]
_HEADER_EXTENSIONS = [".h", ".hpp", ".cuh", ".inc"]

def gencode_flags(archs):
    """Maps ["sm_90", "compute_90"] to nvcc's -gencode flags."""
    flags = []
    for arch in archs:
        kind, _, cc = arch.partition("_")
        if not cc.isdigit() or kind not in ("sm", "compute"):
            fail("CUDA architecture '%s' is neither sm_XY nor compute_XY" % arch)
        flags.append("-gencode=arch=compute_%s,code=%s_%s" % (cc, kind, cc))
    return flags

def _include_dirs(cc_ctx):
    dirs = ["."]
    for field in [cc_ctx.includes, cc_ctx.quote_includes, cc_ctx.system_includes]:
        dirs.extend(field.to_list())
    if hasattr(cc_ctx, "external_includes"):
        dirs.extend(cc_ctx.external_includes.to_list())
    return dirs

def _cuda_library_impl(ctx):
    if not CUDA_AVAILABLE:
        fail("%s: no CUDA toolkit (%s). Set CUDA_PATH, or build with --//:cuda=False." % (ctx.label, MISSING_REASON))
    for flag in ctx.attr.copts:
        if flag.startswith("-gencode") or flag.startswith("-arch") or flag.startswith("--gpu-architecture"):
            fail("%s: architectures come from --//tools/cuda:archs, not copts (%s)" % (ctx.label, flag))

    cc_toolchain = find_cpp_toolchain(ctx)
    feature_configuration = cc_common.configure_features(
        ctx = ctx,
        cc_toolchain = cc_toolchain,
        requested_features = ctx.features,
        unsupported_features = ctx.disabled_features,
    )
    deps_cc = [d[CcInfo] for d in ctx.attr.deps + [ctx.attr._cudart]]
    package_dir = "/".join([p for p in [ctx.label.workspace_root, ctx.label.package] if p])
    includes = [package_dir + "/" + i if i != "." else package_dir for i in ctx.attr.includes]
    compilation_context, _ = cc_common.compile(
        name = ctx.label.name,
        actions = ctx.actions,
        feature_configuration = feature_configuration,
        cc_toolchain = cc_toolchain,
        public_hdrs = ctx.files.hdrs,
        private_hdrs = [f for f in ctx.files.srcs if f.extension in ["h", "hpp", "cuh", "inc"]],
        includes = includes,
        defines = ctx.attr.defines,
        compilation_contexts = [d.compilation_context for d in deps_cc],
    )

    archs = ctx.attr._archs[BuildSettingInfo].value
    opt = ctx.var.get("COMPILATION_MODE", "fastbuild")
    common = [
        "-ccbin=" + HOST_COMPILER,
        "-std=c++17",
        "-O3" if opt == "opt" else ("-O0" if opt == "dbg" else "-O2"),
        "-Xcompiler=-fPIC,-fvisibility=hidden",
        "--expt-relaxed-constexpr",
    ] + (["-g", "-lineinfo"] if opt == "dbg" else []) + gencode_flags(archs)
    common += ["-Xcompiler=" + f for f in ctx.attr.host_copts]
    common += ctx.attr.copts
    for d in compilation_context.defines.to_list() + compilation_context.local_defines.to_list():
        common.append("-D" + d)
    for d in _include_dirs(compilation_context):
        common.append("-I" + d)

    objects = []
    for src in ctx.files.srcs:
        if "." + src.extension not in _CUDA_EXTENSIONS:
            continue
        obj = ctx.actions.declare_file("_objs/%s/%s.o" % (ctx.label.name, src.basename))
        ctx.actions.run(
            executable = NVCC,
            arguments = common + ["-x", "cu", "-c", src.path, "-o", obj.path],
            inputs = depset([src], transitive = [compilation_context.headers]),
            outputs = [obj],
            mnemonic = "CudaCompile",
            progress_message = "Compiling CUDA " + src.short_path,
            # nvcc runs the host compiler and its own tools from the toolkit, outside the execroot.
            execution_requirements = {"no-sandbox": "1"},
            use_default_shell_env = True,
        )
        objects.append(obj)

    compilation_outputs = cc_common.create_compilation_outputs(
        objects = depset(objects),
        pic_objects = depset(objects),
    )
    linking_context, linking_outputs = cc_common.create_linking_context_from_compilation_outputs(
        name = ctx.label.name,
        actions = ctx.actions,
        feature_configuration = feature_configuration,
        cc_toolchain = cc_toolchain,
        compilation_outputs = compilation_outputs,
        linking_contexts = [d.linking_context for d in deps_cc],
        alwayslink = ctx.attr.alwayslink,
        disallow_dynamic_library = True,
    )
    lib = linking_outputs.library_to_link
    files = [f for f in [lib.pic_static_library, lib.static_library] if f] if lib else []
    return [
        DefaultInfo(files = depset(files)),
        CcInfo(compilation_context = compilation_context, linking_context = linking_context),
    ]

cuda_library = rule(
    implementation = _cuda_library_impl,
    doc = "CUDA C++ compiled by nvcc into a static library with CcInfo (rules_cuda's interface).",
    attrs = {
        "srcs": attr.label_list(allow_files = _CUDA_EXTENSIONS + _HEADER_EXTENSIONS),
        "hdrs": attr.label_list(allow_files = _HEADER_EXTENSIONS),
        "deps": attr.label_list(providers = [CcInfo]),
        "copts": attr.string_list(doc = "nvcc flags; not architectures"),
        "host_copts": attr.string_list(doc = "host compiler flags, passed through -Xcompiler"),
        "defines": attr.string_list(),
        "includes": attr.string_list(doc = "include directories, relative to the package"),
        "alwayslink": attr.bool(default = False),
        "_archs": attr.label(default = Label("//tools/cuda:archs")),
        "_cudart": attr.label(default = Label("@local_cuda//:cudart")),
        "_cc_toolchain": attr.label(default = Label("@bazel_tools//tools/cpp:current_cc_toolchain")),
    },
    fragments = ["cpp"],
    toolchains = use_cpp_toolchain(),
    provides = [CcInfo],
)
