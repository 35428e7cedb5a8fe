#!/usr/bin/env bash
# End-to-end tests of `vrampool inspect`: real binaries built here with nvcc
# (static runtime, stripped and not, -cudart shared) and gcc (-lcudart,
# -lcudart_static, the driver API), small files with the shapes met in the
# CUDA toolkit (tests/tool/shapes.c), libraries of the toolkit, #! scripts,
# pyenv shims, DT_RUNPATH/DT_RPATH/$ORIGIN/LD_LIBRARY_PATH resolution, FIFOs
# where files are expected, names with terminal control characters, and
# corrupt inputs (also once under valgrind, or ASan in a sanitized build).
# Also `vrampool help`, --version and unknown commands. tool_groundtruth.sh
# compares the verdicts with readelf/nm on every ELF file of the toolkit.
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
	"${CC_CUDA[@]}" -DPLAIN_USES_LIB -o app/bin/nopath "$SRC/plain.c" -Lapp/lib -lplaincopy &&
	gcc -std=c11 -shared -fPIC -DSHAPE_LRODATA -o liblrodata.so "$SRC/shapes.c" -ldl &&
	gcc -std=c11 -shared -fPIC -DSHAPE_HEADER_TEXT -o libheadertext.so "$SRC/shapes.c" &&
	mkdir -p stubs &&
	gcc -std=c11 -shared -fPIC -DSHAPE_DRIVER -Wl,-soname,libcuda.so.1 -o stubs/libcuda.so "$SRC/shapes.c" &&
	cp stubs/libcuda.so libdriverapi.so &&
	gcc -std=c11 -shared -fPIC -DSHAPE_STATIC_NODL -o libcusparse.so.99 "$SRC/shapes.c" &&
	cp libcusparse.so.99 libmine.so &&
	gcc -std=c11 -DSHAPE_MAIN -DSHAPE_STATIC_NODL -o static_nodl "$SRC/shapes.c" &&
	gcc -std=c11 -DSHAPE_MAIN -DSHAPE_DRIVER_DLOPEN -o driver_dlopen "$SRC/shapes.c" -ldl &&
	mkdir -p fifodir && gcc -std=c11 -shared -fPIC -DSHAPE_HEADER_TEXT -o fifodir/libfifo.so "$SRC/shapes.c" &&
	gcc -std=c11 -o needs_fifo "$SRC/plain.c" -Lfifodir -Wl,--no-as-needed -lfifo -Wl,--enable-new-dtags -Wl,-rpath,'$ORIGIN/fifodir' &&
	rm fifodir/libfifo.so && mkfifo fifodir/libfifo.so &&
	"$CUDA_HOME/bin/nvcc" -arch=sm_90 -shared -Xcompiler -fPIC -o libmine_static.so "$SRC/kernel.cu" &&
	cp libmine_static.so libcublasShape.so.1 &&
	cp liblrodata.so libcufftShape.so.1 &&
	cp app/lib/libplaincopy.so libcublasShared.so.1
} >"$build_log" 2>&1 || built=0
# A fully static program needs libc.a (libc6-dev); where it cannot be linked the check says so.
static_exe=0
gcc -std=c11 -static -DSHAPE_MAIN -DSHAPE_STATIC_EXE -o static_exe "$SRC/shapes.c" >>"$build_log" 2>&1 && static_exe=1
check "the test binaries build with nvcc and gcc" test "$built" -eq 1 || true
[ "$built" -eq 1 ] || cat "$build_log"

# ---- verdicts on real binaries ----------------------------------------------
# nvcc's default static runtime reaches the driver with dlopen + dlsym, then
# cuGetProcAddress: the shim interposes those entry points, so it is seen.
check "an nvcc program with the default static runtime imports dlsym (the fact the next verdict rests on)" \
	bash -c "nm -D --undefined-only k_static | grep -qw dlsym"
check "an nvcc program with the default static runtime is seen through the driver entry points" \
	expect 0 '^k_static: seen \(through the driver entry points\): carries the CUDA runtime inside.*defines cuda' \
	"$V" inspect k_static
check "a static-runtime program gets no advice to rebuild it" \
	bash -c "out=\$('$V' inspect k_static); echo \"\$out\"; ! grep -q 'cudart shared' <<<\"\$out\""
check "a stripped nvcc program with the static runtime is seen through the driver entry points" \
	expect 0 '^k_static_stripped: seen \(through the driver entry points\): carries the CUDA runtime inside.*stripped' \
	"$V" inspect k_static_stripped
