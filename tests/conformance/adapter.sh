#!/usr/bin/env bash
# The client command that the MCP conformance harness runs for each scenario:
#
#   /bin/sh -c "exec bash tests/conformance/adapter.sh <server-url>"
#
# The server URL is the last argument; MCP_CONFORMANCE_SCENARIO names the scenario (and, for
# four auth scenarios, MCP_CONFORMANCE_CONTEXT holds credentials as JSON; 0.2.0-alpha also sets
# MCP_CONFORMANCE_PROTOCOL_VERSION, the revision the scenario runs at, which nod negotiates by
# itself). The adapter writes a private nod profile with one Streamable HTTP server "test" at
# that URL and then execs real nod commands, so the harness's SIGTERM (sent on its --timeout)
# reaches nod itself. One adapter serves every set (tests/conformance/sets/*): a scenario of the
# same name is driven the same way in each harness version.
#
# Environment: NOD_BIN (the nod binary; default nod on PATH), NOD_CONFORMANCE_TMP (run.sh's
# folder for the temporary NOD_HOMEs, which run.sh removes; without it the adapter removes its
# own NOD_HOME once nod has exited), NOD_CONFORMANCE_NODE (the node that reads JSON for the
# adapter; run.sh sets its Node 22, default node on PATH).
set -euo pipefail

[ "$#" -ge 1 ] || { echo "adapter: usage: adapter.sh <server-url> (run by the conformance harness)" >&2; exit 2; }
url="${!#}"
scenario="${MCP_CONFORMANCE_SCENARIO:-}"
nod="${NOD_BIN:-nod}"

# The harness hands out http://localhost:PORT[/mcp]; refuse anything that would need escaping
# inside the JSON profile.
case "$url" in
  http://* | https://*) ;;
  *) echo "adapter: the last argument is not a URL: $url" >&2; exit 2 ;;
esac
case "$url" in
  *[\"\\[:space:][:cntrl:]]*) echo "adapter: unexpected characters in the URL: $url" >&2; exit 2 ;;
esac

if [ -n "${NOD_CONFORMANCE_TMP:-}" ]; then
  mkdir -p "$NOD_CONFORMANCE_TMP"
  home="$(mktemp -d "$NOD_CONFORMANCE_TMP/home.XXXXXX")"
else
  home="$(mktemp -d "${TMPDIR:-/tmp}/nod-conformance-home.XXXXXX")"
  # exec replaces this shell with nod (same pid), so a detached watcher removes the folder once
  # that pid is gone. Its stdio must not hold the harness's pipes open.
  pid=$$
  (while kill -0 "$pid" 2>/dev/null; do sleep 0.2; done; rm -rf "$home") </dev/null >/dev/null 2>&1 &
fi
export NOD_HOME="$home"
# The revision the scenario runs at decides the lifecycle (the harness's README): a 2026-07-28
# run pins the stateless revision; an older one pins the initialize era, so no server/discover
# probe reaches the 2025 mocks (their raw-HTTP scenarios would count it against nod).
case "${MCP_CONFORMANCE_PROTOCOL_VERSION:-}" in
  2026-*) pin="2026-07-28" ;;
  *) pin="2025-11-25" ;;
esac
printf '{"mcp": {"test": {"type": "http", "url": "%s", "protocol_version": "%s"}}}\n' "$url" "$pin" >"$NOD_HOME/mcp.json"
chmod 600 "$NOD_HOME/mcp.json"

# A nod step that is not the last one (the last is exec'd): forward SIGTERM/SIGINT to it so
# nothing outlives a harness timeout.
child=""
trap '[ -z "$child" ] || kill -TERM "$child" 2>/dev/null; exit 143' TERM INT
step() {
  "$@" </dev/null &
  child=$!
  local rc=0
  wait "$child" || rc=$?
  child=""
  return "$rc"
}

