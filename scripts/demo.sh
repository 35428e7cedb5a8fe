#!/usr/bin/env bash
# The main job: a training-style program with and without the shim, three
# pairs of runs, then the side-by-side report (vrampool run --ab --repeat 3)
# with its verdict on bytes and on time. On a real NVIDIA GPU where
# one is present; otherwise on the emulated device, with a simulated PCIe
# link so the epoch times mean something (and are labelled as simulated).
set -eu
cd "$(dirname "$0")/.."

SAMPLES=${DEMO_SAMPLES:-2000}
EPOCHS=${DEMO_EPOCHS:-4}
ROW=12288                       # u8:3x64x64 images
ARGS="--samples $SAMPLES --row $ROW --batch 64 --epochs $EPOCHS --stream nonblocking"

if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
	echo "demo: real GPU: $(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)"
else
	export LD_LIBRARY_PATH=$PWD/build/fakecuda${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
	export FAKECUDA_H2D_GBPS=${FAKECUDA_H2D_GBPS:-4}
	export FAKECUDA_D2D_GBPS=${FAKECUDA_D2D_GBPS:-200}
	# The cost ledger weighs the simulated link, stated as a user would state theirs.
	export VRAMPOOL_LINK_GBPS=${VRAMPOOL_LINK_GBPS:-$FAKECUDA_H2D_GBPS}
	echo "demo: no GPU here: the emulated device (tests/fakecuda), PCIe simulated at" \
		"$FAKECUDA_H2D_GBPS GB/s and device copies at $FAKECUDA_D2D_GBPS GB/s;" \
		"byte counts are exact, epoch times are a simulation"
fi
echo "demo: build/apps/trainer $ARGS"
echo "demo: every epoch reshuffles $SAMPLES samples of $ROW bytes and verifies each byte on the device"
echo
# Three pairs, interleaved: one pair cannot carry a time verdict on a noisy
# machine. The dumps stay in build/demo/ (not the source tree).
mkdir -p build/demo
exec build/vrampool run --ab --repeat "${DEMO_PAIRS:-3}" --layout u8:3x64x64 \
	--stats build/demo/trainer.json -- build/apps/trainer $ARGS 2>&1