check "an nvcc -cudart shared program is seen" \
	expect 0 '^k_shared: seen: imports cudaMemcpy, cudaMemcpyAsync' "$V" inspect k_shared
check "the shared runtime an nvcc -cudart shared program loads is named" \
	expect 0 'libcudart\.so\.13 => .*libcudart\.so\.13: provides the CUDA runtime API' \
	"$V" inspect k_shared
check "a gcc program linked with -lcudart is seen" \
	expect 0 '^plain_shared: seen: imports cudaMemcpy ' "$V" inspect plain_shared
check "a gcc program linked with -lcudart_static is seen through the driver entry points" \
	expect 0 'plain_static: seen \(through the driver entry points\): carries the CUDA runtime' "$V" inspect plain_static
check "a stripped gcc program with -lcudart_static is seen through the driver entry points" \
	expect 0 'plain_static_stripped: seen \(through the driver entry points\).*stripped' \
	"$V" inspect plain_static_stripped
check "a program importing cuMemcpyHtoD from libcuda.so.1 is seen" \
	expect 0 'plain_driver: seen: imports cuMemcpyHtoD_v2 from the CUDA driver' \
	"$V" inspect plain_driver
check "the overall verdict names the driver API route" \
	expect 0 '^verdict: seen: host-to-device copies made through the CUDA driver API' "$V" inspect plain_driver
check "a program that dlopens libcuda.so.1 and takes its entry points with dlsym is seen" \
	expect 0 '^driver_dlopen: seen \(through the driver entry points\): loads the CUDA driver itself' \
	"$V" inspect driver_dlopen
check "a program without CUDA gets the no-CUDA verdict" \
	expect 1 '^verdict: not seen: no CUDA use found' "$V" inspect plain_none
check "a program found through PATH is inspected" \
	expect 1 '^/.*/ls: no CUDA use' "$V" inspect ls
