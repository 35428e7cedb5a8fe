#!/usr/bin/env bash
# End-to-end tests of `vrampool inspect`: real binaries built here with nvcc
# (static runtime, stripped and not, -cudart shared) and gcc (-lcudart,
# -lcudart_static, the driver API), libraries of the CUDA toolkit, #! scripts,
# DT_RUNPATH/DT_RPATH/$ORIGIN/LD_LIBRARY_PATH resolution, and corrupt inputs
# (also once under valgrind). Also `vrampool help` and unknown commands.
source "$(dirname "$0")/lib.sh"
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
SRC=$ROOT/tests/tool
V=$VRAMPOOL_BIN
CC_CUDA=(gcc -std=c11 -I"$CUDA_HOME/include")

# ---- build the test binaries once ------------------------------------------
cd "$TMP" || exit 1
build_log=$TMP/build.log
built=1
{
	"$CUDA_HOME/bin/nvcc" -arch=sm_90 -c -o kernel.o "$SRC/kernel.cu" &&
	"$CUDA_HOME/bin/nvcc" -arch=sm_90 -o k_static kernel.o &&
	"$CUDA_HOME/bin/nvcc" -arch=sm_90 -cudart shared -o k_shared kernel.o &&
	strip -o k_static_stripped k_static &&
	"${CC_CUDA[@]}" -DPLAIN_RUNTIME -o plain_shared "$SRC/plain.c" -L"$CUDA_HOME/lib64" -lcudart &&
	"${CC_CUDA[@]}" -DPLAIN_RUNTIME -o plain_static "$SRC/plain.c" -L"$CUDA_HOME/lib64" \
		-lcudart_static -ldl -lpthread -lrt &&
	strip -o plain_static_stripped plain_static &&
	"${CC_CUDA[@]}" -DPLAIN_DRIVER -o plain_driver "$SRC/plain.c" -L"$CUDA_HOME/lib64/stubs" -lcuda &&
	"${CC_CUDA[@]}" -o plain_none "$SRC/plain.c" &&
	mkdir -p app/lib app/bin &&
	"${CC_CUDA[@]}" -DPLAIN_LIB -shared -fPIC -o app/lib/libplaincopy.so "$SRC/plain.c" \
		-L"$CUDA_HOME/lib64" -lcudart &&
	"${CC_CUDA[@]}" -DPLAIN_USES_LIB -o app/bin/runpath "$SRC/plain.c" -Lapp/lib -lplaincopy \
		-Wl,--enable-new-dtags -Wl,-rpath,'$ORIGIN/../lib' &&
	"${CC_CUDA[@]}" -DPLAIN_USES_LIB -o app/bin/rpath "$SRC/plain.c" -Lapp/lib -lplaincopy \
		-Wl,--disable-new-dtags -Wl,-rpath,'${ORIGIN}/../lib' &&
	"${CC_CUDA[@]}" -DPLAIN_USES_LIB -o app/bin/nopath "$SRC/plain.c" -Lapp/lib -lplaincopy
} >"$build_log" 2>&1 || built=0
check "the test binaries build with nvcc and gcc" test "$built" -eq 1 || true
[ "$built" -eq 1 ] || cat "$build_log"

# ---- verdicts on real binaries ----------------------------------------------
check "an nvcc program with the default static runtime is not seen" \
	expect 1 '^k_static: not seen: carries the CUDA runtime inside.*defines cuda' "$V" inspect k_static
check "the advice for a static runtime is to rebuild with -cudart shared" \
	expect 1 'nvcc -cudart shared' "$V" inspect k_static
check "a stripped nvcc program with the static runtime is still not seen" \
	expect 1 '^k_static_stripped: not seen: carries the CUDA runtime inside.*stripped' \
	"$V" inspect k_static_stripped
check "an nvcc -cudart shared program is seen" \
	expect 0 '^k_shared: seen: imports cudaMemcpy, cudaMemcpyAsync' "$V" inspect k_shared
check "the shared runtime an nvcc -cudart shared program loads is named" \
	expect 0 'libcudart\.so\.13 => .*libcudart\.so\.13: provides the CUDA runtime API' \
	"$V" inspect k_shared
check "a gcc program linked with -lcudart is seen" \
	expect 0 '^plain_shared: seen: imports cudaMemcpy ' "$V" inspect plain_shared
