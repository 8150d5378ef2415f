// The TypeScript test actor: a counter, its address, what the head told
// it, the calls of `calling.ts`, storage and sockets through the SDK.

import { type Actor, type Conn, address, caller, chain, sockets, storage, values } from '@wasmkeep/sdk';
import { call, many } from './calling.ts';

function count(): number {
  return storage.getJson<number>('count') ?? 0;
}

export default class Probe implements Actor {
  /** Events this instance ran: lost at hibernation, unlike storage. */
  events = 0;

  async onRequest(request: Request): Promise<Response> {
    this.events += 1;
    const url = new URL(request.url);
    switch (url.pathname) {
      case '/count':
        storage.putJson('count', count() + 1);
        return Response.json({ count: count(), events: this.events });
      case '/peek':
        return Response.json({ count: count(), events: this.events });
      case '/address':
        return new Response(address());
      case '/whoami':
        return Response.json({ caller: caller(request) ?? null, chain: chain(request) ?? null, method: request.method, body: (await request.arrayBuffer()).byteLength });
      case '/value':
        return new Response(values.get(url.searchParams.get('name') ?? '') ?? 'unset');
      case '/trap-after-write':
        storage.putJson('count', count() + 100);
        throw new Error('the probe throws on purpose');
      case '/call':
        return call(url);
      case '/many':
        return many(url);
      case '/fetch': {
        // Outbound HTTP, through the host's egress.
        try {
          const answer = await fetch(url.searchParams.get('url') ?? '');
          return Response.json({ status: answer.status, body: await answer.text() });
        } catch (e) {
          return Response.json({ error: e instanceof Error ? e.message : String(e) });
        }
      }
      case '/sockets':
        return Response.json(sockets.list().map(String));
      default:
        return new Response('no such path\n', { status: 404 });
    }
  }

  onWebSocketOpen(conn: Conn, path: string): void {
    if (path.includes('refuse')) throw new Error('refused by the probe');
    sockets.send(conn, `open ${path}`);
  }

  onWebSocketMessage(conn: Conn, message: string | Uint8Array): void {
    sockets.send(conn, typeof message === 'string' ? `echo ${message}` : message);
  }

  onWebSocketClose(_conn: Conn, code: number, reason: string): void {
    storage.putJson('closed', { code, reason });
  }
}
