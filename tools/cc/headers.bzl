"""`cc_public_headers`: the public headers of cc_library targets, laid out by include path."""

def _include_path(f):
    # Headers with include_prefix live in <pkg>/_virtual_includes/<target>/<include path>.
    parts = f.short_path.split("/_virtual_includes/", 1)
    if len(parts) == 2:
        return parts[1].split("/", 1)[1]
    path = f.short_path
    return path.split("/", 2)[2] if path.startswith("../") else path

def _cc_public_headers_impl(ctx):
    outs = []
    seen = {}
    for dep in ctx.attr.deps:
        for h in dep[CcInfo].compilation_context.direct_public_headers:
            path = _include_path(h)
            if path in seen:
                continue
            seen[path] = True
            out = ctx.actions.declare_file(ctx.attr.dest + "/" + path)
            ctx.actions.symlink(output = out, target_file = h)
            outs.append(out)
    return [DefaultInfo(files = depset(outs))]

cc_public_headers = rule(
    implementation = _cc_public_headers_impl,
    doc = "Places each dep's own public headers at <package>/<dest>/<include path>.",
    attrs = {
        "deps": attr.label_list(providers = [CcInfo]),
        "dest": attr.string(mandatory = True),
    },
)