check "a gcc program linked with -lcudart_static is not seen" \
	expect 1 'plain_static: not seen: carries the CUDA runtime' "$V" inspect plain_static
check "a stripped gcc program with -lcudart_static is not seen" \
	expect 1 'plain_static_stripped: not seen: carries the CUDA runtime.*stripped' \
	"$V" inspect plain_static_stripped
check "a driver-API program is not seen by this version" \
	expect 1 'plain_driver: not seen by this version: calls the CUDA driver API directly \(cuMemcpyHtoD_v2\)' \
	"$V" inspect plain_driver
check "a program without CUDA gets the no-CUDA verdict" \
	expect 1 '^verdict: not seen: no CUDA use found' "$V" inspect plain_none
check "a program found through PATH is inspected" \
	expect 1 '^/.*/ls: no CUDA use' "$V" inspect ls
check "one seen file in a set of libraries makes the set seen" \
	expect 0 '^verdict: seen: .*plain_shared' "$V" inspect plain_none plain_shared k_static
check "--no-deps inspects the named file only" \
	bash -c "out=\$('$V' inspect --no-deps k_shared); ! grep -q '=>' <<<\"\$out\""

# ---- dependency resolution like ld.so ----------------------------------------
check "a library found through DT_RUNPATH \$ORIGIN makes the program seen" \
	expect 0 "libplaincopy\\.so => $TMP/app/bin/\\.\\./lib/libplaincopy\\.so: seen: imports cudaMemcpyAsync" \
	"$V" inspect app/bin/runpath
check "a library found through DT_RPATH \${ORIGIN} makes the program seen" \
	expect 0 'libplaincopy\.so => .*/app/bin/\.\./lib/libplaincopy\.so: seen' "$V" inspect app/bin/rpath
check "a library that cannot be found is reported as not found" \
	expect 1 'libplaincopy\.so: not found' env LD_LIBRARY_PATH= "$V" inspect app/bin/nopath
check "LD_LIBRARY_PATH is searched for needed libraries" \
	expect 0 'libplaincopy\.so => .*app/lib/libplaincopy\.so: seen' \
	env LD_LIBRARY_PATH="$TMP/app/lib" "$V" inspect app/bin/nopath
check "the library inspect resolves is the one the dynamic linker loads" \
	bash -c "want=\$(ldd app/bin/runpath | awk '/libplaincopy/ {print \$3}'); \
		got=\$('$V' inspect app/bin/runpath | sed -n 's/^  libplaincopy.so => \\(.*\\): seen.*/\\1/p'); \
		echo \"ldd \$want inspect \$got\"; [ \"\$(realpath \"\$want\")\" = \"\$(realpath \"\$got\")\" ]"

# ---- libraries of the CUDA toolkit -------------------------------------------
# cuBLAS imports nothing from libcudart: it carries its own runtime (its
# internal copies, e.g. cublasSetMatrix, are invisible to a preload).
CUBLAS=$CUDA_HOME/lib64/libcublas.so.13
check "libcublas imports no cuda* symbol (the fact the next verdict rests on)" \
	bash -c "! nm -D --undefined-only '$CUBLAS' | grep -q ' cuda'"
check "libcublas carries its own CUDA runtime and is not seen" \
	expect 1 'libcublas\.so\.13: not seen: carries the CUDA runtime inside' "$V" inspect "$CUBLAS"
check "libcublas's dependency libcublasLt is followed and also carries the runtime" \
	expect 1 'libcublasLt\.so\.13 => .*: not seen: carries the CUDA runtime' "$V" inspect "$CUBLAS"
check "libcudart itself is reported as the runtime, not as a user of it" \
	expect 1 'libcudart\.so\.13: provides the CUDA runtime API' "$V" inspect "$CUDA_HOME/lib64/libcudart.so.13"

# ---- scripts -----------------------------------------------------------------
printf '#!/usr/bin/env python3\nimport torch\n' >train.py
printf '#!%s/k_shared\n' "$TMP" >through_shared.sh
printf '#!/nonexistent/python\n' >lost.py
chmod +x train.py through_shared.sh lost.py
check "a python script's interpreter is found through env and inspected" \
	expect 1 '^train\.py: a script run by .*python3' "$V" inspect train.py
check "a python interpreter without CUDA gets the advice to inspect its extension modules" \
	expect 1 'torch/lib/\*\.so' "$V" inspect train.py
check "a script whose interpreter is seen is seen" \
	expect 0 '^verdict: seen' "$V" inspect through_shared.sh
