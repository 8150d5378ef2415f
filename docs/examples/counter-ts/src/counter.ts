// A counter per actor name.
//
// - `GET /actor/counter/<name>/` adds one and answers the new count;
// - `GET /actor/counter/<name>/peek` answers it without adding;
// - `DELETE /actor/counter/<name>/` deletes the counter.

import { type Actor, StorageError, deleteSelf, storage } from '@wasmkeep/sdk';

export default class Counter implements Actor {
  onRequest(request: Request): Response {
    const { pathname } = new URL(request.url);
    try {
      const count = storage.getJson<number>('count') ?? 0;
      if (request.method === 'GET' && pathname === '/') {
        storage.putJson('count', count + 1);
        return new Response(String(count + 1));
      }
      if (request.method === 'GET' && pathname === '/peek') {
        return new Response(String(count));
      }
      if (request.method === 'DELETE' && pathname === '/') {
        deleteSelf();
        return new Response(null, { status: 204 });
      }
      return new Response('not found\n', { status: 404 });
    } catch (e) {
      if (e instanceof StorageError) return new Response(`${e.message}\n`, { status: 503 });
      throw e;
    }
  }
}
