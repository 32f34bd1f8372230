"""Module extension `local_cuda`: the CUDA toolkit on this machine, as repository @local_cuda.

Looked up in this order: $CUDA_PATH; the toolkit wheels (nvidia-cuda-nvcc, nvidia-cuda-runtime, ...)
in the site-packages of $PYTHON_BIN_PATH or python3 (nvidia/cu13). The repository provides:
  :cuda_headers  the toolkit's headers
  :cudart        headers plus libcudart.so.13, linked dynamically (the wheel declares it, never ships it)
  :cuobjdump     the cuobjdump binary, where the toolkit has one
  defs.bzl       CUDA_AVAILABLE, CUDA_ROOT, NVCC, HOST_COMPILER, CUDA_VERSION
Where no toolkit is found the targets fail at analysis with a message saying what to do; builds with
--//:cuda=False never reach them. nvcc's host compiler is $CUDA_HOST_COMPILER, else $CXX, else g++.
The repository's BUILD files come from the templates in private/.
"""

def _python(rctx):
    path = rctx.os.environ.get("PYTHON_BIN_PATH", "")
    return rctx.path(path) if path else rctx.which("python3")

def _find_toolkit(rctx):
    """Returns (root, where it came from) or (None, what was tried)."""
    cuda_path = rctx.os.environ.get("CUDA_PATH", "")
    if cuda_path:
        root = rctx.path(cuda_path)
        if not root.get_child("bin").get_child("nvcc").exists:
            fail("CUDA_PATH=%s has no bin/nvcc" % cuda_path)
        return root, "CUDA_PATH"
    python = _python(rctx)
    if python:
        result = rctx.execute([python, rctx.path(Label("//tools/cuda/private:find_wheel_toolkit.py"))])
        if result.return_code == 0 and result.stdout.strip():
            return rctx.path(result.stdout.strip()), "toolkit wheels of " + str(python)
    return None, "CUDA_PATH unset; no nvidia/cu13 toolkit wheels for %s" % python

def _find_cudart(root):
    for lib in ["lib64", "lib", "targets/x86_64-linux/lib", "targets/sbsa-linux/lib"]:
        d = root.get_child(lib)
        if d.exists and d.get_child("libcudart.so.13").exists:
            return lib
    return None

def _local_cuda_repo_impl(rctx):
    root, origin = _find_toolkit(rctx)
    host = rctx.os.environ.get("CUDA_HOST_COMPILER", "") or rctx.os.environ.get("CXX", "")
    if not host:
        found = rctx.which("g++")
        host = str(found) if found else ""
    libdir = _find_cudart(root) if root else None
    if root and not libdir:
        fail("The CUDA toolkit at %s (%s) has no libcudart.so.13" % (root, origin))
    if not root:
        rctx.template("BUILD.bazel", Label("//tools/cuda/private:BUILD.local_cuda_missing.tpl"))
        rctx.template("missing.bzl", Label("//tools/cuda/private:missing.bzl.tpl"), {"%{origin}": origin})
        rctx.file("defs.bzl", "\n".join([
            '"""No CUDA toolkit: %s."""' % origin,
            "CUDA_AVAILABLE = False",
            'CUDA_ROOT = ""',
            'NVCC = ""',
            'HOST_COMPILER = "%s"' % host,
            'CUDA_VERSION = ""',
            'MISSING_REASON = "%s"' % origin,
            "",
        ]))
        return

    rctx.symlink(root.get_child("include"), "include")
    rctx.symlink(root.get_child(libdir).get_child("libcudart.so.13"), "lib/libcudart.so.13")
    cuobjdump = root.get_child("bin").get_child("cuobjdump")
    if cuobjdump.exists:
        rctx.symlink(cuobjdump, "bin/cuobjdump")
    nvcc = root.get_child("bin").get_child("nvcc")
    version = rctx.execute([nvcc, "--version"]).stdout
    release = [l for l in version.splitlines() if "release" in l]
    rctx.template("BUILD.bazel", Label("//tools/cuda/private:BUILD.local_cuda.tpl"), {
        "%{cuobjdump}": '["bin/cuobjdump"]' if cuobjdump.exists else "[]",
    })
    rctx.file("defs.bzl", "\n".join([
        '"""CUDA toolkit from %s."""' % origin,
        "CUDA_AVAILABLE = True",
        'CUDA_ROOT = "%s"' % root,
        'NVCC = "%s"' % nvcc,
        'HOST_COMPILER = "%s"' % host,
        'CUDA_VERSION = "%s"' % (release[0].strip() if release else "unknown"),
        'MISSING_REASON = ""',
        "",
    ]))

local_cuda_repo = repository_rule(
    implementation = _local_cuda_repo_impl,
    environ = ["CUDA_PATH", "PYTHON_BIN_PATH", "CUDA_HOST_COMPILER", "CXX", "PATH"],
    local = True,
)

def _local_cuda_impl(_mctx):
    local_cuda_repo(name = "local_cuda")

local_cuda = module_extension(implementation = _local_cuda_impl)
