#!/usr/bin/env bash
# `vrampool inspect` against ground truth: every ELF file under the CUDA
# toolkit ($CUDA_HOME) that is present here, its verdict compared with one
# drawn independently from binutils (nm -D, nm, readelf -h/-l/-d/-S) and the
# bytes of its allocated read-only sections read with Python: which copy
# entry points it imports, whether it defines the runtime or the driver API,
# whether it carries a runtime (symbols, or the C string of the runtime's
# error-name table) and whether it names libcuda.so.1 and imports dlsym;
# a library of the toolkit with a runtime or driver route of its own keeps
# its copies out of reach (the README's "What the shim does not touch").
# One check per file, then: no NVIDIA library gets the advice to rebuild it,
# and every file's dependencies are walked without an error.
source "$(dirname "$0")/lib.sh"
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
V=$VRAMPOOL_BIN

cd "$TMP" || exit 1
# Every regular file whose first four bytes are the ELF magic (symlinks skipped:
# each file once).
find "$CUDA_HOME/" -type f -size +63c 2>/dev/null | while read -r f; do
	[ "$(head -c 4 "$f" | od -An -c | tr -d ' ')" = '177ELF' ] && printf '%s\n' "$f"
done | sort >elfs.txt
check "the toolkit holds ELF files to compare ($(wc -l <elfs.txt) found)" test -s elfs.txt

# truth FILE: prints the verdict's opening words that binutils' facts call for.
cat >truth.py <<'PY'
import re, subprocess, sys

RUNTIME_COPIES = {"cudaMemcpy", "cudaMemcpy_ptds", "cudaMemcpyAsync", "cudaMemcpyAsync_ptsz",
                  "cudaMemcpy2D", "cudaMemcpy2D_ptds", "cudaMemcpy2DAsync", "cudaMemcpy2DAsync_ptsz",
                  "cudaMemcpyBatchAsync", "cudaMemcpyBatchAsync_ptsz"}
DRIVER_COPIES = {"cuMemcpy", "cuMemcpy_ptds", "cuMemcpyAsync", "cuMemcpyAsync_ptsz",
                 "cuMemcpy2D_v2", "cuMemcpy2D_v2_ptds", "cuMemcpy2DAsync_v2", "cuMemcpy2DAsync_v2_ptsz",
                 "cuMemcpyBatchAsync", "cuMemcpyBatchAsync_ptsz", "cuMemcpyBatchAsync_v2",
                 "cuMemcpyBatchAsync_v2_ptsz"}
RUNTIME_EXPORTS = {"cudaMemcpy", "cudaMemcpyAsync", "cudaMemcpyAsync_ptsz", "cudaMemcpy_ptds", "cudaMalloc"}
DRIVER_EXPORTS = {"cuInit", "cuGetProcAddress_v2", "cuDriverGetVersion", "cuMemcpyHtoD_v2"}
RUNTIME_DEFS = {"cudaMemcpyAsync", "cudaMemcpy", "cudaMalloc", "cudaGetErrorString",
                "cudaMemcpyAsync_ptsz", "cudaLaunchKernel"}

def run(*args):
    return subprocess.run(args, capture_output=True, text=True, errors="replace").stdout

def names(out, undefined):
    got = set()
    for line in out.splitlines():
        parts = line.split()
        if undefined and len(parts) == 2 and parts[0] in ("U", "w", "v"):
            got.add(parts[1].split("@")[0])
        elif not undefined and len(parts) >= 3 and parts[1] not in ("U", "w", "v"):
            got.add(parts[2].split("@")[0])
    return got

