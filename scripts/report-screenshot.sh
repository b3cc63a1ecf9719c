#!/usr/bin/env bash
# Renders the benchmark report of a committed comparison (21 policy runs, rocksdb and fjall) with
# `strata bench --from-json` and takes a full-page screenshot of it with headless Chromium, to see
# the page as a reader does: do the panels, legends, labels and table marks read at a glance?
#
# Usage: scripts/report-screenshot.sh [OUT.png]    (default: target/report-screenshot.png)
# Environment: STRATA, the strata binary (default: the release build, built when missing);
# CHROMIUM, the browser (default: chromium, chromium-browser or google-chrome on the PATH).
set -euo pipefail
cd "$(dirname "$0")/.."

out=${1:-target/report-screenshot.png}
fixture=crates/strata-bench/testdata/report-23-runs.json
# Tall enough for the whole page of this fixture at 1400 pixels wide (headless Chromium shoots
# the window, not the page): raise it when the report grows.
window=1400,10200

strata=${STRATA:-${CARGO_TARGET_DIR:-target}/release/strata}
if [ -z "${STRATA:-}" ] && [ ! -x "$strata" ]; then
  cargo build --release --quiet --bin strata
fi
chromium=${CHROMIUM:-$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)}
if [ -z "$chromium" ]; then
  echo "report-screenshot: no Chromium found (Debian: apt-get install chromium)" >&2
  exit 1
fi

report=$(mktemp -d)
profile=$(mktemp -d)
trap 'rm -rf "$report" "$profile"' EXIT
"$strata" bench --from-json "$fixture" --report "$report" >/dev/null

mkdir -p "$(dirname "$out")"
out=$(realpath -m "$out")
rm -f "$out"
# Offline and quiet: no first-run pages, updates, sync or background fetches.
timeout 120 "$chromium" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
  --disable-background-networking --disable-component-update --disable-sync \
  --disable-dev-shm-usage --hide-scrollbars --user-data-dir="$profile" \
  --window-size="$window" --screenshot="$out" "file://$report/index.html" >/dev/null 2>&1 || true

# A page that failed to load still gives a white PNG of a few kilobytes.
size=$(stat -c %s "$out" 2>/dev/null || echo 0)
if [ "$size" -lt 100000 ]; then
  echo "report-screenshot: $out is missing or tiny ($size bytes): Chromium did not render the report" >&2
  exit 1
fi
echo "report screenshot: $out ($size bytes)"
