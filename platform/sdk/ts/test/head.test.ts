// The head codec against the cases the host's codec is tested on too.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { HEAD, PREFIX, decodeName, encodeName, handOff, isReserved, isWebSocket, parseApp, parseCaller, parseChain } from '../src/head.ts';

// bin/test.mjs says where the repository's cases are.
const cases = JSON.parse(readFileSync(process.env.WASMKEEP_HEAD_CASES ?? 'spec/head-cases.json', 'utf8'));

function section(name: string) {
  const s = cases[name];
  assert.ok(s !== undefined && (!Array.isArray(s) || s.length > 0), `spec/head-cases.json has no \`${name}\``);
  return s;
}

test('the names and the prefix are the host\'s', () => {
  assert.equal(PREFIX, section('prefix'));
  const names: Record<string, string> = section('names');
  const ours: Record<string, string> = {
    caller: HEAD.caller, chain: HEAD.chain, app: HEAD.app, target: HEAD.target, deadline: HEAD.deadline,
    upgrade: HEAD.upgrade, handoff_class: HEAD.handoffClass, handoff_name: HEAD.handoffName,
    handoff_path: HEAD.handoffPath, internal: HEAD.internal, error: HEAD.error, tail: HEAD.tail,
  };
  assert.deepEqual(ours, names);
  assert.equal(Object.keys(HEAD).length, Object.keys(names).length);
});

test('the reserved range', () => {
  for (const name of section('reserved').in_range) assert.ok(isReserved(name), name);
  for (const name of section('reserved').outside) assert.ok(!isReserved(name), name);
});

test('names encode and decode both ways', () => {
  for (const { name, encoded } of section('name_encoding')) {
    assert.equal(encodeName(name), encoded);
    assert.equal(decodeName(encoded), name);
  }
  for (const bad of section('bad_encodings')) assert.equal(decodeName(bad), undefined, bad);
});

test('caller values', () => {
  for (const c of section('caller')) {
    const got = parseCaller(c.value);
    if (c.error) assert.equal(got, undefined, c.value);
    else if (c.front) assert.deepEqual(got, { tenant: c.tenant, front: true });
    else assert.deepEqual(got, { tenant: c.tenant, front: false, actor: c.actor });
  }
});

test('chain values', () => {
  for (const c of section('chain')) {
    assert.deepEqual(parseChain(c.value), c.error ? undefined : c.actors, c.value);
  }
});

test('app values', () => {
  for (const c of section('app')) {
    assert.deepEqual(parseApp(c.value), c.error ? undefined : { tenant: c.tenant, app: c.app }, c.value);
  }
});

test('only the exact mark is a WebSocket', () => {
  const upgrade = section('upgrade');
  assert.ok(isWebSocket(new Request('http://front/', { headers: { [HEAD.upgrade]: upgrade.value } })));
  for (const not of upgrade.not) {
    // The Headers API trims a value's surrounding whitespace before a
    // guest sees it; the host sets the mark exactly, so a padded value
    // never arrives (the host's own codec refuses it).
    if (not.trim() !== not) {
      assert.equal(new Headers({ [HEAD.upgrade]: not }).get(HEAD.upgrade), not.trim());
      continue;
    }
    assert.ok(!isWebSocket(new Request('http://front/', { headers: { [HEAD.upgrade]: not } })), JSON.stringify(not));
  }
  assert.ok(!isWebSocket(new Request('http://front/')));
});

test('a hand-off is a 426 with the three headers', async () => {
  for (const c of section('handoff')) {
    const r = handOff(c.class, c.name, c.path);
    assert.equal(r.status, 426);
    for (const [name, value] of Object.entries(c.headers as Record<string, string>)) assert.equal(r.headers.get(name), value);
    assert.equal(await r.text(), 'websocket upgrade required');
  }
});
