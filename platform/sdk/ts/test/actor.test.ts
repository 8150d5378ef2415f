// An actor's events through the export the build writes, storage and
// sockets over the host's interfaces (faked).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { type Actor, type Conn, SocketError, StorageError, __events } from '../src/actor.ts';
import { address, deleteSelf, sockets, storage } from '../src/index.ts';
import { kept } from './fakes/storage.ts';
import { closed, sent } from './fakes/sockets.ts';
import * as selfHost from './fakes/self.ts';

class Counter implements Actor {
  made = 0;
  async onRequest(request: Request): Promise<Response> {
    const n = (storage.getJson<number>('n') ?? 0) + 1;
    storage.putJson('n', n);
    this.made += 1;
    return new Response(`${n} ${this.made} ${new URL(request.url).pathname} ${await request.text()}`, { status: 201, headers: { 'x-n': String(n) } });
  }
  onWebSocketOpen(conn: Conn, path: string): void {
    if (path === '/no') throw new Error('not here');
    sockets.send(conn, `hello ${path}`);
  }
  onWebSocketMessage(conn: Conn, message: string | Uint8Array): void {
    sockets.send(conn, message);
  }
  onWebSocketClose(conn: Conn, code: number, reason: string): void {
    storage.put(`closed/${conn}`, `${code} ${reason}`);
  }
}

test('requests reach one instance and answers go back as records', async () => {
  const events = __events(Counter);
  const request = { method: 'POST', path: '/p', headers: [], body: new TextEncoder().encode('b') };
  for (const n of [1, 2]) {
    const answer = await events.onRequest(request);
    assert.equal(answer.status, 201);
    assert.equal(new TextDecoder().decode(answer.body), `${n} ${n} /p b`);
    assert.deepEqual(answer.headers.find(([name]) => name === 'x-n'), ['x-n', new TextEncoder().encode(String(n))]);
  }
  assert.equal(storage.getText('n'), '2');
});

test('socket events: a refused open is the host\'s err, messages of both kinds', async () => {
  const events = __events(Counter);
  await events.onWebsocketOpen(1n, '/chat');
  await assert.rejects(events.onWebsocketOpen(1n, '/no'), (e: unknown) => e === 'not here');
  await events.onWebsocketMessage(1n, { tag: 'text', val: 'hi' });
  await events.onWebsocketMessage(1n, { tag: 'binary', val: new Uint8Array([1]) });
  assert.deepEqual(sent.slice(-3), [[1n, 'hello /chat'], [1n, 'hi'], [1n, new Uint8Array([1])]]);
  await events.onWebsocketClose(1n, 1000, 'bye');
  assert.equal(storage.getText('closed/1'), '1000 bye');
  sockets.close(1n, 4000, 'done');
  assert.deepEqual(closed.at(-1), [1n, 4000, 'done']);
  assert.deepEqual(sockets.list(), [1n]);
  assert.throws(() => sockets.send(2n, 'x'), (e: unknown) => e instanceof SocketError && e.kind === 'no-such-socket');
});

test('storage: bytes, text, JSON, listing pages, typed refusals', () => {
  kept.clear();
  storage.put('a', new Uint8Array([1, 2]));
  storage.put('b', 'text');
  storage.putJson('c', { x: 1 });
  assert.deepEqual(storage.get('a'), new Uint8Array([1, 2]));
  assert.equal(storage.getText('b'), 'text');
  assert.deepEqual(storage.getJson('c'), { x: 1 });
  assert.equal(storage.get('missing'), undefined);
  const first = storage.list({ limit: 2 });
  assert.deepEqual(first.entries.map(([k]) => k), ['a', 'b']);
  assert.deepEqual(storage.list({ cursor: first.cursor }).entries.map(([k]) => k), ['c']);
  assert.throws(() => storage.put('big', 'x'.repeat(17)), (e: unknown) => e instanceof StorageError && e.kind === 'too-large' && e.reason.includes('over the limit'));
  storage.delete('a');
  assert.equal(storage.get('a'), undefined);
  storage.deleteAll();
  assert.equal(storage.list().entries.length, 0);
  assert.equal(address(), 'counter/a b');
  assert.equal(selfHost.deleted, false);
  deleteSelf();
  assert.equal(selfHost.deleted, true);
});
