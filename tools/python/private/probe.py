"""Prints, as JSON, what the @local_python repository needs to know about the interpreter running it."""
import importlib.util
import json
import sys
import sysconfig

info = {
    "executable": sys.executable,
    "version": "%d.%d" % sys.version_info[:2],
    "include": sysconfig.get_paths()["include"],
    "ext_suffix": sysconfig.get_config_var("EXT_SUFFIX") or ".so",
    "tag": "cp%d%d" % sys.version_info[:2],
}
try:
    import pybind11

    info["pybind11"] = pybind11.get_include()
except ImportError:
    info["pybind11"] = ""
try:
    info["torch"] = importlib.util.find_spec("torch") is not None
except Exception:
    info["torch"] = False
print(json.dumps(info))
