# vrampool: one flat Makefile (STYLE.md 13).
#
#   make                 build/libvrampool.so, build/vrampool, test equipment
#   make test            install missing deps, build, run every test this machine can run
#   make demo            the trainer with and without the shim, then the A/B report
#   make bench           benchmarks (ratios against baselines measured in the same run)
#   make install PREFIX=/usr/local     command, library, man page (man vrampool)
#   make uninstall PREFIX=/usr/local   removes what install put there
#   make ptx             refresh the committed shim/device/gather.ptx with nvcc
#   make clean; make SANITIZE=address,undefined test   the vrampool command sanitized too
#
# The unit tests (the shim's modules linked directly) are always built with
# AddressSanitizer and UBSan (UNIT_SANITIZE); the preloaded library is not,
# since a sanitized preload needs its runtime loaded first by every host
# program. Objects do not track flags: make clean when SANITIZE changes.

CUDA_HOME ?= /usr/local/cuda
PREFIX    ?= /usr/local
CC        ?= cc
B         := build
VERSION   := 0.2.0

# Plain `make` builds everything a user reads about, not the first rule below.
.DEFAULT_GOAL := all

WARN   := -std=c11 -Wall -Wextra -Wpedantic -Wstrict-prototypes \
          -Wmissing-prototypes -Wvla -Werror
OPT    ?= -O2 -g
CUDAINC := -isystem $(CUDA_HOME)/include
CUDALIB := -L$(CUDA_HOME)/lib64 -Wl,-rpath-link,$(CUDA_HOME)/lib64

ifdef SANITIZE
SANFLAGS := -fsanitize=$(SANITIZE) -fno-omit-frame-pointer
endif
UNIT_SANITIZE ?= address,undefined
UNITSAN := -fsanitize=$(UNIT_SANITIZE) -fno-omit-frame-pointer -fno-sanitize-recover=undefined

# XXHASH_DIR: a directory holding xxhash.h, for machines without libxxhash-dev.
CFLAGS_COMMON := $(WARN) $(OPT) -D_GNU_SOURCE -pthread $(if $(XXHASH_DIR),-isystem $(XXHASH_DIR))

