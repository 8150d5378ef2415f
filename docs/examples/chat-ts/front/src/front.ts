// The chat's front.
//
// - `GET /` serves the page;
// - `POST /login` with the form field `user` (1–32 of letters, digits,
//   `-`, `_`) answers `{"token": …}`: the user and an HMAC-SHA256 of it
//   keyed with the app's `TOKEN_SECRET`;
// - `GET /rooms/<room>/ws?token=…`, a WebSocket upgrade, checks the token
//   and hands the socket to the room (internal), naming the user in the
//   path's query; a bad or missing token is `403` before any socket opens.

import { type Front, handOff, isWebSocket, values } from '@wasmkeep/sdk/front';
import page from './page.html';

const USER = /^[A-Za-z0-9_-]{1,32}$/;

/** The signing key, from the app's required value (admission checked it is set). */
async function key(): Promise<CryptoKey | undefined> {
  const secret = values.get('TOKEN_SECRET');
  if (secret === undefined) return undefined;
  return crypto.subtle.importKey('raw', new TextEncoder().encode(secret), { name: 'HMAC', hash: 'SHA-256' }, false, ['sign', 'verify']);
}

const hex = (bytes: ArrayBuffer) => [...new Uint8Array(bytes)].map((b) => b.toString(16).padStart(2, '0')).join('');

async function login(request: Request): Promise<Response> {
  const user = new URLSearchParams(await request.text()).get('user') ?? '';
  if (!USER.test(user)) return new Response("user: 1 to 32 of letters, digits, '-' and '_'\n", { status: 400 });
  const signing = await key();
  if (!signing) return new Response('TOKEN_SECRET is not set\n', { status: 503 });
  const tag = await crypto.subtle.sign('HMAC', signing, new TextEncoder().encode(user));
  return Response.json({ token: `${user}.${hex(tag)}` });
}

/** The user a token signs, if it is valid (checked in constant time by `verify`). */
async function verify(token: string): Promise<string | undefined> {
  const dot = token.lastIndexOf('.');
  const [user, tag] = [token.slice(0, dot), token.slice(dot + 1)];
  if (dot < 0 || !USER.test(user) || !/^([0-9a-f]{2})+$/.test(tag)) return undefined;
  const signing = await key();
  if (!signing) return undefined;
  const bytes = new Uint8Array(tag.match(/../g)!.map((h) => parseInt(h, 16)));
  return (await crypto.subtle.verify('HMAC', signing, bytes, new TextEncoder().encode(user))) ? user : undefined;
}

async function join(request: Request, url: URL, room: string): Promise<Response> {
  const user = await verify(url.searchParams.get('token') ?? '');
  if (user === undefined) return new Response('a valid token is required: POST /login first\n', { status: 403 });
  if (!isWebSocket(request)) return new Response('this is a WebSocket endpoint\n', { status: 426 });
  // The room trusts the path: only the front can put a socket there.
  return handOff('room', room, `/join?user=${user}`);
}

export default {
  async fetch(request) {
    const url = new URL(request.url);
    const segments = url.pathname.split('/').slice(1).map(decodeURIComponent);
    if (request.method === 'GET' && url.pathname === '/') {
      return new Response(page, { headers: { 'content-type': 'text/html; charset=utf-8' } });
    }
    if (request.method === 'POST' && url.pathname === '/login') return login(request);
    if (request.method === 'GET' && segments.length === 3 && segments[0] === 'rooms' && segments[1] !== '' && segments[2] === 'ws') {
      return join(request, url, segments[1]);
    }
    return new Response('not found\n', { status: 404 });
  },
} satisfies Front;