f = sys.argv[1]
imports = names(run("nm", "-D", "--undefined-only", f), True)
exports = names(run("nm", "-D", "--defined-only", "--extern-only", f), False)
symtab = names(run("nm", "--defined-only", f), False)
header = run("readelf", "-h", f)
interp = "Requesting program interpreter" in run("readelf", "-l", f)
dynamic = "There is no dynamic section" not in run("readelf", "-d", f)
exe_type = re.search(r"Type:\s+EXEC", header) is not None
# Allocated, read-only, non-executable PROGBITS sections: their bytes.
ro = b""
with open(f, "rb") as fh:
    for line in run("readelf", "-W", "-S", f).splitlines():
        m = re.match(r"\s*\[\s*\d+\]\s+(\S+)\s+PROGBITS\s+[0-9a-f]+\s+([0-9a-f]+)\s+([0-9a-f]+)\s+\S+\s+(\S*)\s", line)
        if not m:
            continue
        flags = m.group(4)
        if "A" not in flags or "W" in flags or "X" in flags:
            continue
        fh.seek(int(m.group(2), 16))
        ro += fh.read(int(m.group(3), 16)) + b"\0"

runtime_copies = imports & RUNTIME_COPIES
driver_copies = {n for n in imports if n.startswith("cuMemcpyHtoD")} | (imports & DRIVER_COPIES)
runtime_imports = {n for n in imports if n.startswith("cuda") or n.startswith("__cuda")}
driver_imports = {n for n in imports if re.match(r"cu[A-Z]", n)}
exported = exports if not interp else set()
static = any(n in RUNTIME_DEFS or n.startswith("__cudart") or n.startswith("_ZN6cudart")
             for n in (symtab | exports) - (exported & (RUNTIME_EXPORTS | DRIVER_EXPORTS)))
if not static and not runtime_copies and not (exported & RUNTIME_EXPORTS) and not runtime_imports:
    static = b"cudaErrorMemoryAllocation\0" in ro
dlsym = "dlsym" in imports or "dlvsym" in imports

if runtime_copies:
    print("seen: imports")
elif exported & RUNTIME_EXPORTS:
    print("provides the CUDA runtime API")
elif exported & DRIVER_EXPORTS:
    print("the CUDA driver (a stub)" if "/stubs/" in f else "the CUDA driver:")
elif driver_copies:
    print("seen: imports")
elif static and exe_type and not dynamic:
    print("not seen: statically linked")
elif not (interp or exe_type) and (static or (b"libcuda.so.1\0" in ro and "dlopen" in imports and dlsym)):
    # Every file here is NVIDIA's (under the toolkit): a library of theirs with its
    # own runtime or driver route keeps its copies out of reach (README).
    print("not seen (its own copies): an NVIDIA library")
elif static and dlsym:
    print("seen (through the driver entry points): carries the CUDA runtime")
elif static:
    print("not seen: carries the CUDA runtime")
elif b"libcuda.so.1\0" in ro and "dlopen" in imports and dlsym:
    print("seen (through the driver entry points): loads the CUDA driver")
elif runtime_imports or driver_imports:
    print("uses the CUDA")
else:
    print("no CUDA use")
PY

# agrees FILE: inspect's verdict on FILE opens with the words the truth calls for.
agrees() {
	local want got
	want=$(python3 truth.py "$1") || return 1
	got=$(CUDA_HOME=$CUDA_HOME "$V" inspect --no-deps "$1" 2>&1 | head -n 1)
	echo "want: $1: $want"
	echo "got:  $got"
	[ "${got#"$1: "}" != "$got" ] && [ "${got#"$1: $want"}" != "$got" ]
}
while read -r f; do
	check "inspect agrees with readelf/nm on ${f#"$CUDA_HOME/"}" agrees "$f"
done <elfs.txt

# advice_fits: no NVIDIA library (all of the toolkit) is told to rebuild itself,
# and every file's dependencies are walked without an error.
advice_fits() {
	local f out rc bad=0
	while read -r f; do
		out=$("$V" inspect "$f" 2>&1); rc=$?
		if grep -q 'cudart shared' <<<"$out"; then echo "$f: told to rebuild"; bad=1; fi
		if [ "$rc" -gt 1 ]; then echo "$f: exit $rc"; printf '%s\n' "$out" | tail -n 3; bad=1; fi
	done <elfs.txt
	[ "$bad" -eq 0 ]
}
check "no toolkit library is told to rebuild itself, and every dependency walk ends in a verdict" advice_fits