# ---- several files: one verdict each, the exit status the worst (issue 19) ----
# verdicts_each WANT_STATUS FILE...: one verdict line per file, in order, each
# naming its own file, and the exit status WANT_STATUS.
verdicts_each() {
	local want=$1 out rc f n=0; shift
	out=$("$V" inspect "$@" 2>&1); rc=$?
	printf '%s\n[exit %s]\n' "$out" "$rc"
	[ "$rc" -eq "$want" ] || { echo "exit status $rc, expected $want"; return 1; }
	[ "$(grep -c '^verdict: ' <<<"$out")" -eq $# ] || { echo "not one verdict per file"; return 1; }
	for f in "$@"; do
		n=$((n + 1))
		grep '^verdict: ' <<<"$out" | sed -n "${n}p" | grep -qF "$f" || { echo "verdict $n does not name $f"; return 1; }
	done
}
check "two seen files get a verdict each, exit 0" verdicts_each 0 plain_shared k_shared
check "a seen file and a file with no CUDA use: a verdict each, exit 1 (the worst)" \
	verdicts_each 1 plain_shared plain_none
check "a not-seen file first does not hide the seen one after it" verdicts_each 1 plain_none plain_shared
check "three files, the middle one seen: three verdicts, exit 1" verdicts_each 1 plain_none plain_shared static_nodl
check "a library two programs load counts for each of them" verdicts_each 0 app/bin/runpath app/bin/rpath
check "an unreadable file among good ones: their verdicts, exit 2 (the worst)" \
	bash -c "out=\$('$V' inspect plain_none k_shared ./missing.so 2>&1); rc=\$?; echo \"\$out\"; [ \$rc -eq 2 ] && \
		[ \$(grep -c '^verdict: ' <<<\"\$out\") -eq 2 ] && grep -q 'missing\.so: No such file' <<<\"\$out\""
check "--no-deps inspects the named file only" \
	bash -c "out=\$('$V' inspect --no-deps k_shared); ! grep -q '=>' <<<\"\$out\""

# ---- the shapes of the toolkit's files, built small --------------------------
check "a libcuda.so.1 string kept in .lrodata is found (the shape of libcufft)" \
	expect 0 '^liblrodata\.so: seen \(through the driver entry points\): loads the CUDA driver' \
	"$V" inspect --no-deps liblrodata.so
check "the .lrodata shape really keeps its string in .lrodata" \
	bash -c "readelf -W -p .lrodata liblrodata.so | grep -q 'libcuda.so.1'"
check "CUDA header text is not a runtime (the shape of libnvrtc-builtins)" \
	expect 1 '^libheadertext\.so: no CUDA use' "$V" inspect --no-deps libheadertext.so
check "a library defining the driver API in stubs/ is the CUDA driver (a stub)" \
	expect 1 '^stubs/libcuda\.so: the CUDA driver \(a stub\)' "$V" inspect --no-deps stubs/libcuda.so
check "a library defining the driver API elsewhere is the CUDA driver" \
	expect 1 '^verdict: not seen: libdriverapi\.so is the CUDA driver; inspect the program' \
	"$V" inspect --no-deps libdriverapi.so
# A library with nvcc's static runtime: yours is seen through the driver entry
# points; one of NVIDIA's (by name) keeps its own copies out of reach; one of
# NVIDIA's that links the shared runtime is seen.
check "your library with nvcc's static runtime is seen through the driver entry points" \
	expect 0 '^libmine_static\.so: seen \(through the driver entry points\): carries the CUDA runtime' \
	"$V" inspect --no-deps libmine_static.so
check "an NVIDIA library with a static runtime (the shape of cuBLAS): its own copies are not seen" \
	expect 1 '^libcublasShape\.so\.1: not seen \(its own copies\): an NVIDIA library that carries its own CUDA runtime' \
	"$V" inspect --no-deps libcublasShape.so.1
check "an NVIDIA library that loads the driver itself (the shape of cuFFT): its own copies are not seen" \
	expect 1 '^libcufftShape\.so\.1: not seen \(its own copies\): an NVIDIA library that loads the CUDA driver itself' \
	"$V" inspect --no-deps libcufftShape.so.1
check "an NVIDIA library that links the shared runtime is seen" \
	expect 0 '^libcublasShared\.so\.1: seen: imports cudaMemcpyAsync from the shared CUDA runtime' \
	"$V" inspect --no-deps libcublasShared.so.1
check "an NVIDIA library's own route gets no advice to rebuild it" \
	bash -c "out=\$('$V' inspect --no-deps libcublasShape.so.1); echo \"\$out\"; ! grep -q 'cudart shared' <<<\"\$out\" && grep -q 'is a vendor library' <<<\"\$out\""
check "a runtime inside a program with no dlsym import is not seen" \
	expect 1 '^static_nodl: not seen: carries the CUDA runtime inside itself .*imports no dlsym' \
	"$V" inspect static_nodl
check "your program with a runtime out of reach gets the advice to rebuild it" \
	expect 1 'advice: if static_nodl is your program, rebuild it with `nvcc -cudart shared`' \
	"$V" inspect static_nodl
check "your library with a runtime out of reach gets the advice for a library" \
	expect 1 'advice: if libmine\.so is your library, rebuild it' "$V" inspect --no-deps libmine.so
vendor_advice() {
	local out
	out=$("$V" inspect --no-deps libcusparse.so.99)
	printf '%s\n' "$out"
	grep -q 'is a vendor library' <<<"$out" && ! grep -q 'cudart shared' <<<"$out"
}
check "an NVIDIA library never gets the advice to rebuild it" vendor_advice
if [ "$static_exe" -eq 1 ]; then
	check "a statically linked program is not seen: no dynamic linker" \
		expect 1 'static_exe: not seen: statically linked' "$V" inspect static_exe
	check "a statically linked program gets the advice to link it dynamically" \
		expect 1 '^advice: link static_exe dynamically' "$V" inspect static_exe
else
	check "a statically linked program can be built here (libc.a)" false
fi
same_file_once() {
	local out
	ln -sf app/lib/libplaincopy.so alias.so
	out=$("$V" inspect --no-deps app/lib/libplaincopy.so alias.so)
	printf '%s\n' "$out"
	[ "$(grep -c '^[^ ]*: seen: imports' <<<"$out")" -eq 1 ] &&
		grep -q '^alias\.so: the same file as app/lib/libplaincopy\.so (inspected above)' <<<"$out"
}
check "two names of one file (a symlink) are inspected once" same_file_once

# ---- files that are not regular: never opened for reading -------------------
mkfifo a_fifo
check "a FIFO is refused at once, not read (no hang)" \
	expect 2 'a_fifo: a FIFO \(named pipe\), not a program or library' timeout 20 "$V" inspect a_fifo
check "a FIFO where a DT_NEEDED library should be is reported, not read" \
	expect 1 'libfifo\.so => .*fifodir/libfifo\.so: cannot inspect: a FIFO' timeout 20 "$V" inspect needs_fifo
check "a character device is refused" expect 2 '/dev/null: a character device' timeout 20 "$V" inspect /dev/null

# ---- names that carry terminal control characters -----------------------------
evil=$'evil\033]0;pwned\007\033[2J'
cp plain_none "$evil"
no_raw_controls() {
	local out
	out=$("$V" inspect "$evil" "$evil.missing" 2>&1)
	printf '%s\n' "$out" | cat -v
	! grep -q $'\033' <<<"$out" && ! grep -q $'\007' <<<"$out" && grep -q 'evil\\e\]0;pwned\\x07' <<<"$out"
}
check "a file name with terminal control characters is printed escaped" no_raw_controls

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
# cuBLAS imports nothing from libcudart: it carries its own runtime, which
# reaches the driver itself, over NVIDIA's private interfaces. The README
# ("What the shim does not touch") says the copies it makes inside itself
# are not seen; inspect says the same (diagnosis 4 of issue 19).
CUBLAS=$CUDA_HOME/lib64/libcublas.so.13
if [ -f "$CUBLAS" ]; then
	check "libcublas imports no cuda* symbol but imports dlsym (the facts the next verdict rests on)" \
		bash -c "! nm -D --undefined-only '$CUBLAS' | grep -q ' cuda' && nm -D --undefined-only '$CUBLAS' | grep -qw dlsym"
	check "libcublas: its own copies are not seen, as the README says (exit 1)" \
		expect 1 'libcublas\.so\.13: not seen \(its own copies\): an NVIDIA library that carries its own CUDA runtime' \
		"$V" inspect "$CUBLAS"
	check "libcublas's verdict is not seen, never 'will be seen'" \
		bash -c "out=\$('$V' inspect '$CUBLAS'); echo \"\$out\"; \
			grep -q '^verdict: not seen: .*libcublas\.so\.13 is an NVIDIA library' <<<\"\$out\" && ! grep -q 'will be seen' <<<\"\$out\""
	check "the README says what inspect says: cuBLAS internals are not touched" \
		grep -q 'libraries that carry their own runtime.*' "$ROOT/README.md"
	check "libcublas's dependency libcublasLt is followed and also carries its own runtime" \
		expect 1 'libcublasLt\.so\.13 => .*: not seen \(its own copies\): an NVIDIA library' \
		"$V" inspect "$CUBLAS"
	check "libcublas.so (a symlink) gets the same verdict" \
		expect 1 '^verdict: not seen: .*libcublas\.so is an NVIDIA library' "$V" inspect "$CUDA_HOME/lib64/libcublas.so"
	# A program of yours that links the shared runtime and cuBLAS: seen, and the note
	# names what is not.
	if "${CC_CUDA[@]}" -DPLAIN_RUNTIME -o with_cublas "$SRC/plain.c" -L"$CUDA_HOME/lib64" \
		-Wl,--no-as-needed -lcudart -lcublas -Wl,-rpath,"$CUDA_HOME/lib64" >>"$build_log" 2>&1; then
		check "a program with the shared runtime and cuBLAS is seen, with a note that cuBLAS's own copies are not" \
			expect 0 'note: copies made inside .*libcublas(Lt)?\.so\.13.* are not seen: an NVIDIA library' \
			"$V" inspect with_cublas
	else
		check "a program linked with -lcudart -lcublas builds" false
	fi
else
	echo "SKIP: libcublas: $CUBLAS is not installed here (the verdicts on the real cuBLAS are not checked)"
fi
check "libcudart itself is reported as the runtime, not as a user of it" \
	expect 1 'libcudart\.so\.13: provides the CUDA runtime API' "$V" inspect "$CUDA_HOME/lib64/libcudart.so.13"
if [ -f "$CUDA_HOME/lib64/libcufft.so" ]; then
	check "libcufft loads the driver itself (libcuda.so.1 in .lrodata): its own copies are not seen" \
		expect 1 'libcufft\.so: not seen \(its own copies\): an NVIDIA library that loads the CUDA driver itself' \
		"$V" inspect --no-deps "$CUDA_HOME/lib64/libcufft.so"
fi
if [ -f "$CUDA_HOME/lib64/libnvrtc-builtins.so" ]; then
	check "libnvrtc-builtins embeds header text, not the runtime" \
		expect 1 'libnvrtc-builtins\.so: no CUDA use' "$V" inspect --no-deps "$CUDA_HOME/lib64/libnvrtc-builtins.so"
fi
if [ -f "$CUDA_HOME/lib64/stubs/libcuda.so" ]; then
	check "stubs/libcuda.so is the CUDA driver (a stub)" \
		expect 1 'stubs/libcuda\.so: the CUDA driver \(a stub\)' "$V" inspect --no-deps "$CUDA_HOME/lib64/stubs/libcuda.so"
fi
[ -f "$CUBLAS" ] && check "symlinked names of one toolkit library are inspected once" \
	bash -c "out=\$('$V' inspect --no-deps '$CUDA_HOME/lib64/libcublas.so' '$CUBLAS'); echo \"\$out\"; \
		[ \$(grep -c 'not seen (its own' <<<\"\$out\") -eq 1 ] && grep -q 'the same file as' <<<\"\$out\""

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
printf '#!/bin/sh\nexec ./k_shared "$@"\n' >wrapper.sh
chmod +x wrapper.sh
check "a shell script is said to be one, not inspected as the shell" \
	expect 2 'wrapper\.sh: a shell script \(run by /bin/sh\).*inspect the program the script starts' \
	"$V" inspect wrapper.sh
# A pyenv installation: the shim is a bash script; the interpreter lives in versions/.
mkdir -p pyenv/shims pyenv/versions/3.12.1/bin
cat >pyenv/shims/python3 <<'SHIM'
#!/usr/bin/env bash
set -e
[ -n "$PYENV_DEBUG" ] && set -x

program="${0##*/}"

export PYENV_ROOT="/nowhere/.pyenv"
exec "/nowhere/.pyenv/libexec/pyenv" exec "$program" "$@"
SHIM
chmod +x pyenv/shims/python3
cp k_shared pyenv/versions/3.12.1/bin/python3
echo 3.12.1 >pyenv/version
check "python3 under pyenv is the interpreter pyenv runs, not the shim's bash" \
	expect 0 'python3: a pyenv shim that runs .*/pyenv/versions/3\.12\.1/bin/python3 \(version 3\.12\.1 from .*pyenv/version\)' \
	env PATH="$TMP/pyenv/shims:$PATH" PYENV_ROOT="$TMP/pyenv" PYENV_DIR=/ "$V" inspect python3
check "a pyenv version that is not installed is said plainly" \
	expect 2 'a pyenv shim for python3: version 3\.0\.0 .* run `pyenv which python3`' \
	env PATH="$TMP/pyenv/shims:$PATH" PYENV_ROOT="$TMP/pyenv" PYENV_VERSION=3.0.0 "$V" inspect python3

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
BAD_INPUTS=(trunc_headers trunc_tail trunc_ehdr random.bin empty a_directory ./missing.so elf32
	archive.a lost.py a_fifo needs_fifo k_static_stripped k_shared)
if [ -n "$TOOL_SANITIZED" ]; then
	# valgrind cannot run an ASan binary: the sanitizers check this build instead.
	check "the sanitizers find no memory error in inspect on corrupt and real inputs" \
		expect 2 'truncated ELF' "$V" inspect "${BAD_INPUTS[@]}"
elif command -v valgrind >/dev/null; then
	check "valgrind finds no memory error in inspect on corrupt and real inputs" \
		expect 2 'truncated ELF' valgrind -q --error-exitcode=99 --leak-check=full \
		"$V" inspect "${BAD_INPUTS[@]}"
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
check "vrampool --version prints the version" expect 0 '^vrampool [0-9]+\.[0-9]+' "$V" --version
check "vrampool version prints the version" expect 0 '^vrampool [0-9]+\.[0-9]+' "$V" version
check "vrampool help --help prints the overview" expect 0 '^usage: vrampool COMMAND' "$V" help --help
check "an unknown command is printed escaped" \
	bash -c "out=\$('$V' \$'fr\\033[2Job' 2>&1); ! grep -q \$'\\033' <<<\"\$out\" && grep -q 'fr.e\\[2Job' <<<\"\$out\""

# ---- bad options: one line on stderr, exit 2, no usage text (issue 19) --------
# one_line_error REGEX ARGS...: vrampool ARGS exits 2, prints nothing on
# stdout and exactly one line, matching REGEX, on stderr.
one_line_error() {
	local re=$1 out err rc; shift
	out=$("$V" "$@" 2>"$TMP/one_line.err"); rc=$?
	err=$(cat "$TMP/one_line.err")
	printf 'exit %s\nstdout: %s\nstderr:\n%s\n' "$rc" "$out" "$err"
	[ "$rc" -eq 2 ] && [ -z "$out" ] && [ "$(wc -l <"$TMP/one_line.err")" -eq 1 ] &&
		grep -Eq -- "$re" <<<"$err"
}
check "vrampool run --bogus is one line naming the option and the help" \
	one_line_error "^vrampool run: unknown option '--bogus' \(vrampool help run\)$" run --bogus -- true
check "vrampool report --bogus is one line" \
	one_line_error "^vrampool report: unknown option '--bogus' \(vrampool help report\)$" report --bogus x.json
check "vrampool inspect --bogus is one line" \
	one_line_error "^vrampool inspect: unknown option '--bogus' \(vrampool help inspect\)$" inspect --bogus k_shared
check "vrampool --bogus is one line" \
	one_line_error "^vrampool: unknown option '--bogus' \(vrampool help\)$" --bogus
check "an unknown command is one line" \
	one_line_error "^vrampool: unknown command 'frobnicate' \(vrampool help\)$" frobnicate
check "an unknown short option is one line" \
	one_line_error "^vrampool run: unknown option '-x' \(vrampool help run\)$" run -x -- true
check "an option missing its value is one line" \
	one_line_error "^vrampool run: --layout needs a value \(vrampool help run\)$" run --layout
check "a short option missing its value is named by its long name" \
	one_line_error "^vrampool run: --budget needs a value \(vrampool help run\)$" run -b
check "--layout '' is an error, not no layout" \
	one_line_error "^vrampool run: --layout needs a value \(vrampool help run\)$" run --layout '' -- true
check "-l '' is an error too" \
	one_line_error "^vrampool run: --layout needs a value" run -l '' -- true
check "--stats '' is an error" \
	one_line_error "^vrampool run: --stats needs a value" run --stats= -- true
check "report --plot '' is an error" \
	one_line_error "^vrampool report: --plot needs a value \(vrampool help report\)$" report --plot '' x.json
check "a value given to an option that takes none is one line" \
	one_line_error "^vrampool run: option '--off' takes no value \(vrampool help run\)$" run --off=1 -- true
check "an unknown option with a value is named without its value" \
	one_line_error "^vrampool inspect: unknown option '--depth' \(vrampool help inspect\)$" inspect --depth=3 k_shared
check "inspect with no file is one line" \
	one_line_error "^vrampool inspect: no file named \(vrampool help inspect\)$" inspect
check "an unknown option with control characters is printed escaped" \
	one_line_error 'unknown option .--x\\e\[2J' run $'--x\033[2J' -- true

# ---- short options: each one run.c accepts is documented (issue 19) -----------
# short_options_documented: every letter of run's getopt string (but -h, which
# every command takes) appears as "-X, --LONG" in `vrampool help run`, beside
# its long name in docs/vrampool.1.md's option table, and in the README.
short_options_documented() {
	local letters x long bad=0 usage
	letters=$(grep -o 'getopt_long(argc, argv, "[^"]*"' "$ROOT/analysis/run.c" | sed 's/.*"\(.*\)"/\1/' | tr -d '+:h')
	usage=$("$V" help run)
	echo "short options of run: $letters"
	[ -n "$letters" ] || return 1
	for x in $(grep -o . <<<"$letters"); do
		long=$(grep -o "{ \"[a-z-]*\", [a-z_]*, NULL, '$x' }" "$ROOT/analysis/run.c" | sed 's/{ "\([a-z-]*\)".*/\1/')
		echo "-$x: --$long"
		grep -q -- "-$x, --$long" <<<"$usage" || { echo "usage lacks -$x, --$long"; bad=1; }
		grep -q -- "\`-$x[ \`].*\`--$long" "$ROOT/docs/vrampool.1.md" || { echo "docs/vrampool.1.md lacks -$x"; bad=1; }
		grep -q -- "\`-$x\`" "$ROOT/README.md" || { echo "README.md lacks -$x"; bad=1; }
	done
	[ "$bad" -eq 0 ]
}
check "run's short options are in its usage, the manual and the README" short_options_documented

