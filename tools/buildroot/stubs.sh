#!/usr/bin/env bash
# Writes the build root's Bazel configuration: ROOT/etc/bazel.bazelrc (read by Debian's Bazel through
# its system rc) and empty stand-ins for modules that Bazel's own module graph names but nothing here
# builds. Debian's /etc/bazel/bazelrc already overrides the rules Debian packages.
# Usage: stubs.sh ROOT STATE
set -euo pipefail
root=$1
state=$2
stubs=/opt/executorch/stub-modules

rc=(
  "# Written by tools/buildroot/stubs.sh: the build root's offline configuration."
  "startup --output_user_root=$state/bazel"
)
for name in protobuf zlib buildozer apple_support; do
  mkdir -p "$root$stubs/$name"
  printf 'module(name = "%s")\n' "$name" >"$root$stubs/$name/MODULE.bazel"
  : >"$root$stubs/$name/BUILD.bazel"
  rc+=("common --override_module=$name=$stubs/$name")
done
# Debian's default g++ is newer than nvcc accepts as host compiler; use g++-14 for C++ and CUDA alike.
rc+=("common --repo_env=CC=/usr/bin/gcc-14" "common --repo_env=CXX=/usr/bin/g++-14")
printf '%s\n' "${rc[@]}" >"$root/etc/bazel.bazelrc"
