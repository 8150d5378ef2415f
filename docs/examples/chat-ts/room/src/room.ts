// A chat room (internal: every socket it has was handed off by the front,
// so the user named in the open's path is the front's word).
//
// A socket sends `{"text": …}`; the room sends each message as
// `{"user": …, "text": …}` to all its sockets, keeps the last 50 and
// sends them to a socket that joins.

import { type Actor, type Conn, sockets, storage } from '@wasmkeep/sdk';

/** Messages kept for those who join. */
const HISTORY = 50;
/** The longest message text, in characters. */
const TEXT_MAX = 2000;

type Message = { user: string; text: string };

function history(): Message[] {
  return storage.getJson<Message[]>('history') ?? [];
}

export default class Room implements Actor {
  onRequest(): Response {
    return Response.json({ history: history(), sockets: sockets.list().length });
  }

  onWebSocketOpen(conn: Conn, path: string): void {
    const user = new URL(path, 'http://room').searchParams.get('user');
    if (!user) throw new Error('no user');
    storage.put(`user/${conn}`, user);
    for (const message of history()) sockets.send(conn, JSON.stringify(message));
  }

  onWebSocketMessage(conn: Conn, message: string | Uint8Array): void {
    if (typeof message !== 'string') return;
    let text: unknown;
    try {
      text = JSON.parse(message)?.text;
    } catch {
      return;
    }
    if (typeof text !== 'string') return;
    const said: Message = { user: storage.getText(`user/${conn}`) ?? '', text: [...text].slice(0, TEXT_MAX).join('') };
    const kept = [...history(), said].slice(-HISTORY);
    storage.putJson('history', kept);
    for (const other of sockets.list()) {
      try {
        sockets.send(other, JSON.stringify(said));
      } catch {
        // A socket that closed meanwhile, or one whose queue is full.
      }
    }
  }

  onWebSocketClose(conn: Conn): void {
    storage.delete(`user/${conn}`);
  }
}
