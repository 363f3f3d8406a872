#!/bin/sh
# Grades a fleet four ways (first run, unchanged rerun, partial rerun, --full) with one fleetgrade
# executable and prints a SHA-256 of every output file after each, so two versions can be compared
# byte for byte:  tools/output_identity.sh .venv/bin/fleetgrade FLEET WORKDIR > sums.txt
# The fleet is copied and every input given one modification time (the listing digest in _state
# reads them), and the partial rerun changes one run and removes another at fixed times, so two
# versions see the same inputs. Paths are in the rows: compare runs made with the same WORKDIR.
set -eu
FG=$1 FLEET=$2 WORK=$3
shift 3
rm -rf "$WORK" && mkdir -p "$WORK"
cp -a "$FLEET" "$WORK/fleet"
# One modification time for every input: a checkout's times differ from another's.
find "$WORK/fleet" -exec touch -h -d '2026-01-01T00:00:00Z' {} +
sums() {
    echo "## $1"
    (cd "$WORK/out" && find . -type f ! -path './_staging/*' | LC_ALL=C sort | xargs sha256sum)
}
grade() { "$FG" run --input "$WORK/fleet" --output "$WORK/out" "$@" >/dev/null 2>&1; }
grade "$@"; sums first
grade "$@"; sums unchanged
# One run changed, one removed: the first two run folders in name order that hold a file.
changed=$(cd "$WORK/fleet" && find . -type f -name '*.json*' | LC_ALL=C sort | head -1)
printf '\n' >> "$WORK/fleet/$changed"
touch -d '2026-01-02T03:04:05Z' "$WORK/fleet/$changed"
removed=$(cd "$WORK/fleet" && find . -type d -name 'run-*' | LC_ALL=C sort | tail -1)
rm -rf "${WORK:?}/fleet/$removed"
grade "$@"; sums partial
grade --full "$@"; sums full
