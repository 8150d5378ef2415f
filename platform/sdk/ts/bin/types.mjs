#!/usr/bin/env node
// Regenerates what the SDK derives from the repository's WIT package:
// `wit/` (the package with WASI at 0.2.10, the newest componentize-js
// 0.23 knows; the host links guests of 0.2.6 to 0.2.12) and `types/` (jco's declarations of the `wasmkeep:actor`
// modules). With `--check`, compares instead and fails when they differ.
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const sdk = join(dirname(fileURLToPath(import.meta.url)), '..');
const repoWit = join(sdk, '../../../wit');
const check = process.argv.includes('--check');

/// WASI versions past the one componentize-js knows, in package names and
/// feature gates alike, become that one.
const NEWER_WASI = /0\.2\.1[1-9]/g;
const GUEST_WASI = '0.2.10';

function files(dir) {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? files(path) : [path];
  });
}

function generate(into) {
  cpSync(repoWit, join(into, 'wit'), { recursive: true });
  for (const file of files(join(into, 'wit'))) {
    writeFileSync(file, readFileSync(file, 'utf8').replace(NEWER_WASI, GUEST_WASI));
  }
  const jco = join(sdk, 'node_modules/@bytecodealliance/jco/dist/jco.js');
  execFileSync(process.execPath, [jco, 'guest-types', join(into, 'wit'), '--world-name', 'actor-core', '-o', join(into, 'types'), '--quiet'], {
    stdio: ['ignore', 'ignore', 'inherit'],
  });
}

if (check) {
  const fresh = mkdtempSync(join(tmpdir(), 'wasmkeep-sdk-types-'));
  try {
    generate(fresh);
    const stale = [];
    for (const dir of ['wit', 'types']) {
      const want = files(join(fresh, dir)).map((f) => relative(fresh, f)).sort();
      let have = [];
      try {
        have = files(join(sdk, dir)).map((f) => relative(sdk, f)).sort();
      } catch {}
      for (const f of new Set([...want, ...have])) {
        const a = want.includes(f) ? readFileSync(join(fresh, f), 'utf8') : null;
        const b = have.includes(f) ? readFileSync(join(sdk, f), 'utf8') : null;
        if (a !== b) stale.push(f);
      }
    }
    if (stale.length) {
      console.error(`platform/sdk/ts: ${stale.join(', ')} differ from the WIT package; run \`npm run types\``);
      process.exit(1);
    }
  } finally {
    rmSync(fresh, { recursive: true, force: true });
  }
} else {
  rmSync(join(sdk, 'wit'), { recursive: true, force: true });
  rmSync(join(sdk, 'types'), { recursive: true, force: true });
  generate(sdk);
}
