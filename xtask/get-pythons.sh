#!/bin/bash
# get-pythons.sh DIR -- unpack real Debian CPython builds (trixie 3.13, sid 3.14) into DIR.
#
# Why not debootstrap: it needs the system dpkg lock and 300 MB per suite. Instead a private apt
# configuration per suite resolves the closure of pythonX.Y against an empty dpkg status, downloads
# the .debs into DIR/.cache (kept, so a rerun is offline and instant) and `dpkg-deb -x`es them
# into DIR/<suite>. Maintainer scripts never run; the host's apt state is not touched.
# The binaries need their suite's glibc: run them as `chroot DIR/<suite> /usr/bin/python3.X`.
#
# Prints one line per interpreter: version<TAB>root<TAB>path-inside-root
set -euo pipefail

DIR=${1:?usage: $0 DIR}
SPEC=${NEUROGC_PYTHONS_SPEC:-"trixie:3.13 sid:3.14,3.15"}
MIRROR=${NEUROGC_DEBIAN_MIRROR:-http://deb.debian.org/debian}
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg

log() { echo "get-pythons: $*" >&2; }
die() { log "error: $*"; exit 1; }
[ "$(id -u)" = 0 ] || die "must run as root (chroot, mknod)"
for t in apt-get apt-cache dpkg-deb chroot flock; do command -v $t >/dev/null || die "missing $t"; done
[ -r "$KEYRING" ] || die "missing $KEYRING (apt-get install debian-archive-keyring)"

mkdir -p "$DIR/.cache"
DIR=$(cd "$DIR" && pwd -P)
exec 9>"$DIR/.lock"
flock 9
rm -rf "$DIR"/.*.tmp.??????

apt_conf() {
  local a=$DIR/.cache/apt-$1
  mkdir -p "$a/lists/partial" "$a/archives/partial" "$a/etc/apt.conf.d" "$a/etc/preferences.d" "$a/state"
  [ -e "$a/state/status" ] || : > "$a/state/status"
  echo "deb [signed-by=$KEYRING] $MIRROR $1 main" > "$a/etc/sources.list"
  cat > "$a/apt.conf" <<CONF
Dir::Etc::sourcelist "$a/etc/sources.list";
Dir::Etc::sourceparts "-";
Dir::Etc::parts "$a/etc/apt.conf.d";
Dir::Etc::preferencesparts "$a/etc/preferences.d";
Dir::State "$a/state";
Dir::State::Lists "$a/lists";
Dir::State::status "$a/state/status";
Dir::Cache "$a";
Dir::Cache::archives "$a/archives";
APT::Architecture "amd64";
APT::Architectures { "amd64"; };
APT::Install-Recommends "false";
APT::Sandbox::User "root";
Acquire::Languages "none";
Acquire::GzipIndexes "true";
Acquire::Retries "3";
Acquire::Check-Valid-Until "false";
Acquire::Check-Date "false";
Acquire::IndexTargets::deb::DEP-11::DefaultEnabled "false";
Acquire::IndexTargets::deb::DEP-11-icons::DefaultEnabled "false";
Acquire::IndexTargets::deb::DEP-11-icons-small::DefaultEnabled "false";
Acquire::IndexTargets::deb::CNF::DefaultEnabled "false";
CONF
  # the registry may only be reachable through the system's proxy
  APT_CONFIG=/dev/null apt-config dump 2>/dev/null | grep -E '^Acquire::(http|https)::Proxy' >> "$a/apt.conf" || true
  echo "$a/apt.conf"
}

retry() { local i; for i in 1 2 3; do "$@" && return 0; log "retry $i: $*"; sleep $((i * 3)); done; return 1; }

build_suite() {
  local suite=$1 vers=$2 root=$DIR/$1 v pkgs=() conf files f tmp full
  conf=$(apt_conf "$suite")
  export APT_CONFIG=$conf
  log "$suite: apt-get update"
  retry apt-get -qq update >&2 || die "$suite: apt-get update failed"
  for v in $vers; do pkgs+=("python$v"); done
  # the closure as .deb file names (empty dpkg status: libc6 and all)
  files=$(apt-get -s -qq install "${pkgs[@]}" | sed -nE 's/^Inst (\S+) \((\S+) .*\[(\S+)\]\).*/\1_\2_\3.deb/p' | sed 's/:/%3a/g')
  [ -n "$files" ] || die "$suite: cannot resolve ${pkgs[*]}"
  log "$suite: downloading $(echo "$files" | wc -l) packages"
  retry apt-get -qq -y --download-only install "${pkgs[@]}" >&2 || die "$suite: download failed"
  tmp=$(mktemp -d "$DIR/.$suite.tmp.XXXXXX")
  for f in $files; do dpkg-deb -x "$DIR/.cache/apt-$suite/archives/$f" "$tmp"; done
  for f in bin lib lib64 sbin; do [ -e "$tmp/$f" ] || [ -L "$tmp/$f" ] || ln -s "usr/$f" "$tmp/$f"; done
  mkdir -p "$tmp/proc" "$tmp/dev" "$tmp/tmp" "$tmp/etc" "$tmp/mnt"
  chmod 1777 "$tmp/tmp"
  for d in null:1:3 zero:1:5 urandom:1:9; do
    IFS=: read -r n ma mi <<<"$d"; mknod -m 666 "$tmp/dev/$n" c "$ma" "$mi" 2>/dev/null || true
  done
  [ -e "$tmp/etc/passwd" ] || printf 'root:x:0:0:root:/root:/bin/sh\n' > "$tmp/etc/passwd"
  : > "$tmp/.interpreters"
  for v in $vers; do
    full=$(chroot "$tmp" "/usr/bin/python$v" -c 'import sys, gc; print(sys.version.split()[0])') \
      || die "$suite: /usr/bin/python$v does not run in its root"
    printf '%s\t/usr/bin/python%s\n' "$full" "$v" >> "$tmp/.interpreters"
  done
  echo "$vers" > "$tmp/.spec"
  rm -rf "$root"; mv "$tmp" "$root"
  rm -rf "$DIR/.cache/apt-$suite/lists" "$DIR/.cache/apt-$suite/"*.bin
  log "$suite: ready ($(du -sh "$root" | cut -f1))"
}

for entry in $SPEC; do
  suite=${entry%%:*}; vers=${entry#*:}; vers=${vers//,/ }
  root=$DIR/$suite
  if ! { [ -f "$root/.interpreters" ] && [ "$(cat "$root/.spec" 2>/dev/null)" = "$vers" ]; }; then
    build_suite "$suite" "$vers"
  fi
  while IFS=$'\t' read -r full path; do printf '%s\t%s\t%s\n' "$full" "$root" "$path"; done < "$root/.interpreters"
done
