"""Module extension `debian_sources`: libraries built from Debian's source tarballs.

Each is the upstream (".orig") tarball of a Debian testing source package, fetched from Debian's
archive by URL and sha256 (both as `dists/forky/main/source/Sources.xz` lists them) and built with
our BUILD file from this directory: nothing third-party is kept in the repository.
"""

load("@bazel_tools//tools/build_defs/repo:http.bzl", "http_archive")

_POOL = "http://deb.debian.org/debian/pool/main/"

# Repository name: (source package, upstream version, sha256 of its .orig.tar.xz).
SOURCES = {
    "cpuinfo": ("cpuinfo", "0.0~git20250905.877328f", "557ca404a3836b9f335a3a06b65ff9fe9dbaaefab7fb5c0185f53d9f33615a10"),
    "fxdiv": ("fxdiv", "0.0~git20200417.b408327", "7953482badaf4cb34026c3487c257b8e4ab2df061c019bd6fabbbc12ad52c44b"),
    "pthreadpool": ("pthreadpool", "0.0~git20251020.0e6ca13", "7a385b6585abe8f8658952c50b44a1dabe200de2c88eabe65d15168b8a82295c"),
    "xnnpack": ("xnnpack", "0.0~git20241108.4ea82e5", "90bde2caef0f880f627bab0dc805a86c4b8070cd98e3243db3046ab3f3be1a99"),
}

# Tarballs whose files lie at the top, with no "PACKAGE-VERSION/" directory around them.
_FLAT = ["xnnpack"]

# What the BUILD files name in this repository, by labels that hold wherever it is used from (as
# the root module, or as a bazel_dep of another): tools/debian/labels.bzl in each repository.
_LABELS = {"GLIBC_VERSIONS": Label("//tools/debian:glibc_versions")}

def _debian_sources_impl(_mctx):
    labels = "\n".join(['%s = "%s"' % (k, str(v)) for k, v in _LABELS.items()])
    for name, (package, version, sha256) in SOURCES.items():
        http_archive(
            name = name,
            build_file = Label("//tools/debian:%s.BUILD" % name),
            patch_cmds = ["mkdir -p tools/debian && printf '%%s\\n' '%s' > tools/debian/labels.bzl && touch tools/debian/BUILD.bazel" % labels],
            sha256 = sha256,
            strip_prefix = "" if name in _FLAT else "%s-%s" % (package, version),
            urls = [_POOL + "%s/%s/%s_%s.orig.tar.xz" % (package[0], package, package, version)],
        )

debian_sources = module_extension(implementation = _debian_sources_impl)
