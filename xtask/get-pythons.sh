#!/bin/bash
# get-pythons.sh DIR -- unpack real Debian CPython builds (trixie 3.13, sid 3.14) into DIR, and
# build the free-threaded 3.13t from the CPython source Debian serves.
#
# Why not debootstrap: it needs the system dpkg lock and 300 MB per suite. Instead a private apt
# configuration per suite resolves the closure of pythonX.Y against an empty dpkg status, downloads
# the .debs into DIR/.cache (kept, so a rerun is offline and instant) and `dpkg-deb -x`es them
# into DIR/<suite>. Maintainer scripts never run; the host's apt state is not touched.
# The binaries need their suite's glibc: run them as `chroot DIR/<suite> /usr/bin/python3.X`.
#
# Source builds: Debian's python3.13 source package carries CPython's own release tarball as its
# .orig.tar.xz. It is fetched from the archive's pool by name and checked against the SHA-256 that
# Debian's .dsc lists (pinned below), then built with `./configure --disable-gil` into
# DIR/source-<name> (about 3 minutes on 2 cores; kept, so a rerun is offline and instant). The
# build runs natively (the host's glibc): no chroot.
#
# Prints one line per interpreter: version<TAB>root<TAB>path-inside-root (root "-": a native build,
# path absolute)
set -euo pipefail

DIR=${1:?usage: $0 DIR}
SPEC=${NEUROGC_PYTHONS_SPEC:-"trixie:3.13 sid:3.14,3.15"}
MIRROR=${NEUROGC_DEBIAN_MIRROR:-http://deb.debian.org/debian}
# name:source-package:upstream-version:sha256-of-orig.tar.xz:configure-flags (',' for spaces).
# python3.13 3.13.5: the .orig.tar.xz of trixie's python3.13_3.13.5-2+deb13u5.dsc (2026-11-24).
# sid's and forky's python3.14/3.15 source files answered 404 on 2026-11-24 and 2026-11-25: no
# 3.14t or 3.15t until they can be had.
SOURCE_SPEC=${NEUROGC_PYTHONS_SOURCE_SPEC:-"3.13t:python3.13:3.13.5:93e583f243454e6e9e4588ca2c2662206ad961659863277afcdb96801647d640:--disable-gil"}
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg

log() { echo "get-pythons: $*" >&2; }
die() { log "error: $*"; exit 1; }
[ "$(id -u)" = 0 ] || die "must run as root (chroot, mknod)"
for t in apt-get apt-cache dpkg-deb chroot flock make cc; do command -v $t >/dev/null || die "missing $t"; done
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

# Fetches one source tarball into DIR/.cache/src (once) and checks its pinned SHA-256.
fetch_source() {
  local pkg=$1 ver=$2 sha=$3 file dest conf
  file=${pkg}_${ver}.orig.tar.xz
  dest=$DIR/.cache/src/$file
  if [ -f "$dest" ] && echo "$sha  $dest" | sha256sum -c --status; then echo "$dest"; return; fi
  mkdir -p "$DIR/.cache/src"
  conf=$(apt_conf trixie)
  log "$pkg $ver: downloading $file"
  # apt's own downloader: the private configuration's proxy, and the hash checked as it lands
  retry env APT_CONFIG="$conf" /usr/lib/apt/apt-helper -qq download-file \
    "$MIRROR/pool/main/${pkg:0:1}/$pkg/$file" "$dest.part" "SHA256:$sha" >&2 \
    || die "$pkg $ver: cannot fetch $file with SHA-256 $sha (if Debian moved on, take the new .orig.tar.xz and its SHA-256 from the .dsc of 'apt-get source --download-only $pkg' and update SOURCE_SPEC)"
  mv "$dest.part" "$dest"
  echo "$dest"
}

build_source() {
  local name=$1 pkg=$2 ver=$3 sha=$4 flags=${5//,/ } root=$DIR/source-$1 tarball tmp minor exe
  tarball=$(fetch_source "$pkg" "$ver" "$sha")
  tmp=$(mktemp -d "$DIR/.source-$name.tmp.XXXXXX")
  tar -xJf "$tarball" -C "$tmp"
  log "$name: configure $flags; make (about 3 minutes on 2 cores)"
  # The prefix is the final place: getpath finds the standard library from the executable.
  rm -rf "$root"
  ( cd "$tmp"/Python-"$ver" \
      && ./configure -q --prefix="$root" --without-ensurepip $flags \
      && make -s -j"$(nproc)" \
      && make -s install ) > "$tmp/build.log" 2>&1 \
    || { tail -30 "$tmp/build.log" >&2; die "$name: build failed (log above)"; }
  rm -rf "$tmp"
  minor=${ver%.*}
  exe=$root/bin/python$minor${name#"$minor"}
  [ -x "$exe" ] || exe=$root/bin/python$minor
  full=$("$exe" -c 'import sys; print(sys.version.split()[0])') || die "$name: $exe does not run"
  printf '%s\t%s\n' "$full" "$exe" > "$root/.interpreters"
  echo "$ver $sha $flags" > "$root/.spec"
  log "$name: ready ($(du -sh "$root" | cut -f1))"
}

for entry in $SOURCE_SPEC; do
  IFS=: read -r name pkg ver sha flags <<<"$entry"
  root=$DIR/source-$name
  if ! { [ -f "$root/.interpreters" ] && [ "$(cat "$root/.spec" 2>/dev/null)" = "$ver $sha ${flags//,/ }" ]; }; then
    build_source "$name" "$pkg" "$ver" "$sha" "$flags"
  fi
  while IFS=$'\t' read -r full path; do printf '%s\t-\t%s\n' "$full" "$path"; done < "$root/.interpreters"
done

for entry in $SPEC; do
  suite=${entry%%:*}; vers=${entry#*:}; vers=${vers//,/ }
  root=$DIR/$suite
  if ! { [ -f "$root/.interpreters" ] && [ "$(cat "$root/.spec" 2>/dev/null)" = "$vers" ]; }; then
    build_suite "$suite" "$vers"
  fi
  while IFS=$'\t' read -r full path; do printf '%s\t%s\t%s\n' "$full" "$root" "$path"; done < "$root/.interpreters"
done
