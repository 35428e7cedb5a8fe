#!/usr/bin/env bash
# Installs what a fresh Debian 12 machine lacks to build and test vrampool,
# and checks that the CUDA toolkit is there. Idempotent: when everything is
# present it installs nothing and says so in one line.
set -eu

CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
PKGS="make gcc libc6-dev libelf-dev libcunit1-dev libxxhash-dev libjansson-dev libcairo2-dev pkg-config python3 valgrind binutils file man-db groff-base"

missing=""
for p in $PKGS; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing="$missing $p"
done

if [ -n "$missing" ]; then
	echo "deps: installing:$missing"
	SUDO=""
	[ "$(id -u)" -eq 0 ] || SUDO="sudo"
	export DEBIAN_FRONTEND=noninteractive
	$SUDO apt-get update -q
	# shellcheck disable=SC2086
	$SUDO apt-get install -y -q --no-install-recommends $missing
else
	echo "deps: all packages present"
fi

if [ ! -f "$CUDA_HOME/include/cuda_runtime_api.h" ] || [ ! -e "$CUDA_HOME/lib64/libcudart.so" ]; then
	echo "deps: error: no CUDA toolkit at CUDA_HOME=$CUDA_HOME (need include/cuda_runtime_api.h and lib64/libcudart.so); install the CUDA toolkit or set CUDA_HOME" >&2
	exit 1
fi
echo "deps: CUDA toolkit at $CUDA_HOME ($("$CUDA_HOME/bin/nvcc" --version 2>/dev/null | sed -n 's/.*release \([0-9.]*\).*/\1/p' || echo 'no nvcc'))"
