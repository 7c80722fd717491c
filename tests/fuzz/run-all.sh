#!/bin/sh
# Runs every fuzz target for N seconds (default 60) with its seeds, one after another, with a
# per-input time limit and an RSS limit; stops at the first crash. Needs cargo-fuzz
# (`cargo install cargo-fuzz`); RUSTC_BOOTSTRAP lets a stable toolchain build the sanitizer.
set -eu
secs=${1:-60}
cd "$(dirname "$0")"
for target in $(sed -n 's/^name = "\(.*\)"/\1/p' Cargo.toml | grep -v '^nod-fuzz$'); do
  mkdir -p "corpus/$target"
  [ -d "seeds/$target" ] && cp -n seeds/"$target"/* "corpus/$target/" 2>/dev/null || true
  echo "== $target ($secs s)"
  if ! RUSTC_BOOTSTRAP=1 cargo fuzz run --fuzz-dir . -O "$target" "corpus/$target" -- \
    -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 >"corpus/$target.log" 2>&1; then
    tail -n 30 "corpus/$target.log"
    echo "== $target FAILED; the reproducer is in artifacts/$target/"
    exit 1
  fi
  grep -E '^(#[0-9]+: DONE|Done [0-9]+ runs)' "corpus/$target.log" | tail -n 1
done
echo "== every target ran $secs s without a crash, hang or allocation over the limit"
