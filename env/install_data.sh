#!/bin/sh
# Debian's dataset-fashion-mnist (Zalando's Fashion-MNIST: four IDX files, ~30 MB, in
# /usr/share/datasets/fashion-mnist), the data of `workload.dataset: fashion_mnist`, installed with
# apt where there is apt and it is missing:   sh env/install_data.sh   (env/install.sh runs it)
# Soft: whatever stops it prints one line and exits 0, since only that data set needs the package
# (the default tier's data are generated); without apt, bring the files through workload.data_dir.
PKG=dataset-fashion-mnist
say() { echo "env/install_data.sh: $PKG not installed: $*; only workload.dataset: fashion_mnist needs it" >&2; }
if ! command -v apt-get >/dev/null 2>&1; then
    say "no apt-get here (put its four IDX files in a folder under the data root: docs/full-scale.md)"
    exit 0
fi
dpkg -s "$PKG" >/dev/null 2>&1 && exit 0
if [ "$(id -u)" != 0 ]; then
    say "this user is not root (sudo apt-get install $PKG)"
    exit 0
fi
log=$(mktemp)
# a fresh machine's package lists may be empty or old: update them once if the first try fails
if ! { DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$PKG" \
       || { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$PKG"; }; } >"$log" 2>&1; then
    say "apt-get install failed ($(tail -n 1 "$log"))"
fi
rm -f "$log"
exit 0