# ---- the preloaded library -------------------------------------------------
# shim/<layer>/*.c, one folder a layer (docs/architecture.md): intercept,
# report, pool, device, core. Files include "<layer>/name.h" from -Ishim.
SHIM_LAYERS := intercept report pool device core
SHIM_SRC  := $(foreach l,$(SHIM_LAYERS),$(wildcard shim/$(l)/*.c))
SHIM_HDR  := $(wildcard shim/*/*.h)
# Everything below the interception layer: what unit tests and benchmarks link.
CORE_SRC  := $(filter-out shim/intercept/%,$(SHIM_SRC))
SHIM_OBJ  := $(SHIM_SRC:shim/%.c=$(B)/shim/%.o)
SHIM_CFLAGS := $(CFLAGS_COMMON) $(CUDAINC) -Ishim -fPIC -fvisibility=hidden

$(B)/shim/%.o: shim/%.c $(SHIM_HDR)
	@mkdir -p $(@D)
	$(CC) $(SHIM_CFLAGS) -c -o $@ $<

# ---- the gather kernel: PTX made at build time, embedded in the library -----
# build/shim/gather.ptx is made from shim/device/gather.cu by $(NVCC) when it is
# there, else copied from the committed shim/device/gather.ptx (make says which).
# nvcc writes the PTX ISA version of its own release (9.0 for CUDA 13.0),
# which a driver older than that release refuses; the kernel needs nothing
# newer than ISA 8.1 (its 16 KiB parameter; every instruction it uses is
# far older), so the version is lowered to GATHER_PTX_VERSION when ptxas
# accepts the lowered text for sm_75, and left as written otherwise.
# shim/device/gather_ptx.S embeds the result, NUL-terminated, as a hidden symbol.
NVCC  ?= $(CUDA_HOME)/bin/nvcc
PTXAS ?= $(CUDA_HOME)/bin/ptxas
GATHER_PTX_VERSION := 8.1
GATHER_OBJ := $(B)/shim/gather_ptx.o

ifneq ($(wildcard $(NVCC)),)
$(B)/shim/gather.ptx: shim/device/gather.cu shim/device/device.h | $(B)/shim
	$(NVCC) -ptx -arch=compute_75 -Ishim -o $@.nvcc shim/device/gather.cu
	@v=$$(sed -n 's/^\.version //p' $@.nvcc); \
	sed 's/^\.version .*/.version $(GATHER_PTX_VERSION)/' $@.nvcc >$@.low; \
	if awk "BEGIN { exit !($$v > $(GATHER_PTX_VERSION)) }" && \
	   $(PTXAS) -arch=sm_75 -o /dev/null $@.low 2>/dev/null; then \
		{ echo "// vrampool: made from shim/device/gather.cu by nvcc; .version lowered from $$v"; cat $@.low; } >$@; \
	else \
		{ echo "// vrampool: made from shim/device/gather.cu by nvcc; .version $$v as written"; cat $@.nvcc; } >$@; \
	fi; \
	rm -f $@.nvcc $@.low; \
	echo "gather.ptx: made by $(NVCC), $$(sed -n 's/^\.version //p' $@ | sed 's/^/.version /')"; \
	cmp -s $@ shim/device/gather.ptx || echo "gather.ptx: differs from the committed shim/device/gather.ptx (make ptx refreshes it)"
else
$(B)/shim/gather.ptx: shim/device/gather.ptx | $(B)/shim
	@echo "gather.ptx: no nvcc at $(NVCC); embedding the committed copy shim/device/gather.ptx"
	cp shim/device/gather.ptx $@
endif

$(GATHER_OBJ): shim/device/gather_ptx.S $(B)/shim/gather.ptx | $(B)/shim
	$(CC) -c -Wa,-I$(B)/shim -o $@ shim/device/gather_ptx.S

ptx: $(B)/shim/gather.ptx
	@test -x $(NVCC) || { echo "make ptx needs nvcc ($(NVCC))"; exit 1; }
	cp $(B)/shim/gather.ptx shim/device/gather.ptx

# The version script is the entry table (shim/intercept/entries.h) expanded
# by the preprocessor: one list names what is interposed and exported.
$(B)/libvrampool.map: shim/intercept/libvrampool.map.in shim/intercept/entries.h | $(B)
	$(CC) -E -P -x c -Ishim -o $@ shim/intercept/libvrampool.map.in

$(B)/libvrampool.so: $(SHIM_OBJ) $(GATHER_OBJ) $(B)/libvrampool.map
	$(CC) -shared -fPIC -o $@ $(SHIM_OBJ) $(GATHER_OBJ) -Wl,--version-script=$(B)/libvrampool.map \
		-Wl,-z,defs -Wl,-soname,libvrampool.so -pthread -ldl

# ---- the vrampool command ---------------------------------------------------
# It links the library's own parser of the VRAMPOOL_* variables (config,
# layout, log), compiled here separately, so `vrampool run` rejects what the
# library would; libelf (inspect), jansson (dumps), cairo and fontconfig
# (report --plot).
TOOL_SRC := $(wildcard analysis/*.c)
TOOL_OBJ := $(TOOL_SRC:analysis/%.c=$(B)/analysis/%.o)
TOOL_SHIM := core/config core/layout core/size core/log
TOOL_SHIM_OBJ := $(TOOL_SHIM:%=$(B)/analysis/shim/%.o)
CAIRO_CFLAGS := $(shell pkg-config --cflags cairo fontconfig 2>/dev/null || echo -I/usr/include/cairo)
TOOL_CFLAGS := $(CFLAGS_COMMON) $(SANFLAGS) -Ishim $(CAIRO_CFLAGS) -DVRAMPOOL_VERSION='"$(VERSION)"'
TOOL_LIBS := -lelf -ljansson -lcairo -lfontconfig -lm

$(B)/analysis/%.o: analysis/%.c $(wildcard analysis/*.h) shim/core/config.h shim/core/layout.h | $(B)/analysis
	$(CC) $(TOOL_CFLAGS) -c -o $@ $<

$(B)/analysis/shim/%.o: shim/%.c $(SHIM_HDR)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_COMMON) $(SANFLAGS) -Ishim -c -o $@ $<

$(B)/vrampool: $(TOOL_OBJ) $(TOOL_SHIM_OBJ)
	$(CC) $(SANFLAGS) -o $@ $(TOOL_OBJ) $(TOOL_SHIM_OBJ) $(TOOL_LIBS)

# The manual page, vrampool(1), made from docs/vrampool.md by a small awk
# converter (no pandoc needed); `man -l build/vrampool.1` shows it.
$(B)/vrampool.1: docs/vrampool.md analysis/md2man.awk | $(B)
	awk -v version="$(VERSION)" -f analysis/md2man.awk docs/vrampool.md >$@.tmp && mv $@.tmp $@

# The command's unit tests (tests/tool/test_*.c): its modules linked
# directly and sanitized, as the shim's are.
TOOLTEST_SRC := $(wildcard tests/tool/test_*.c)
TOOLTEST_BIN := $(TOOLTEST_SRC:tests/tool/test_%.c=$(B)/unit/test_tool_%)
TOOLTEST_OBJ := $(filter-out $(B)/unit/tool/main.o,$(TOOL_SRC:analysis/%.c=$(B)/unit/tool/%.o)) \
                $(TOOL_SHIM:%=$(B)/unit/obj/%.o)

$(B)/unit/tool/%.o: analysis/%.c $(wildcard analysis/*.h) | $(B)/unit/tool
	$(CC) $(CFLAGS_COMMON) $(UNITSAN) -Ishim $(CAIRO_CFLAGS) -DVRAMPOOL_VERSION='"$(VERSION)"' -c -o $@ $<

$(B)/unit/test_tool_%: tests/tool/test_%.c tests/unit/cunit_main.h $(TOOLTEST_OBJ)
	$(CC) $(CFLAGS_COMMON) $(UNITSAN) -Ianalysis -Ishim $(CAIRO_CFLAGS) -o $@ $< $(TOOLTEST_OBJ) \
		-lcunit $(TOOL_LIBS)

# ---- the emulated device (test equipment, never shipped) -------------------
FAKE_SRC := $(wildcard tests/fakecuda/*.c)
FAKE_OBJ := $(FAKE_SRC:tests/fakecuda/%.c=$(B)/fakecuda/obj/%.o)

$(B)/fakecuda/obj/%.o: tests/fakecuda/%.c $(wildcard tests/fakecuda/*.h) | $(B)/fakecuda/obj
	$(CC) $(CFLAGS_COMMON) $(CUDAINC) -fPIC -fvisibility=hidden -c -o $@ $<

$(B)/fakecuda/libcudart.so.13: $(FAKE_OBJ) tests/fakecuda/fakecuda.map
	$(CC) -shared -fPIC -o $@ $(FAKE_OBJ) -Wl,--version-script=tests/fakecuda/fakecuda.map \
		-Wl,-soname,libcudart.so.13 -Wl,-z,defs -Wl,-z,nodelete -pthread -ldl -lrt
	ln -sf libcudart.so.13 $(B)/fakecuda/libcuda.so.1
	ln -sf libcudart.so.13 $(B)/fakecuda/libcudart.so
	ln -sf libcudart.so.13 $(B)/fakecuda/libcuda.so

# Programs that exercise the emulation are built against the real toolkit,
# exactly as a user's program is, and run with LD_LIBRARY_PATH=build/fakecuda.
APP_LDFLAGS := $(CUDALIB) -Wl,-z,now -pthread
FAKECHECK_SRC := $(wildcard tests/fakecuda/check/*.c)
FAKECHECK_BIN := $(FAKECHECK_SRC:tests/fakecuda/check/%.c=$(B)/fakecuda/check/%)

$(B)/fakecuda/check/%: tests/fakecuda/check/%.c tests/fakecuda/check/harness.h tests/unit/cunit_main.h | $(B)/fakecuda/check
	$(CC) $(CFLAGS_COMMON) $(CUDAINC) -o $@ $< $(APP_LDFLAGS) -lcudart -L$(CUDA_HOME)/lib64/stubs -lcuda -lcunit -ldl

# ---- test programs ----------------------------------------------------------
APP_SRC := $(wildcard tests/apps/*.c)
APP_BIN := $(APP_SRC:tests/apps/%.c=$(B)/apps/%) $(B)/apps/trainer_ptsz $(B)/apps/libreload.so

$(B)/apps/%: tests/apps/%.c | $(B)/apps
	$(CC) $(CFLAGS_COMMON) $(CUDAINC) -o $@ $< $(APP_LDFLAGS) -lcudart -lm

# The trainer also calls the driver (its --copy-api driver routes, VMM
# buffers): linked against the toolkit's stub libcuda.so at build time; at
# run time libcuda.so.1 is the emulated device or the real driver.
CUDASTUBS := -L$(CUDA_HOME)/lib64/stubs

$(B)/apps/trainer: tests/apps/trainer.c tests/apps/lib/loader.h | $(B)/apps
	$(CC) $(CFLAGS_COMMON) $(CUDAINC) -o $@ $< $(APP_LDFLAGS) -lcudart $(CUDASTUBS) -lcuda -lm

# drvloader reaches the driver only through dlopen + cuGetProcAddress, as a
# statically linked runtime does: linked with neither libcudart nor libcuda.
$(B)/apps/drvloader: tests/apps/drvloader.c tests/apps/lib/loader.h | $(B)/apps
	$(CC) $(CFLAGS_COMMON) $(CUDAINC) -o $@ $< -Wl,-z,now -pthread -ldl

# reload loads, uses and unloads the runtime round after round: the program
# links neither libcudart nor libcuda; the library it loads links libcudart.
$(B)/apps/reload: tests/apps/reload.c tests/apps/lib/reload_work.h tests/apps/lib/loader.h $(B)/apps/libreload.so | $(B)/apps
	$(CC) $(CFLAGS_COMMON) $(CUDAINC) -o $@ $< -Wl,-z,now -ldl

$(B)/apps/libreload.so: tests/apps/lib/reloadlib.c tests/apps/lib/reload_work.h tests/apps/lib/loader.h | $(B)/apps
	$(CC) $(CFLAGS_COMMON) $(CUDAINC) -fPIC -fvisibility=hidden -shared -o $@ $< \
		$(CUDALIB) -Wl,-z,defs -lcudart

# dltest and the libraries it loads (one source, a role each: libdlt_a.so
# and libdlt_b.so are linked in that order, the others opened with dlopen).
DLT_LIBS := $(patsubst %,$(B)/apps/libdlt_%.so,a b ctor deep cu)
APP_BIN += $(DLT_LIBS)

$(B)/apps/libdlt_%.so: tests/apps/lib/dltlib.c | $(B)/apps
	$(CC) $(CFLAGS_COMMON) $(CUDAINC) -fPIC -fvisibility=hidden -shared \
		-DDLT_ROLE_$$(echo $* | tr a-z A-Z) -Wl,-soname,libdlt_$*.so -o $@ $< -Wl,-z,defs -ldl

$(B)/apps/dltest: tests/apps/dltest.c $(DLT_LIBS) | $(B)/apps
	$(CC) $(CFLAGS_COMMON) $(CUDAINC) -rdynamic -o $@ $< $(APP_LDFLAGS) \
		-L$(B)/apps -Wl,-rpath,'$$ORIGIN' -ldlt_a -ldlt_b -lcudart -ldl -lm

$(B)/apps/trainer_ptsz: tests/apps/trainer.c tests/apps/lib/loader.h | $(B)/apps
	$(CC) $(CFLAGS_COMMON) $(CUDAINC) -DCUDA_API_PER_THREAD_DEFAULT_STREAM=1 \
		-o $@ $< $(APP_LDFLAGS) -lcudart $(CUDASTUBS) -lcuda -lm

# ---- unit tests: the shim's modules linked directly, sanitized --------------
UNIT_SRC := $(wildcard tests/unit/test_*.c)
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=$(B)/unit/%)
UNIT_OBJ := $(CORE_SRC:shim/%.c=$(B)/unit/obj/%.o)
UNIT_CFLAGS := $(CFLAGS_COMMON) $(CUDAINC) $(UNITSAN) -Ishim

$(B)/unit/obj/%.o: shim/%.c $(SHIM_HDR)
	@mkdir -p $(@D)
	$(CC) $(UNIT_CFLAGS) -c -o $@ $<

$(B)/unit/%: tests/unit/%.c $(UNIT_OBJ) $(GATHER_OBJ) shim/device/gather.cu $(wildcard tests/unit/*.h)
	$(CC) $(UNIT_CFLAGS) -o $@ $< $(UNIT_OBJ) $(GATHER_OBJ) -lcunit -ljansson -ldl -lm

# ---- benchmark programs: the shim's modules linked directly, optimised -----
BENCH_SRC := $(wildcard tests/bench/*.c)
BENCH_BIN := $(BENCH_SRC:tests/bench/%.c=$(B)/bench/%)
CORE_OBJ  := $(CORE_SRC:shim/%.c=$(B)/shim/%.o)

$(B)/bench/%: tests/bench/%.c $(CORE_OBJ) $(GATHER_OBJ) | $(B)/bench
	$(CC) $(CFLAGS_COMMON) $(CUDAINC) -Ishim -o $@ $< $(CORE_OBJ) $(GATHER_OBJ) $(BENCH_WRAP) -ldl -lm

# bench_shim leaves the device's time out of its per-row costs (issue 16):
# it wraps the pool's byte-moving device calls to time them.
$(B)/bench/bench_shim: BENCH_WRAP := -Wl,--wrap=device_gather,--wrap=device_copy_dtod_many

# ---- the real-GPU check of the gather kernel (tests/gpu/check.sh runs it) --
# It reaches the driver through shim/device/device.c (dlopen), so it builds here and
# runs on a GPU machine (or, proving nothing about the kernel, the emulation).
$(B)/gpu/gather_check: tests/gpu/gather_check.c $(CORE_OBJ) $(GATHER_OBJ) | $(B)/gpu
	$(CC) $(CFLAGS_COMMON) $(CUDAINC) -Ishim -o $@ $< $(CORE_OBJ) $(GATHER_OBJ) -ldl -lm

# ---- top-level targets ------------------------------------------------------
TARGETS := $(B)/libvrampool.so $(B)/vrampool $(B)/vrampool.1 $(B)/fakecuda/libcudart.so.13 \
           $(FAKECHECK_BIN) $(APP_BIN) $(UNIT_BIN) $(TOOLTEST_BIN) $(BENCH_BIN) $(B)/gpu/gather_check

all: $(TARGETS)

deps:
	@CUDA_HOME=$(CUDA_HOME) scripts/deps.sh

test: deps
	$(MAKE) all
	CUDA_HOME=$(CUDA_HOME) scripts/test.sh

demo: deps
	$(MAKE) all
	CUDA_HOME=$(CUDA_HOME) scripts/demo.sh

bench: deps
	$(MAKE) all
	CUDA_HOME=$(CUDA_HOME) scripts/bench.sh

MANDIR := $(PREFIX)/share/man/man1

install: $(B)/libvrampool.so $(B)/vrampool $(B)/vrampool.1
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib/vrampool $(DESTDIR)$(MANDIR)
	install -m 0755 $(B)/vrampool $(DESTDIR)$(PREFIX)/bin/vrampool
	install -m 0755 $(B)/libvrampool.so $(DESTDIR)$(PREFIX)/lib/vrampool/libvrampool.so
	install -m 0644 $(B)/vrampool.1 $(DESTDIR)$(MANDIR)/vrampool.1

uninstall:
	rm -f $(DESTDIR)$(PREFIX)/bin/vrampool \
	      $(DESTDIR)$(PREFIX)/lib/vrampool/libvrampool.so \
	      $(DESTDIR)$(MANDIR)/vrampool.1
	-rmdir $(DESTDIR)$(PREFIX)/lib/vrampool 2>/dev/null || true

clean:
	rm -rf $(B)

$(B) $(B)/shim $(B)/analysis $(B)/analysis/shim $(B)/fakecuda/obj $(B)/fakecuda/check $(B)/apps \
$(B)/unit/obj $(B)/unit/tool $(B)/bench $(B)/gpu:
	mkdir -p $@

.PHONY: all deps test demo bench install uninstall clean ptx
.SECONDARY:
