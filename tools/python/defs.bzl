"""Python test macro: py_test that runs its sources with pytest."""

load("@rules_python//python:defs.bzl", "py_test")

def py_pytest(name, srcs, deps = [], data = [], args = [], **kwargs):
    """A py_test running `srcs` under pytest on the registered Python toolchain.

    Args:
      name: target name.
      srcs: test files (test_*.py or *_test.py).
      deps: py_library dependencies.
      data: runtime files.
      args: extra pytest arguments.
      **kwargs: passed to py_test (env, size, tags, ...).
    """
    py_test(
        name = name,
        srcs = srcs + [Label("//tools/python:pytest_main.py")],
        main = Label("//tools/python:pytest_main.py"),
        deps = deps,
        data = data,
        args = args + ["$(rootpath %s)" % s for s in srcs],
        python_version = "PY3",
        **kwargs
    )
