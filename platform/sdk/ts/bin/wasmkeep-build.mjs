#!/usr/bin/env node
// Builds a TypeScript or JavaScript project into a wasmkeep component:
// checks its types (tsc), bundles it with the SDK (rolldown), and makes
// the component (componentize-js), for the actor or the front world.
//
//   wasmkeep-build --world actor|front [--entry FILE] [--out FILE] [DIR]
//
// The project's entry is `--entry`, else package.json's `main` (else
// `src/index.ts`, `index.ts`, `src/index.js`, `index.js`); its default export is the
// actor's class, or the front (`{ fetch(request) }` or a function).
// Progress goes to stderr; a failure is one line, `wasmkeep-build: failed:
// …`, naming the file and line where there is one, and the exit status 1.

import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const sdk = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const WORLDS = { actor: 'actor-core', front: 'front-core' };

/** The one line a failure is: `wasmkeep-build: failed: …` (progress lines have no `failed:`). */
function fail(message) {
  console.error(`wasmkeep-build: failed: ${String(message).split('\n')[0]}`);
  process.exit(1);
}

/** A path as the user would type it: relative to where they are when inside. */
function shown(path) {
  const rel = relative(process.cwd(), path);
  return rel === '' ? '.' : rel.startsWith('..') ? path : rel;
}

function progress(message) {
  console.error(`wasmkeep-build: ${message}`);
}

function parseArgs(argv) {
  const args = { world: undefined, out: undefined, entry: undefined, dir: '.' };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--world') args.world = argv[++i];
    else if (a === '--out') args.out = argv[++i];
    else if (a === '--entry') args.entry = argv[++i];
    else if (a.startsWith('-')) fail(`unknown flag ${a} (usage: wasmkeep-build --world actor|front [--entry FILE] [--out FILE] [DIR])`);
    else args.dir = a;
  }
  if (!(args.world in WORLDS)) fail(`--world must be actor or front, not ${args.world ?? 'missing'}`);
  args.dir = resolve(args.dir);
  args.out = resolve(args.out ?? join(args.dir, 'dist', `${args.world}.wasm`));
  return args;
}

function entryOf(dir, given) {
  if (given !== undefined) {
    const path = resolve(dir, given);
    if (!existsSync(path)) fail(`--entry ${given}: no such file`);
    return path;
  }
  let main;
  try {
    main = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')).main;
  } catch (e) {
    fail(`${join(dir, 'package.json')}: ${e.message}`);
  }
  const candidates = main ? [main] : ['src/index.ts', 'index.ts', 'src/index.js', 'index.js'];
  const found = candidates.map((c) => join(dir, c)).find((p) => existsSync(p));
  if (!found) fail(`${join(dir, 'package.json')}: no entry (${candidates.join(', ')} not found)`);
  return found;
}

/** tsc's first error as `file:line:col: message (TSnnnn)`, and how many more. */
function firstTypeError(output, dir) {
  const errors = output.split('\n').filter((l) => /error TS\d+:/.test(l));
  if (errors.length === 0) return output.trim().split('\n')[0] || 'tsc failed';
  const m = errors[0].match(/^(.*)\((\d+),(\d+)\): error (TS\d+): (.*)$/);
  const more = errors.length > 1 ? ` (and ${errors.length - 1} more)` : '';
  if (!m) return errors[0] + more;
  const file = relative(process.cwd(), resolve(dir, m[1])) || m[1];
  return `${file}:${m[2]}:${m[3]}: ${m[5]} (${m[4]})${more}`;
}

function checkTypes(dir, entry, work) {
  let project = join(dir, 'tsconfig.json');
  if (!existsSync(project)) {
    project = join(work, 'tsconfig.json');
    const config = { extends: join(sdk, 'tsconfig.base.json'), include: [join(dir, '**/*.ts')], exclude: [join(dir, 'node_modules'), join(dir, 'dist')] };
    writeFileSync(project, JSON.stringify(config));
  }
  // Where npm put TypeScript: beside the SDK when the SDK is installed
  // from a package, inside it when it is linked from a checkout.
  const typescript = dirname(createRequire(import.meta.url).resolve('typescript/package.json'));
  const tsc = join(typescript, 'bin/tsc');
  const run = spawnSync(process.execPath, [tsc, '-p', project, '--noEmit', '--pretty', 'false'], { cwd: dir, encoding: 'utf8' });
  if (run.error) fail(`cannot run tsc: ${run.error.message}`);
  if (run.status !== 0) fail(firstTypeError(`${run.stdout}\n${run.stderr}`, dir));
}

async function bundle(entry, world, work) {
  const { rolldown } = await import('rolldown');
  const glue =
    world === 'actor'
      ? `import Actor from ${JSON.stringify(entry)};\nimport { __events } from ${JSON.stringify(join(sdk, 'src/actor.ts'))};\nexport const events = __events(Actor);\n`
      : `import front from ${JSON.stringify(entry)};\nimport { __serve } from ${JSON.stringify(join(sdk, 'src/front.ts'))};\n__serve(front);\n`;
  const input = join(work, `${world}-entry.ts`);
  writeFileSync(input, glue);
  const file = join(work, `${world}.js`);
  let imports = [];
  try {
    const build = await rolldown({
      input,
      external: [/^wasmkeep:/, /^wasi:/],
      platform: 'neutral',
      // `import page from './page.html'` is the file's text.
      moduleTypes: { '.html': 'text', '.txt': 'text' },
      logLevel: 'silent',
    });
    const { output } = await build.write({ file, format: 'esm', codeSplitting: false });
    imports = output.flatMap((chunk) => chunk.imports ?? []);
    await build.close();
  } catch (e) {
    fail(`bundling ${shown(entry)}: ${String(e.message ?? e).replace(/\s+/g, ' ').trim()}`);
  }
  // A front's world has no storage, sockets or self: say so here rather
  // than as the component's unresolved import.
  const actorOnly = imports.filter((i) => /^wasmkeep:actor\/(storage|sockets|self|events)@/.test(i));
  if (world === 'front' && actorOnly.length > 0) {
    fail(`${shown(entry)}: a front cannot use ${actorOnly.join(', ')} (import @wasmkeep/sdk/front, not @wasmkeep/sdk)`);
  }
  return file;
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const entry = entryOf(args.dir, args.entry);
  const work = join(args.dir, 'node_modules', '.wasmkeep-build');
  mkdirSync(work, { recursive: true });
  if (entry.endsWith('.ts')) {
    progress(`checking types of ${shown(args.dir)}`);
    checkTypes(args.dir, entry, work);
  }
  progress('bundling');
  const source = await bundle(entry, args.world, work);
  progress(`making the ${args.world} component (componentize-js, about 10 s)`);
  const { componentize } = await import('@bytecodealliance/componentize-js');
  let component;
  try {
    ({ component } = await componentize({
      sourcePath: source,
      witPath: join(sdk, 'wit'),
      worldName: WORLDS[args.world],
      // An actor has `fetch` and the standard `Request`/`Response`, not the
      // fetch event: its requests come through `wasmkeep:actor/events`.
      disableFeatures: args.world === 'actor' ? ['fetch-event'] : [],
    }));
  } catch (e) {
    fail(`componentize: ${String(e.message ?? e).replace(/\s+/g, ' ').trim()}`);
  }
  mkdirSync(dirname(args.out), { recursive: true });
  writeFileSync(args.out, component);
  progress(`wrote ${shown(args.out)} (${(component.length / 1048576).toFixed(1)} MiB)`);
}

try {
  await main();
} catch (e) {
  fail(`unexpected: ${e?.message ?? e}`);
}
