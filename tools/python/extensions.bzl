"""Module extension `local_python`: the Python interpreter the build targets, as repository @local_python.

The interpreter is $PYTHON_BIN_PATH, else `python3` on PATH. The repository provides:
  :python_headers   cc_library with the interpreter's C headers
  :pybind11         cc_library with pybind11's headers (from the interpreter's pybind11 package)
  :toolchain        the Python toolchain (py_test/py_binary run on this interpreter)
  defs.bzl          PYTHON_TAG, ABI_TAG, EXT_SUFFIX, VERSION, HAS_TORCH, INTERPRETER
Nothing is downloaded: what the interpreter lacks (pybind11) is reported when a target needs it.
"""

def _find_python(rctx):
    path = rctx.os.environ.get("PYTHON_BIN_PATH", "")
    if path:
        return rctx.path(path)
    found = rctx.which("python3")
    if not found:
        fail("No Python interpreter: put python3 on PATH or set PYTHON_BIN_PATH.")
    return found

def _local_python_repo_impl(rctx):
    python = _find_python(rctx)
    result = rctx.execute([python, rctx.path(Label("//tools/python/private:probe.py"))])
    if result.return_code != 0:
        fail("Cannot query the Python interpreter %s:\n%s" % (python, result.stderr))
    info = json.decode(result.stdout)

    # The executable stays as the interpreter reports it: a virtual environment's python must be run
    # through its own path to see its site-packages.
    rctx.symlink(info["include"], "include")
    if info["pybind11"]:
        rctx.symlink(info["pybind11"], "pybind11")
    else:
        rctx.file("pybind11/pybind11/MISSING.txt", "pybind11 is not installed for %s\n" % python)
    rctx.template("BUILD.bazel", Label("//tools/python/private:BUILD.local_python.tpl"), {"%{executable}": str(python)})
    rctx.file("defs.bzl", "\n".join([
        '"""Facts about the interpreter at %s."""' % python,
        'INTERPRETER = "%s"' % python,
        'VERSION = "%s"' % info["version"],
        'PYTHON_TAG = "%s"' % info["tag"],
        'ABI_TAG = "%s"' % info["tag"],
        'EXT_SUFFIX = "%s"' % info["ext_suffix"],
        "HAS_TORCH = %s" % info["torch"],
        "",
    ]))

local_python_repo = repository_rule(
    implementation = _local_python_repo_impl,
    environ = ["PYTHON_BIN_PATH", "PATH"],
    local = True,
)

def _local_python_impl(_mctx):
    local_python_repo(name = "local_python")

local_python = module_extension(implementation = _local_python_impl)
