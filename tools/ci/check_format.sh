#!/usr/bin/env bash
# Formatting of the tree: BUILD and .bzl files with buildifier, C++ and CUDA with clang-format 14 and
# .clang-format. Fetches both on first use: buildifier from npm (@bazel/buildifier bundles its
# binaries), clang-format-14 from Debian's archive. Prints the files that need formatting.
#   tools/ci/check_format.sh          check
#   tools/ci/check_format.sh --fix    rewrite them in place
set -euo pipefail
cd "$(dirname "$0")/../.."

tools=${EXECUTORCH_BUILD_CACHE:-$HOME/.cache/executorch-build}/tools
buildifier_version=8.2.1
buildifier=$tools/buildifier-$buildifier_version
if [[ ! -x $buildifier ]]; then
  mkdir -p "$tools"
  tmp=$(mktemp -d)
  (cd "$tmp" && npm pack --silent "@bazel/buildifier@$buildifier_version" >/dev/null && tar xzf bazel-buildifier-*.tgz)
  install -m 755 "$tmp/package/buildifier-linux_amd64" "$buildifier"
  rm -rf "$tmp"
fi
if ! command -v clang-format-14 >/dev/null; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends clang-format-14 >/dev/null
fi

mapfile -t build_files < <(git ls-files '*.bazel' '*.bzl')
mapfile -t cc_files < <(git ls-files '*.cpp' '*.h' '*.cu' '*.cuh')
if [[ ${1:-} == --fix ]]; then
  "$buildifier" -mode=fix "${build_files[@]}"
  clang-format-14 --style=file -i "${cc_files[@]}"
  exit 0
fi
rc=0
"$buildifier" -mode=check "${build_files[@]}" || rc=1
for f in "${cc_files[@]}"; do
  clang-format-14 --style=file --dry-run --Werror "$f" 2>/dev/null || { echo "$f # clang-format"; rc=1; }
done
[[ $rc == 0 ]] && echo "format: ${#build_files[@]} BUILD/.bzl and ${#cc_files[@]} C++ files are formatted"
exit "$rc"