check "a script whose interpreter does not exist is an error" \
	expect 2 '/nonexistent/python: No such file or directory' "$V" inspect lost.py

# ---- bad input: one clear message, exit 2, never a crash ---------------------
head -c 3000 k_shared >trunc_headers
size=$(stat -c %s k_shared)
head -c $((size - 512)) k_shared >trunc_tail
head -c 40 k_shared >trunc_ehdr
head -c 8192 /dev/urandom >random.bin
: >empty
mkdir -p a_directory
cp k_shared elf32 && printf '\001' | dd of=elf32 bs=1 seek=4 conv=notrunc 2>/dev/null
ar rc archive.a kernel.o
check "a truncated ELF file (section headers cut off) is exit 2 with a message" \
	expect 2 'trunc_headers: truncated ELF' "$V" inspect trunc_headers
check "an ELF file cut short at the end is exit 2 with a message" \
	expect 2 'trunc_tail: truncated ELF' "$V" inspect trunc_tail
check "an ELF file cut inside its header is exit 2 with a message" \
	expect 2 'trunc_ehdr: .*ELF' "$V" inspect trunc_ehdr
check "random bytes are exit 2: not an ELF object" \
	expect 2 'random\.bin: not an ELF object' "$V" inspect random.bin
check "an empty file is exit 2" expect 2 'empty: empty file' "$V" inspect empty
check "a directory is exit 2" expect 2 'a_directory: is a directory' "$V" inspect a_directory
check "a missing file is exit 2" \
	expect 2 'missing\.so: No such file or directory' "$V" inspect ./missing.so
check "a 32-bit ELF object is exit 2 with a message" \
	expect 2 'elf32: a 32-bit ELF object' "$V" inspect elf32
check "a static archive is exit 2 with advice" \
	expect 2 'archive\.a: an ar archive' "$V" inspect archive.a
check "an error in one file among good ones still prints their verdicts and exits 2" \
	expect 2 '^verdict: seen' "$V" inspect k_shared empty
check "no file named is a usage error" expect 2 'no file named' "$V" inspect
# Mutated copies of a real program: every answer is a verdict or an error.
fuzz() {
	local i rc
	for i in $(seq 1 40); do
		python3 - k_shared fuzz.bin "$i" <<'PY'
import random, sys
b = bytearray(open(sys.argv[1], 'rb').read())
random.seed(int(sys.argv[3]))
for _ in range(random.choice([1, 8, 64])):
    o = random.randrange(len(b)) if random.random() < 0.5 else random.randrange(min(len(b), 8192))
    b[o] = random.randrange(256)
open(sys.argv[2], 'wb').write(b)
PY
		"$V" inspect --no-deps fuzz.bin >/dev/null 2>&1; rc=$?
		if [ "$rc" -gt 2 ]; then echo "mutation $i: exit $rc"; return 1; fi
	done
}
check "40 randomly mutated ELF files never crash inspect" fuzz
if [ -n "$TOOL_SANITIZED" ]; then
	:       # valgrind cannot run an ASan binary; ASan checks this build instead
elif command -v valgrind >/dev/null; then
	check "valgrind finds no memory error in inspect on corrupt and real inputs" \
		expect 2 'truncated ELF' valgrind -q --error-exitcode=99 --leak-check=full \
		"$V" inspect trunc_headers trunc_tail trunc_ehdr random.bin empty a_directory \
		./missing.so elf32 archive.a lost.py k_static_stripped k_shared
else
	check "valgrind is installed (scripts/deps.sh installs it)" false
fi

# ---- the command's help --------------------------------------------------------
check "vrampool help lists the three commands" \
	expect 0 'run .*inspect .*report' bash -c "'$V' help | tr '\n' ' '"
check "vrampool inspect --help prints the usage" expect 0 '^usage: vrampool inspect' "$V" inspect --help
check "vrampool help run prints the usage of run" expect 0 '^usage: vrampool run' "$V" help run
check "vrampool run --help prints the usage of run" expect 0 '^usage: vrampool run' "$V" run --help
check "vrampool report --help prints the usage of report" expect 0 '^usage: vrampool report' "$V" report --help
check "an unknown command exits 2" expect 2 "unknown command 'frobnicate'" "$V" frobnicate
check "no command at all exits 2 with the overview" expect 2 '^usage: vrampool COMMAND' "$V"
