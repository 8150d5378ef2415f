// The app's front: every request outside `/actor/`.
//
// - `GET /` says what the app does;
// - `GET /visits/<name>` counts one more visit on the counter `<name>`
//   and answers the count. The counter class is internal: only this
//   front reaches it, never a client through `/actor/`.

import { CallError, type Front, actors } from '@wasmkeep/sdk/front';

export default {
  async fetch(request) {
    const url = new URL(request.url);
    let segments: string[];
    try {
      segments = url.pathname.split('/').slice(1).map(decodeURIComponent);
    } catch {
      return new Response('the path is not UTF-8 once decoded\n', { status: 400 });
    }
    if (request.method === 'GET' && url.pathname === '/') {
      return new Response('hello: GET /visits/<name> counts the visits of <name>\n');
    }
    if (request.method === 'GET' && segments.length === 2 && segments[0] === 'visits' && segments[1] !== '') {
      try {
        return await actors.call('counter', segments[1], '/');
      } catch (e) {
        if (e instanceof CallError) return new Response(`the counter did not answer: ${e.message}\n`, { status: 502 });
        throw e;
      }
    }
    return new Response('not found\n', { status: 404 });
  },
} satisfies Front;
