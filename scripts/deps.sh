#!/usr/bin/env bash
# Installs what a fresh Debian 12 machine lacks to build and test vrampool,
# and checks that the CUDA toolkit is there. Idempotent: when everything is
# present it installs nothing and says so in one line each.
#
#   scripts/deps.sh           what `make`, `make test`, `make bench` need
#   scripts/deps.sh fuzz      also clang and its libFuzzer runtime (make fuzz)
#   scripts/deps.sh tsan      also gcc's ThreadSanitizer runtime (make tsan)
#
# The Python test dependencies (CuPy for tests/e2e/cupy.sh and
# tests/gpu/cupy_loop.py) live in a virtual environment of their own
# (Debian 12's pip refuses system-wide installs, PEP 668), pinned, built
# from wheels downloaded once into a cache beside it, shared by every
# checkout of the machine:
#   ${VRAMPOOL_PYENV:-${XDG_CACHE_HOME:-~/.cache}/vrampool/pyenv-<pins>}
# `scripts/deps.sh --pyenv` prints that path and does nothing else. A
# failed Python install (no network) is a warning, never an error: the
# CuPy test then says it was skipped and why ($PYENV.log).
set -eu

# Exact versions; cuda-pathfinder is CuPy's one other requirement.
PY_PINS="cupy-cuda13x==14.2.0 numpy==2.4.6 cuda-pathfinder==1.9.1"
PY_CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/vrampool
PYENV=${VRAMPOOL_PYENV:-$PY_CACHE/pyenv-cupy14.2.0-numpy2.4.6}
if [ "${1:-}" = --pyenv ]; then
	echo "$PYENV"
	exit 0
fi

CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
PKGS="make gcc libc6-dev libelf-dev libcunit1-dev libxxhash-dev libjansson-dev libcairo2-dev pkg-config python3 python3-venv valgrind binutils file man-db groff-base"
# Debian 12: clang is clang-14, whose libFuzzer (libclang_rt.fuzzer) is in
# libclang-rt-14-dev; gcc-12's ThreadSanitizer runtime is libtsan2.
for extra in "$@"; do
	case $extra in
	fuzz) PKGS="$PKGS clang libclang-rt-14-dev" ;;
	tsan) PKGS="$PKGS libtsan2" ;;
	*) echo "deps: unknown extra '$extra' (expected fuzz or tsan)" >&2; exit 2 ;;
	esac
done

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

# The extras, checked by use: a runtime that is missing fails to link.
for extra in "$@"; do
	case $extra in
	fuzz) printf 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { return !d + (int)n * 0; }\n' |
		clang -x c -fsanitize=fuzzer,address,undefined -o /dev/null - ||
		{ echo "deps: error: clang cannot link a libFuzzer target (libclang-rt-14-dev?)" >&2; exit 1; }
	      echo "deps: clang $(clang -dumpversion) links libFuzzer targets under ASan and UBSan" ;;
	tsan) printf 'int main(void) { return 0; }\n' | ${CC:-cc} -x c -fsanitize=thread -o /dev/null - ||
		{ echo "deps: error: ${CC:-cc} cannot link with -fsanitize=thread (libtsan2?)" >&2; exit 1; }
	      echo "deps: ${CC:-cc} links ThreadSanitizer programs" ;;
	esac
done

if [ ! -f "$CUDA_HOME/include/cuda_runtime_api.h" ] || [ ! -e "$CUDA_HOME/lib64/libcudart.so" ]; then
	echo "deps: error: no CUDA toolkit at CUDA_HOME=$CUDA_HOME (need include/cuda_runtime_api.h and lib64/libcudart.so); install the CUDA toolkit or set CUDA_HOME" >&2
	exit 1
fi
echo "deps: CUDA toolkit at $CUDA_HOME ($("$CUDA_HOME/bin/nvcc" --version 2>/dev/null | sed -n 's/.*release \([0-9.]*\).*/\1/p' || echo 'no nvcc'))"

# python_env: makes $PYENV hold exactly $PY_PINS, or leaves it absent with
# the reason in $PYENV.log. Built aside and renamed into place, under a
# lock, so that a half-made environment is never used and two checkouts
# running this at once build it once.
python_env() {
	local tmp log=$PYENV.log
	if [ -f "$PYENV/.vrampool-pins" ] && [ "$(cat "$PYENV/.vrampool-pins")" = "$PY_PINS" ]; then
		echo "deps: python test env present ($PY_PINS) at $PYENV"
		return 0
	fi
	mkdir -p "$(dirname "$PYENV")" "$PY_CACHE/wheels"
	exec 9>"$PYENV.lock"
	flock 9
	if [ -f "$PYENV/.vrampool-pins" ] && [ "$(cat "$PYENV/.vrampool-pins")" = "$PY_PINS" ]; then
		echo "deps: python test env present ($PY_PINS) at $PYENV"
		exec 9>&-
		return 0
	fi
	if [ -e "$PYENV" ] && [ ! -f "$PYENV/.vrampool-pins" ]; then
		echo "deps: warning: $PYENV exists and was not made here: left alone; the CuPy test will be skipped" >&2
		exec 9>&-
		return 0
	fi
	echo "deps: installing the python test env ($PY_PINS) at $PYENV"
	tmp=$PYENV.tmp.$$
	rm -rf "$tmp" "$PYENV"
	# shellcheck disable=SC2086
	if { python3 -m venv "$tmp" &&
		"$tmp/bin/python" -m pip download --disable-pip-version-check -q --no-deps \
			--timeout 30 --retries 2 -d "$PY_CACHE/wheels" $PY_PINS &&
		"$tmp/bin/python" -m pip install --disable-pip-version-check -q --no-deps --no-index \
			--find-links "$PY_CACHE/wheels" $PY_PINS &&
		"$tmp/bin/python" -m pip check &&
		"$tmp/bin/python" -c 'import cupy, numpy'; } >"$log" 2>&1; then
		echo "$PY_PINS" >"$tmp/.vrampool-pins"
		mv "$tmp" "$PYENV"
		rm -f "$log"
	else
		rm -rf "$tmp"
		echo "deps: warning: could not install the python test env (see $log); the CuPy test will be skipped" >&2
		tail -n 3 "$log" | sed 's/^/deps:   /' >&2
	fi
	exec 9>&-
	return 0
}
python_env
