#!/bin/sh
# Fetch onnxruntime's C/C++ API headers (the pip wheel ships none) from Debian's
# libonnxruntime-dev package and print the include directory on the last line of stdout.
#
# The archive address is read at run time from this machine's apt configuration
# (/etc/apt/sources.list.d/*.sources or /etc/apt/sources.list); the suite is replaced by
# QG_ORT_SUITE (default: trixie, whose package carries the onnxruntime 1.21 headers,
# ORT_API_VERSION 21). Nothing in the system's apt state is touched: the package lists go to
# a temporary directory and the headers to a cache directory, so they are fetched once:
#   ${XDG_CACHE_HOME:-$HOME/.cache}/quantgraph/onnxruntime-headers
# Set ORT_INCLUDE_DIR instead to use headers you already have.
set -eu

suite="${QG_ORT_SUITE:-trixie}"
package="libonnxruntime-dev"
cache_root="${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/quantgraph/onnxruntime-headers"
include_dir="$cache_root/$suite/usr/include/onnxruntime"

fail() {
    echo "fetch_ort_headers: $*" >&2
    echo "fetch_ort_headers: set ORT_INCLUDE_DIR to a directory holding onnxruntime_c_api.h" \
         "and onnxruntime_cxx_api.h (onnxruntime >= 1.17), or build without the native" \
         "library (pip install . -C cmake.define.QUANTGRAPH_NATIVE=OFF)." >&2
    exit 1
}

if [ -f "$include_dir/onnxruntime_cxx_api.h" ]; then
    echo "$include_dir"
    exit 0
fi

for tool in apt-get dpkg dpkg-deb; do
    command -v "$tool" >/dev/null 2>&1 \
        || fail "'$tool' not found (fetching the headers needs a Debian-based system)"
done

# First archive URI and key of a non-security 'deb' entry of the system's apt configuration.
uri=""
signed_by=""
for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    found=$(awk '
        BEGIN { RS = ""; FS = "\n" }
        {
            types = ""; uris = ""; suites = ""; key = ""
            for (i = 1; i <= NF; i++) {
                line = $i
                if (line ~ /^[ \t]*#/) continue
                if (line ~ /^Types:/)     { sub(/^Types:[ \t]*/, "", line); types = line }
                if (line ~ /^URIs:/)      { sub(/^URIs:[ \t]*/, "", line); uris = line }
                if (line ~ /^Suites:/)    { sub(/^Suites:[ \t]*/, "", line); suites = line }
                if (line ~ /^Signed-By:/) { sub(/^Signed-By:[ \t]*/, "", line); key = line }
            }
            if (types ~ /(^|[ \t])deb([ \t]|$)/ && uris != "" && suites !~ /security/) {
                split(uris, u, /[ \t]+/); print u[1] " " key; exit
            }
        }' "$f")
    if [ -n "$found" ]; then
        uri=${found%% *}
        signed_by=${found#* }
        [ "$signed_by" = "$found" ] && signed_by=""
        break
    fi
done
if [ -z "$uri" ] && [ -f /etc/apt/sources.list ]; then
    uri=$(awk '$1 == "deb" && $0 !~ /security/ {
                 for (i = 2; i <= NF; i++) if ($i !~ /^\[/ && $i !~ /\]$/) { print $i; exit } }' \
          /etc/apt/sources.list)
fi
[ -n "$uri" ] \
    || fail "no Debian archive in /etc/apt/sources.list.d/*.sources or /etc/apt/sources.list"

arch=$(dpkg --print-architecture)
work=$(mktemp -d "${TMPDIR:-/tmp}/qg-ort-headers.XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM
mkdir -p "$work/lists/partial" "$work/cache/archives/partial" "$work/download"

options=""
[ -n "$signed_by" ] && [ -f "$signed_by" ] && options="[signed-by=$signed_by] "
echo "deb ${options}$uri $suite main" > "$work/sources.list"

apt_opts="-o Dir::Etc::SourceList=$work/sources.list -o Dir::Etc::SourceParts=/dev/null"
apt_opts="$apt_opts -o Dir::State::Lists=$work/lists -o Dir::Cache=$work/cache"
apt_opts="$apt_opts -o APT::Sandbox::User=$(id -un) -o Debug::NoLocking=1"

echo "fetch_ort_headers: $package ($arch) from suite '$suite' of $uri" >&2
# shellcheck disable=SC2086
apt-get -q update $apt_opts >&2 || fail "apt-get update of suite '$suite' failed"
# shellcheck disable=SC2086
(cd "$work/download" && apt-get -q download $apt_opts "$package:$arch" >&2) \
    || fail "apt-get download $package:$arch failed"

deb=$(ls "$work/download"/*.deb 2>/dev/null | head -n 1)
[ -n "$deb" ] || fail "no .deb downloaded"
mkdir -p "$cache_root"
staging="$cache_root/.$suite.$$"
rm -rf "$staging"
dpkg-deb -x "$deb" "$staging" || fail "dpkg-deb -x $deb failed"
[ -f "$staging/usr/include/onnxruntime/onnxruntime_cxx_api.h" ] \
    || fail "$deb has no usr/include/onnxruntime/onnxruntime_cxx_api.h"
rm -rf "${cache_root:?}/$suite"
mv "$staging" "$cache_root/$suite"
echo "$include_dir"
