#!/usr/bin/env bash
# Builds the DocC documentation of the Progression module from its catalog (Sources/Progression/Progression.docc)
# and the module's symbol graph, failing on any warning: a broken symbol link, an article that names a symbol that
# no longer exists, a parameter left undocumented. Builds the module first (debug; nothing to do when it is built);
# writes the documentation archive to .build/docs.
#
#   bash tools/check-docs.sh              # check
#   bash tools/check-docs.sh --preview    # and serve it (docc preview) on http://localhost:8080
set -euo pipefail
cd "$(dirname "$0")/.."
swift build --target Progression >/dev/null
modules=.build/debug/Modules
graphs=$(mktemp -d)
trap 'rm -rf "$graphs"' EXIT
swift symbolgraph-extract -module-name Progression -I "$modules" \
    -Xcc -fmodule-map-file=Sources/CSQLite/module.modulemap \
    -Xcc -fmodule-map-file=Sources/CSQLiteWAL/include/module.modulemap \
    -target "$(uname -m)-unknown-linux-gnu" -minimum-access-level public -output-dir "$graphs"
mode=convert
[ "${1:-}" = "--preview" ] && mode=preview
docc "$mode" Sources/Progression/Progression.docc --additional-symbol-graph-dir "$graphs" \
    --fallback-display-name Progression --fallback-bundle-identifier org.progression.Progression \
    --warnings-as-errors --output-path .build/docs
