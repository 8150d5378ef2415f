// Standard Request / Response and the host's records, both ways.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { recordFromRequest, recordFromResponse, requestFromRecord, responseFromRecord } from '../src/convert.ts';

const bytes = (s: string) => new TextEncoder().encode(s);

test('a request event becomes a Request with its path, query, headers and body', async () => {
  const r = requestFromRecord({ method: 'POST', path: '/items/a%20b?x=1&y=2', headers: [['x-a', bytes('1')], ['x-bin', new Uint8Array([0xe9, 0x41])]], body: bytes('hello') });
  const url = new URL(r.url);
  assert.equal(r.method, 'POST');
  assert.equal(url.pathname, '/items/a%20b');
  assert.equal(url.searchParams.get('y'), '2');
  assert.equal(r.headers.get('x-a'), '1');
  assert.equal(r.headers.get('x-bin'), '\u00e9A', 'a byte a character');
  assert.equal(await r.text(), 'hello');
  // A GET's body cannot be carried; it is dropped, not an error.
  const get = requestFromRecord({ method: 'GET', path: '/', headers: [], body: bytes('ignored') });
  assert.equal(await get.text(), '');
});

test('what a call sends becomes a record', async () => {
  assert.deepEqual(await recordFromRequest('/peek?a=1'), { method: 'GET', path: '/peek?a=1', headers: [], body: new Uint8Array() });
  const fromRequest = await recordFromRequest(new Request('http://x/a/b?c=d', { method: 'PUT', headers: { 'x-k': 'v' }, body: 'data' }));
  assert.equal(fromRequest.method, 'PUT');
  assert.equal(fromRequest.path, '/a/b?c=d');
  assert.deepEqual(fromRequest.headers.find(([n]) => n === 'x-k'), ['x-k', bytes('v')]);
  assert.deepEqual(fromRequest.body, bytes('data'));
  const fromParts = await recordFromRequest({ method: 'POST', path: '/p', headers: { 'x-j': '\u00ff' }, body: new Uint8Array([1, 2, 3]) });
  assert.deepEqual(fromParts.headers, [['x-j', new Uint8Array([0xff])]]);
  assert.deepEqual(fromParts.body, new Uint8Array([1, 2, 3]));
});

test('a callee\'s answer becomes a Response, bodiless statuses without a body', async () => {
  const r = responseFromRecord({ status: 201, headers: [['x-b', new Uint8Array([0xe9])]], body: bytes('made') });
  assert.equal(r.status, 201);
  assert.equal(r.headers.get('x-b'), '\u00e9');
  assert.equal(await r.text(), 'made');
  for (const status of [204, 304]) {
    const empty = responseFromRecord({ status, headers: [], body: new Uint8Array() });
    assert.equal(empty.status, status);
    assert.equal(empty.body, null);
  }
});

test('an actor\'s Response becomes a record, header bytes kept', async () => {
  const record = await recordFromResponse(new Response('body', { status: 202, headers: { 'x-c': '\u00e9' } }));
  assert.equal(record.status, 202);
  assert.deepEqual(record.body, bytes('body'));
  assert.deepEqual(record.headers.find(([n]) => n === 'x-c'), ['x-c', new Uint8Array([0xe9])]);
});
