#!/usr/bin/env node
// The SDK's own tests: its derived WIT and types are fresh, it type-checks,
// and its unit tests (test/*.test.ts, bundled with the host's interfaces
// replaced by the fakes in test/fakes/) pass under node's test runner.

import { spawnSync } from 'node:child_process';
import { mkdirSync, readdirSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { rolldown } from 'rolldown';

const sdk = join(dirname(fileURLToPath(import.meta.url)), '..');

function run(what, args) {
  const env = { ...process.env, WASMKEEP_HEAD_CASES: join(sdk, '../../../spec/head-cases.json') };
  const r = spawnSync(process.execPath, args, { cwd: sdk, stdio: 'inherit', env });
  if (r.status !== 0) {
    console.error(`sdk tests: ${what} failed`);
    process.exit(1);
  }
}

run('the WIT and types check', [join(sdk, 'bin/types.mjs'), '--check']);
const tsc = join(sdk, 'node_modules/typescript/bin/tsc');
run('tsc of the sources', [tsc, '-p', sdk, '--pretty', 'false']);
run('tsc of the tests', [tsc, '-p', join(sdk, 'test'), '--pretty', 'false']);

// `wasmkeep:actor/<interface>@0.2.0` resolves to `test/fakes/<interface>.ts`.
const fakes = {
  name: 'wasmkeep-fakes',
  resolveId(id) {
    const m = id.match(/^wasmkeep:actor\/([a-z-]+)@0\.2\.0$/);
    return m ? join(sdk, 'test/fakes', `${m[1]}.ts`) : null;
  },
};
const out = join(sdk, 'build/test');
rmSync(out, { recursive: true, force: true });
mkdirSync(out, { recursive: true });
const tests = readdirSync(join(sdk, 'test')).filter((f) => f.endsWith('.test.ts'));
for (const test of tests) {
  const build = await rolldown({ input: join(sdk, 'test', test), platform: 'node', plugins: [fakes], logLevel: 'silent' });
  await build.write({ file: join(out, test.replace(/\.ts$/, '.mjs')), format: 'esm', codeSplitting: false });
  await build.close();
}
run('the unit tests', ['--test', ...tests.map((t) => join(out, t.replace(/\.ts$/, '.mjs')))]);
