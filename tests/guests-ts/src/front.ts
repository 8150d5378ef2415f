// The TypeScript test front: the calls of `calling.ts`, hand-offs of
// WebSockets, values and the head.

import { type Front, handOff, isWebSocket, values } from '@wasmkeep/sdk/front';
import { call, many } from './calling.ts';

export default {
  async fetch(request: Request): Promise<Response> {
    const url = new URL(request.url);
    if (isWebSocket(request)) {
      const name = url.searchParams.get('name') ?? 'a';
      return handOff(url.searchParams.get('class') ?? 'ts', name, url.pathname + url.search);
    }
    switch (url.pathname) {
      case '/call':
        return call(url);
      case '/many':
        return many(url);
      case '/value':
        return new Response(values.get(url.searchParams.get('name') ?? '') ?? 'unset');
      case '/echo':
        return new Response(await request.text(), { headers: { 'x-method': request.method } });
      case '/fetch': {
        const answer = await fetch(url.searchParams.get('url') ?? '');
        return Response.json({ status: answer.status, body: await answer.text() });
      }
      case '/throw':
        throw new Error('the front throws on purpose');
      default:
        return new Response(`hello from the TypeScript front at ${url.pathname}\n`);
    }
  },
} satisfies Front;