# Each case ends in `exec`; stdin is /dev/null so nod never waits on the harness's open pipe.
case "$scenario" in
  initialize)
    # The mock checks only the initialize request (mcp-client-initialization: protocolVersion
    # 2025-06-18 or 2025-11-25, non-empty clientInfo.name and .version) and that the client exits
    # 0. It declares no capabilities, so nothing can be listed (nod sends no request for a
    # capability the server did not declare); `nod mcp list --connect` connects and exits 0 when
    # the server is ready, 2 when it failed.
    exec "$nod" mcp list --connect </dev/null
    ;;
  tools_call)
    # Stateless SDK server at /mcp with one tool add_numbers {a: number, b: number} (both
    # required). The only check, tool-add-numbers, is SUCCESS when the tool is called.
    exec "$nod" mcp tool call test add_numbers '{"a": 5, "b": 10}' </dev/null
    ;;
  elicitation-sep1034-client-defaults)
    # Stateful SDK server. Calling test_client_elicitation_defaults makes the server send
    # elicitation/create with no related request, so it goes out ONLY on the standalone GET SSE
    # stream (nod must open it after notifications/initialized and declare the elicitation
    # capability). Five checks want the accepted content to hold every default: name "John Doe",
    # age 30, score 95.5, status "active" (enum member), verified true. --elicit defaults
    # accepts the form filled with its defaults.
    exec "$nod" mcp tool call test test_client_elicitation_defaults '{}' --elicit defaults </dev/null
    ;;
  sse-retry)
    # Hand-written server (negotiates 2025-03-26). tools/call test_reconnection gets an SSE
    # stream with one priming event (id, retry: 500, empty data) that is closed after 50 ms with
    # no result; nod must GET with Last-Event-ID 450-700 ms after the close and read the result
    # from that GET stream.
    exec "$nod" mcp tool call test test_reconnection '{}' </dev/null
    ;;
  json-schema-2020-12-preservation)
    # 0.2.0-alpha.12 (not in 0.1.16). The mock SDK server at /mcp lists two tools:
    # json_schema_2020_12_tool, whose inputSchema uses JSON Schema 2020-12 ($schema, $defs with an
    # $anchor, a $ref, allOf/anyOf, if/then/else, additionalProperties: false), and
    # json_schema_echo {schema: object}. The client must call json_schema_echo with the first
    # tool's inputSchema, as it received it, as the `schema` argument; the checks compare what
    # arrives with the fixture (SEP-1613 keywords must survive; the SEP-2106 ones are SKIPPED
    # rather than FAILURE below 2026-07-28). So the adapter takes that inputSchema from nod's own
    # `tool list --json` output and passes it on unchanged: whatever nod dropped or altered while
    # parsing the listing shows up in the checks.
    step "$nod" mcp tool list test --json >"$NOD_HOME/tools.json"
    args="$("${NOD_CONFORMANCE_NODE:-node}" -e '
      const fs = require("fs");
      const tools = JSON.parse(fs.readFileSync(process.argv[1], "utf8")).tools || [];
      const tool = tools.find((t) => t.name === "json_schema_2020_12_tool");
      if (!tool || tool.inputSchema === undefined) {
        console.error("adapter: nod listed no json_schema_2020_12_tool with an inputSchema");
        process.exit(1);
      }
      process.stdout.write(JSON.stringify({ schema: tool.inputSchema }));
    ' "$NOD_HOME/tools.json")"
    exec "$nod" mcp tool call test json_schema_echo "$args" </dev/null
    ;;
  auth/*)
    # What each auth scenario checks, as of 0.1.16 (0.2.0-alpha.12 adds checks to some, e.g.
    # auth/metadata-var2 wants the resource indicator exactly as the PRM publishes it, but is
    # driven the same way). Every one serves
    # a stateless SDK server at /mcp behind bearer auth (401 + WWW-Authenticate, GET /mcp -> 404)
    # with one tool test-tool {type: object}, and a mock authorization server whose /authorize
    # answers an immediate 302 to redirect_uri?code=...&state=... (no browser), token
    # test-token-<ms>, never a refresh_token. PKCE S256 and the RFC 8707 resource parameter are
    # checked everywhere. So nod needs a headless authorize (follow or read the 302) and,
    # probably, adapter options derived from MCP_CONFORMANCE_CONTEXT:
    #   auth/metadata-default      PRM from WWW-Authenticate resource_metadata (path-based);
    #                              never GET the root PRM first (prm-priority-order); DCR.
    #   auth/metadata-var1         no resource_metadata: derive the path-based PRM URL; AS
    #                              metadata only at /.well-known/openid-configuration.
    #   auth/metadata-var2         path-based PRM 404 -> root PRM; AS issuer .../tenant1, metadata
    #                              at /.well-known/oauth-authorization-server/tenant1 only.
    #   auth/metadata-var3         PRM only via resource_metadata (custom path); AS metadata at
    #                              /tenant1/.well-known/openid-configuration.
    #   auth/basic-cimd            client_id must be https://conformance-test.local/client-metadata.json
    #                              (CIMD supported by the AS); another client_id is a WARNING.
    #   auth/scope-from-www-authenticate   request scope="mcp:basic" from the 401 header.
    #   auth/scope-from-scopes-supported   request all of PRM scopes_supported.
    #   auth/scope-omitted-when-undefined  send no scope.
    #   auth/scope-step-up         tools/list -> 401 scope mcp:basic; tools/call -> 403
    #                              insufficient_scope "mcp:basic mcp:write": re-authorize. Needs a
    #                              tools/list AND a tools/call (the two steps below).
    #   auth/scope-retry-limit     403 on every token: stop after at most 3 authorizations
    #                              (non-zero exit allowed).
    #   auth/token-endpoint-auth-basic|post|none   use the token_endpoint_auth_method that DCR
    #                              returns (Basic header / form client_secret / neither).
    #   auth/pre-registration      no registration_endpoint: client_id/client_secret from
    #                              MCP_CONFORMANCE_CONTEXT, client_secret_basic.
    #   auth/2025-03-26-oauth-metadata-backcompat  no PRM; AS metadata on the MCP origin with
    #                              issuer .../oauth (mismatch must be tolerated).
    #   auth/2025-03-26-oauth-endpoint-fallback    no metadata at all: /register, /authorize,
    #                              /token at the MCP origin.
    #   auth/resource-mismatch     PRM resource is https://evil.example.com/mcp: abort before
    #                              any authorization request (non-zero exit allowed).
    #   auth/offline-access-scope  DCR grant_types must include refresh_token (else WARNING);
    #                              request offline_access.
    #   auth/offline-access-not-supported  must not request offline_access.
    #   auth/client-credentials-jwt    client_credentials + private_key_jwt (ES256, PEM from the
    #                              context, aud = AS issuer).
    #   auth/client-credentials-basic  client_credentials + client_secret_basic from the context.
    #   auth/cross-app-access-complete-flow  token exchange at the context's IdP, then
    #                              jwt-bearer grant at the AS.
    # nod's real flow, headless: BROWSER is a command that follows the authorization
    # server's immediate 302 to nod's loopback callback. `nod mcp auth` connects and lists
    # tools (reaching whatever the server protects), then the tool call runs with the stored
    # token and steps up on 403 insufficient_scope (BROWSER set lets it re-authorize).
    export BROWSER="curl -s -L -o /dev/null"
    oauth='{}'
    case "$scenario" in
      auth/basic-cimd)
        oauth='{"client_metadata_url": "https://conformance-test.local/client-metadata.json"}'
        ;;
      auth/pre-registration)
        context="${MCP_CONFORMANCE_CONTEXT:-{\}}"
        client_id=$(printf '%s' "$context" | "${NOD_CONFORMANCE_NODE:-node}" -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.parse(s).client_id||""))')
        NOD_CONFORMANCE_SECRET=$(printf '%s' "$context" | "${NOD_CONFORMANCE_NODE:-node}" -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.parse(s).client_secret||""))')
        export NOD_CONFORMANCE_SECRET
        oauth=$(printf '{"client_id": "%s", "client_secret_env": "NOD_CONFORMANCE_SECRET"}' "$client_id")
        ;;
    esac
    printf '{"mcp": {"test": {"type": "http", "url": "%s", "protocol_version": "%s", "oauth": %s}}}\n' "$url" "$pin" "$oauth" >"$NOD_HOME/mcp.json"
    step "$nod" mcp auth test
    exec "$nod" mcp tool call test test-tool '{}' </dev/null
    ;;
  sep-2640-client-no-prefetch)
    # The skills extension (SEP-2640). The mock (raw HTTP, initialize era) declares
    # io.modelcontextprotocol/skills and lists one skill with two files; the check wants
    # skills/list called and neither file read, and the client to exit 0: list the skills.
    exec "$nod" mcp skill list test </dev/null
    ;;
  sep-2640-client-verify-digest | sep-2640-client-verify-size | sep-2640-client-verify-frontmatter)
    # The same mock, serving a SKILL.md whose digest, size or front matter (with a digest and
    # size recomputed for it) disagrees with the listing. The scenario's contract: load the
    # skill, then read its supporting file. nod loads SKILL.md, refuses it (exit 2) and so never
    # reads references/FORMS.md, which is what the check looks for.
    exec "$nod" mcp skill show test pdf-processing references/FORMS.md </dev/null
    ;;
  request-metadata)
    # 2026-07-28 (SEP-2575). The mock refuses the first POST with -32022 whatever it carries,
    # then answers server/discover (declaring no capabilities) and checks every POST's
    # MCP-Protocol-Version header and _meta. Connecting is the whole exchange.
    exec "$nod" mcp list --connect </dev/null
    ;;
  http-standard-headers)
    # 2026-07-28 (SEP-2243). The mock checks Mcp-Method on every request and Mcp-Name on
    # tools/call, resources/read and prompts/get (the raw name or URI): list and use each kind.
    step "$nod" mcp tool list test
    step "$nod" mcp tool call test test_headers '{}' || true
    step "$nod" mcp resource list test
    step "$nod" mcp resource read test 'file:///path/to/file%20name.txt' || true
    step "$nod" mcp prompt list test
    exec "$nod" mcp prompt get test test_prompt </dev/null
    ;;
  http-custom-headers)
    # 2026-07-28 (SEP-2243). MCP_CONFORMANCE_CONTEXT.toolCalls gives the calls to make; the
    # mock checks the Mcp-Param-* headers nod derives from the tools' x-mcp-header markings.
    calls="$(printf '%s' "${MCP_CONFORMANCE_CONTEXT:-{\}}" | "${NOD_CONFORMANCE_NODE:-node}" -e '
      let s = ""; process.stdin.on("data", (d) => (s += d)).on("end", () => {
        for (const c of JSON.parse(s).toolCalls || []) console.log(c.name + "\t" + JSON.stringify(c.arguments || {}));
      });')"
    [ -n "$calls" ] || { echo "adapter: no toolCalls in MCP_CONFORMANCE_CONTEXT" >&2; exit 1; }
    while IFS=$'\t' read -r name args; do
      step "$nod" mcp tool call test "$name" "$args"
    done <<<"$calls"
    exit 0
    ;;
  http-invalid-tool-headers)
    # 2026-07-28 (SEP-2243). Tools with invalid x-mcp-header markings must not be offered, and
    # the valid one must be called: call every tool nod lists.
    step "$nod" mcp tool list test --json >"$NOD_HOME/tools.json"
    names="$("${NOD_CONFORMANCE_NODE:-node}" -e '
      const tools = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")).tools || [];
      for (const t of tools) console.log(t.name);' "$NOD_HOME/tools.json")"
    while read -r name; do
      [ -z "$name" ] || step "$nod" mcp tool call test "$name" '{"region": "us-west1"}'
    done <<<"$names"
    exit 0
    ;;
  sep-2322-client-request-state)
    # 2026-07-28 (SEP-2322). Four tools: two answer input_required with a form (confirmed:
    # boolean) and nod must retry with a new id, the answers and the requestState verbatim
    # (or none); one is unrelated; one has no resultType (complete: no retry).
    for tool in test_mrtr_echo_state test_mrtr_unrelated test_mrtr_no_state test_mrtr_no_result_type; do
      step "$nod" mcp tool call test "$tool" '{}' --elicit-answer '{"confirmed": true}'
    done
    exit 0
    ;;
  *)
    # A scenario this adapter does not know yet: connect and list tools. Add a case above with
    # the tools/call the scenario checks for.
    exec "$nod" mcp tool list test </dev/null
    ;;
esac
