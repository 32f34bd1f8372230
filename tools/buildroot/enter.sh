#!/usr/bin/env bash
# Inside a fresh mount+PID namespace (see run.sh's in_root): mounts what the build root needs and
# runs "$@" chrooted there, in the caller's directory, with a clean environment.
set -euo pipefail
root=$ER_ROOT
mount -t proc proc "$root/proc"
mount --rbind /dev "$root/dev"
mount --rbind /sys "$root/sys"
for p in $ER_BINDS; do
  mkdir -p "$root$p"
  mount --bind "$p" "$root$p"
done
cp -L /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true
# shellcheck disable=SC2086 # ER_ENV is a list of NAME=VALUE words.
exec chroot "$root" /usr/bin/env -i HOME=/root USER=root LANG=C.UTF-8 TERM="${TERM:-dumb}" \
  PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin $ER_ENV \
  bash -c 'cd "$0" 2>/dev/null || cd /; exec "$@"' "$ER_CWD" "$@"
