// Summarise one conformance checks.json for tests/conformance/run.sh.
//
//   node checks.mjs <checks.json>
//
// Line 1: "<success> <failure> <warning> <info> <skipped>" (counts by status; the 0.2.0-alpha
// harness marks checks that do not apply at the run's protocol revision SKIPPED).
// Then, for run.sh to show when the scenario did not pass:
//   every FAILURE and WARNING check: id, status, description, errorMessage and details;
//   then the INFO checks (the mock server's log of requests, responses and SSE events),
//   one line each, as a wire trace.
import { readFileSync } from 'node:fs';

const file = process.argv[2];
let checks;
try {
  checks = JSON.parse(readFileSync(file, 'utf8'));
  if (!Array.isArray(checks)) throw new Error('not a JSON array');
} catch (err) {
  console.log('0 0 0 0 0');
  console.log(`  cannot read ${file}: ${err.message}`);
  process.exit(0);
}

const count = (status) => checks.filter((c) => c.status === status).length;
console.log(`${count('SUCCESS')} ${count('FAILURE')} ${count('WARNING')} ${count('INFO')} ${count('SKIPPED')}`);

const clip = (text, max) => (text.length > max ? `${text.slice(0, max)}… (${text.length} chars)` : text);
// One line per trace entry: bodies such as Express's HTML error pages span several lines.
const oneLine = (text) => text.replace(/\s+/g, ' ').trim();

const bad = checks.filter((c) => c.status === 'FAILURE' || c.status === 'WARNING');
for (const c of bad) {
  console.log(`  ${c.status} [${c.id}] ${c.description ?? ''}`);
  if (c.errorMessage) console.log(`      error: ${clip(String(c.errorMessage), 600)}`);
  if (c.details !== undefined) console.log(`      details: ${clip(JSON.stringify(c.details), 600)}`);
}

const wire = checks.filter((c) => c.status === 'INFO');
if (wire.length > 0) {
  console.log('  wire trace (INFO checks from the mock server):');
  const shown = wire.slice(0, 60);
  for (const c of shown) {
    let extra = '';
    const d = c.details ?? {};
    // Show the status code and a short body for responses, which is what tells why a
    // request went wrong (406, 400 "Invalid or missing session ID", ...).
    if (typeof d.statusCode === 'number' && d.statusCode >= 400 && d.body !== undefined) {
      extra = ` -> ${clip(oneLine(typeof d.body === 'string' ? d.body : JSON.stringify(d.body)), 200)}`;
    }
    console.log(`    ${c.timestamp ?? ''} [${c.id}] ${c.description ?? ''}${extra}`);
  }
  if (wire.length > shown.length) console.log(`    … ${wire.length - shown.length} more INFO checks in ${file}`);
}
