#!/usr/bin/env bash
# Runs Bazel 7.7.1 inside a Debian-testing build root, creating the root on first use.
# Called by tools/bazel; see there for when. Needs root (debootstrap, chroot, mounts).
#
# Layout under $EXECUTORCH_BUILD_CACHE (default ~/.cache/executorch-build):
#   root/            the Debian-testing tree: Bazel, its rules, g++-14, flatc, patchelf
#   state/venvs/ID/  Python virtual environment on the host's interpreter, one per interpreter
#                    (pytest, numpy, pyelftools, flatbuffers, pybind11, the CUDA toolkit wheels)
#   state/bazel/     Bazel's output user root, so bazel-* links in the checkout resolve on the host too
# state/, the checkout and the interpreter's prefix are bind-mounted at their own paths inside the root.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
cache=${EXECUTORCH_BUILD_CACHE:-${XDG_CACHE_HOME:-${HOME:-/root}/.cache}/executorch-build}
root=$cache/root
state=$cache/state
mirror=${EXECUTORCH_DEBIAN_MIRROR:-http://deb.debian.org/debian}

log() { printf 'tools/bazel: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

[[ $(id -u) == 0 ]] || die "the build root needs root (debootstrap, chroot). Run as root, or install Bazel 7 (e.g. bazelisk) and run tools/bazel again."

# Runs a command in a private mount+PID namespace with the build root's mounts in place.
# Everything it starts dies with it, and every mount disappears with the namespace.
# Paths in $binds are bind-mounted at their own paths; $inner_env is passed into the root.
in_root() {
  ER_ROOT=$root ER_BINDS="${binds[*]:-}" ER_CWD=$PWD ER_ENV="${inner_env[*]:-}" \
    unshare --mount --pid --fork --kill-child --propagation private -- bash "$here/enter.sh" "$@"
}

stamp_of() { cat "$@" | sha256sum | cut -c1-16; }

ensure_host_tools() {
  local missing=()
  command -v debootstrap >/dev/null || missing+=(debootstrap)
  command -v unshare >/dev/null || missing+=(util-linux)
  if ((${#missing[@]})); then
    log "installing ${missing[*]} on the host (apt-get)"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
}

ensure_root() {
  local want
  want=$(stamp_of "$here/packages.txt" "$here/stubs.sh")
  [[ -f $root/.executorch-ready && $(cat "$root/.executorch-ready") == "$want" ]] && return
  ensure_host_tools
  if [[ ! -f $root/.debootstrap-done ]]; then
    log "creating the Debian-testing build root in $root (first use; takes a few minutes)"
    rm -rf "$root"
    mkdir -p "$root"
    # Debian's sid script bootstraps testing; it works from Debian 12 and 13 hosts alike.
    debootstrap --variant=minbase forky "$root" "$mirror" /usr/share/debootstrap/scripts/sid >"$cache/debootstrap.log" 2>&1 ||
      die "debootstrap failed; see $cache/debootstrap.log"
    touch "$root/.debootstrap-done"
  fi
  log "installing Bazel 7.7.1, its rules and g++-14 into the build root (apt-get)"
  local pkgs
  pkgs=$(grep -v '^#' "$here/packages.txt" | xargs)
  binds=() inner_env=()
  # The testing archive's Release file can be past its Valid-Until; the packages are still signed.
  in_root bash -c "apt-get -qq -o Acquire::Check-Valid-Until=false update &&
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $pkgs" >"$cache/apt.log" 2>&1 ||
    die "apt-get in the build root failed; see $cache/apt.log"
  bash "$here/stubs.sh" "$root" "$state"
  echo "$want" >"$root/.executorch-ready"
}

resolve_python() {
  local py=${PYTHON_BIN_PATH:-python3} info
  command -v "$py" >/dev/null || die "no Python interpreter '$py' (set PYTHON_BIN_PATH)"
  info=$("$py" -c 'import sys; print(sys.executable); print(sys.base_prefix)') || die "cannot run $py"
  py_exe=$(sed -n 1p <<<"$info")
  py_prefix=$(sed -n 2p <<<"$info")
  case $py_prefix in
    /usr | /) die "$py_exe is the system interpreter ($py_prefix), which cannot be shared with the build root; set PYTHON_BIN_PATH to one installed under its own prefix (pyenv, python.org build, conda)" ;;
  esac
}

ensure_venv() {
  local want
  venv=$state/venvs/$(echo "$py_exe" | sha256sum | cut -c1-12)
  want=$(stamp_of "$here/requirements.txt" "$here/models.txt" "$here/run.sh" <(echo "$py_exe"))
  [[ -f $venv/.executorch-ready && $(cat "$venv/.executorch-ready") == "$want" ]] && return
  log "creating the Python environment $venv on $py_exe (pip; first use)"
  rm -rf "$venv"
  "$py_exe" -m venv "$venv"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$here/requirements.txt" ||
    die "pip install into $venv failed"
  # torch is optional (exporter and end-to-end tests); its CPU build is taken only where it is on disk
  # (pip's find-links): PyPI's default torch is a CUDA build of several GB. The model libraries of the
  # real-model tests come in the same call, so that nothing replaces that torch.
  "$venv/bin/python" -m pip install -q --disable-pip-version-check "torch==2.13.0+cpu" -r "$here/models.txt" ||
    log "no torch 2.13.0+cpu for $py_exe: tests that need torch will skip"
  echo "$want" >"$venv/.executorch-ready"
}

mkdir -p "$cache" "$state"
exec 9>"$cache/lock"
flock 9
ensure_root
resolve_python
ensure_venv
flock -u 9

# The workspace Bazel sees: this checkout, plus the one around $PWD if that is another.
binds=("$repo" "$state" "$py_prefix")
ws=$PWD
while [[ $ws != / && ! -f $ws/MODULE.bazel ]]; do ws=$(dirname "$ws"); done
[[ $ws == / || $ws == "$repo"/* || $ws == "$repo" ]] || binds+=("$ws")
[[ -n ${CUDA_PATH:-} ]] && binds+=("$(readlink -f "$CUDA_PATH")")

inner_env=(PYTHON_BIN_PATH="$venv/bin/python3")
[[ -n ${CUDA_PATH:-} ]] && inner_env+=(CUDA_PATH="$(readlink -f "$CUDA_PATH")")

set +e
in_root bash -c 'bazel "$@"; rc=$?; bazel shutdown >/dev/null 2>&1; exit $rc' bazel "$@"
