// actors.call and actors.callMany over the host's interfaces (faked):
// errors typed, one entry per call in input order, none thrown.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { CallError, actors } from '../src/calls.ts';
import { answerWith, seen } from './fakes/actors.ts';
import { batches } from './fakes/calls.ts';

test('a call sends class/name and the request, and answers a Response', async () => {
  answerWith((address) => ({ status: 200, headers: [['x-who', new TextEncoder().encode(address)]], body: new TextEncoder().encode('ok') }));
  const r = await actors.call('room', 'lobby/main é', { method: 'POST', path: '/say?x=1', body: 'hi' });
  assert.equal(r.status, 200);
  assert.equal(r.headers.get('x-who'), 'room/lobby/main \u00c3\u00a9', 'the address as bytes, the name as written');
  assert.equal(await r.text(), 'ok');
  const [address, request] = seen[seen.length - 1];
  assert.equal(address, 'room/lobby/main é');
  assert.equal(request.method, 'POST');
  assert.equal(request.path, '/say?x=1');
  assert.deepEqual(request.body, new TextEncoder().encode('hi'));
});

test('a failed call rejects with a typed CallError', async () => {
  for (const [err, kind, reason] of [
    [{ tag: 'invalid-address' }, 'invalid-address', undefined],
    [{ tag: 'too-large' }, 'too-large', undefined],
    [{ tag: 'reentrant' }, 'reentrant', undefined],
    [{ tag: 'timeout' }, 'timeout', undefined],
    [{ tag: 'failed', val: 'the callee failed' }, 'failed', 'the callee failed'],
  ] as const) {
    answerWith(() => ({ err }));
    await assert.rejects(actors.call('c', 'n', '/'), (e: unknown) => {
      assert.ok(e instanceof CallError);
      assert.equal(e.kind, kind);
      assert.equal(e.reason, reason);
      return true;
    });
  }
});

test('callMany answers one entry per call, in input order, errors as values', async () => {
  answerWith((address) =>
    address.startsWith('bad') ? { err: { tag: 'invalid-address' } } : address.startsWith('slow') ? { err: { tag: 'timeout' } } : { status: 200, headers: [], body: new TextEncoder().encode(address) },
  );
  const results = await actors.callMany([
    ['a/1', '/x'],
    ['bad', '/x'],
    ['b/2', new Request('http://any/y', { method: 'DELETE' })],
    ['slow/3', { path: '/z' }],
  ]);
  assert.equal(results.length, 4);
  assert.ok(results[0] instanceof Response && (await results[0].text()) === 'a/1');
  assert.ok(results[1] instanceof CallError && results[1].kind === 'invalid-address');
  assert.ok(results[2] instanceof Response && (await results[2].text()) === 'b/2');
  assert.ok(results[3] instanceof CallError && results[3].kind === 'timeout');
  const batch = batches[batches.length - 1];
  assert.deepEqual(batch.map(([a, r]) => [a, r.method, r.path]), [['a/1', 'GET', '/x'], ['bad', 'GET', '/x'], ['b/2', 'DELETE', '/y'], ['slow/3', 'GET', '/z']]);
  assert.deepEqual(await actors.callMany([]), []);
});

test('an answer no Response can carry is a failed entry, not a throw', async () => {
  answerWith((address) => ({ status: address === 'odd/1' ? 600 : 205, headers: [], body: new TextEncoder().encode('x') }));
  const [odd, reset] = await actors.callMany([
    ['odd/1', '/'],
    ['reset/2', '/'],
  ]);
  assert.ok(odd instanceof CallError && odd.kind === 'failed' && odd.reason === 'the callee answered status 600, which a Response cannot carry');
  assert.ok(reset instanceof Response && reset.status === 205 && reset.body === null);
  await assert.rejects(actors.call('odd', '1', '/'), (e: unknown) => e instanceof CallError && e.kind === 'failed');
});
