"""`py_wheel`: assembles a wheel (rules_python's attribute names), and `py_package_files`, which
places build outputs (shared libraries, binaries) at a path inside the Python package.

The real rules_python py_wheel needs its wheelmaker tool, which Debian's rules_python lacks; this rule
keeps its interface so that switching is a load() change. One addition: platform = "auto" derives the
manylinux tag from the newest GLIBC symbol version any ELF file in the wheel needs. Since that tag is
known only after reading the files, the output is a directory holding the correctly named .whl.
"""

def _archive_path(f, strip_prefixes):
    path = f.short_path
    if path.startswith("../"):
        # A file from another repository: ../repo/path
        path = path.split("/", 2)[2]
    for prefix in strip_prefixes:
        if path.startswith(prefix):
            return path[len(prefix):]
    return path

def _py_wheel_impl(ctx):
    out = ctx.actions.declare_directory(ctx.label.name + "_dist")
    files = depset(transitive = [d[DefaultInfo].files for d in ctx.attr.deps]).to_list()
    args = ctx.actions.args()
    args.add("--out-dir", out.path)
    args.add("--distribution", ctx.attr.distribution)
    args.add("--version", ctx.attr.version)
    args.add("--python-tag", ctx.attr.python_tag)
    args.add("--abi", ctx.attr.abi)
    args.add("--platform", ctx.attr.platform)
    args.add("--summary", ctx.attr.summary)
    if ctx.attr.python_requires:
        args.add("--python-requires", ctx.attr.python_requires)
    args.add_all(ctx.attr.requires, before_each = "--requires")
    for extra, reqs in ctx.attr.extra_requires.items():
        args.add_all(["%s;%s" % (extra, r) for r in reqs], before_each = "--extra-requires")
    for group, lines in ctx.attr.entry_points.items():
        args.add_all(["%s|%s" % (group, line) for line in lines], before_each = "--entry-point")
    seen = {}
    for f in files:
        dest = _archive_path(f, ctx.attr.strip_path_prefixes)
        if dest in seen:
            fail("%s and %s both map to %s in the wheel" % (seen[dest], f.short_path, dest))
        seen[dest] = f.short_path
        args.add("--file", "%s=%s" % (dest, f.path))
    args.set_param_file_format("multiline")
    args.use_param_file("@%s", use_always = True)
    ctx.actions.run(
        executable = ctx.executable._wheelmaker,
        arguments = [args],
        inputs = files,
        outputs = [out],
        mnemonic = "PyWheel",
        progress_message = "Assembling wheel %{label}",
    )
    return [DefaultInfo(files = depset([out]))]

py_wheel = rule(
    implementation = _py_wheel_impl,
    doc = "Writes <name>_dist/<distribution>-<version>-<python_tag>-<abi>-<platform>.whl.",
    attrs = {
        "distribution": attr.string(mandatory = True),
        "version": attr.string(mandatory = True),
        "python_tag": attr.string(default = "py3"),
        "abi": attr.string(default = "none"),
        "platform": attr.string(default = "any", doc = "a wheel platform tag, or 'auto' (manylinux from GLIBC needs)"),
        "summary": attr.string(default = ""),
        "python_requires": attr.string(default = ""),
        "deps": attr.label_list(doc = "targets whose files go into the wheel at their paths"),
        "strip_path_prefixes": attr.string_list(),
        "requires": attr.string_list(),
        "extra_requires": attr.string_list_dict(),
        "entry_points": attr.string_list_dict(doc = 'e.g. {"console_scripts": ["tool = pkg.mod:main"]}'),
        "_wheelmaker": attr.label(
            default = Label("//tools/python:wheelmaker"),
            executable = True,
            cfg = "exec",
        ),
    },
)

def _py_package_files_impl(ctx):
    outs = []
    for target, dest in ctx.attr.srcs.items():
        for f in target[DefaultInfo].files.to_list():
            out = ctx.actions.declare_file(dest + "/" + f.basename)
            ctx.actions.run(
                executable = ctx.executable._install_file,
                arguments = [f.path, out.path],
                inputs = [f],
                outputs = [out],
                mnemonic = "InstallFile",
                progress_message = "Placing %{input} in the package",
            )
            outs.append(out)
    return [DefaultInfo(files = depset(outs), runfiles = ctx.runfiles(files = outs))]

py_package_files = rule(
    implementation = _py_package_files_impl,
    doc = """Places each target's files under <package>/<dest>/, keeping their names, as installed:
ELF files lose the runpath entries that point into Bazel's build tree.""",
    attrs = {
        "srcs": attr.label_keyed_string_dict(allow_files = True, doc = "target -> directory in this package"),
        "_install_file": attr.label(
            default = Label("//tools/python:install_file"),
            executable = True,
            cfg = "exec",
        ),
    },
)
