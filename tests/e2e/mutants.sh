#!/usr/bin/env bash
# The mutants of `make mutants` (tests/mutants/*.patch, scripts/mutants.sh)
# stay current as the code moves: each still applies to this tree, changes
# files under shim/ only, and names in its kill: line suites this tree has.
# Cheap (git apply --check); the mutants themselves run in `make mutants`.
source "$(dirname "$0")/lib.sh"

applies() {
	cd "$ROOT" && scripts/mutants.sh --check
}
check "every mutant patch applies to this tree and names suites that exist" applies
