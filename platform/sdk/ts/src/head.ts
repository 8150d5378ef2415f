// The `x-wasmkeep-` head: the header range the host reserves, the names
// in it, how actor names are encoded in it, and parsers for the values a
// guest reads. Only the host sets these headers: it removes the whole
// range from what clients send and from what a caller puts on a call, so
// a guest can trust what it reads here.
//
// This copy of the codec keeps the SDK free of the host; its tests and the
// host's read the same cases, `spec/head-cases.json`.

/** The reserved prefix, lowercase (header names compare case-insensitively). */
export const PREFIX = 'x-wasmkeep-';

/** The header names the host uses. */
export const HEAD = {
  /** Who calls: `<tenant>/<class>/<encoded name>`, or `<tenant>/_front/main`. */
  caller: 'x-wasmkeep-caller',
  /** The actors waiting on the call, oldest first, comma separated. */
  chain: 'x-wasmkeep-chain',
  /** The app the event belongs to: `<tenant>/<app>`. */
  app: 'x-wasmkeep-app',
  target: 'x-wasmkeep-target',
  deadline: 'x-wasmkeep-deadline',
  /** The mark on a WebSocket upgrade kept aside for the front. */
  upgrade: 'x-wasmkeep-upgrade',
  handoffClass: 'x-wasmkeep-handoff-class',
  handoffName: 'x-wasmkeep-handoff-name',
  handoffPath: 'x-wasmkeep-handoff-path',
  internal: 'x-wasmkeep-internal',
  error: 'x-wasmkeep-error',
  tail: 'x-wasmkeep-tail',
} as const;

/** The value of the upgrade mark, exactly. */
export const UPGRADE_WEBSOCKET = 'websocket';

const CLASS_NAME_MAX = 63;
const ACTOR_NAME_MAX = 512;
const FRONT_CLASS = '_front';
const FRONT_NAME = 'main';

/** Whether header `name` is in the reserved range (case-insensitively). */
export function isReserved(name: string): boolean {
  return name.length >= PREFIX.length && name.slice(0, PREFIX.length).toLowerCase() === PREFIX;
}

const UNRESERVED = /^[A-Za-z0-9\-._~]$/;

/**
 * Percent-encodes an actor name as the head and URL paths carry it: every
 * byte but ASCII letters, digits and `-._~` becomes `%XX` (uppercase hex).
 */
export function encodeName(name: string): string {
  let out = '';
  for (const byte of new TextEncoder().encode(name)) {
    const c = String.fromCharCode(byte);
    out += UNRESERVED.test(c) ? c : `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out;
}

/**
 * Decodes an encoded actor name. Strict: every `%` must begin a `%XX`
 * escape, and the result must be UTF-8. `undefined` otherwise.
 */
export function decodeName(encoded: string): string | undefined {
  const bytes: number[] = [];
  for (let i = 0; i < encoded.length; i++) {
    const c = encoded.charCodeAt(i);
    if (c === 0x25) {
      const hex = encoded.slice(i + 1, i + 3);
      if (!/^[0-9A-Fa-f]{2}$/.test(hex)) return undefined;
      bytes.push(parseInt(hex, 16));
      i += 2;
    } else {
      bytes.push(...new TextEncoder().encode(encoded[i]));
    }
  }
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(new Uint8Array(bytes));
  } catch {
    return undefined;
  }
}

function isApp(s: string): boolean {
  return s.length > 0 && s.length <= CLASS_NAME_MAX && /^[a-z0-9\-_]+$/.test(s);
}

function isClass(s: string): boolean {
  return /^[a-z]/.test(s) && isApp(s);
}

function isActorName(s: string): boolean {
  // eslint-disable-next-line no-control-regex
  return s.length > 0 && new TextEncoder().encode(s).length <= ACTOR_NAME_MAX && !/[\u0000-\u001f\u007f-\u009f]/.test(s);
}

/** An actor of the app, as the head names one: its class and decoded name. */
export interface ActorRef {
  class: string;
  name: string;
}

/** Who calls an actor from inside the app. */
export type Caller = { tenant: string; front: true } | { tenant: string; front: false; actor: ActorRef };

function splitOnce(s: string, sep: string): [string, string] | undefined {
  const i = s.indexOf(sep);
  return i < 0 ? undefined : [s.slice(0, i), s.slice(i + 1)];
}

function parseActor(value: string): ActorRef | undefined {
  const parts = splitOnce(value, '/');
  if (!parts) return undefined;
  const name = decodeName(parts[1]);
  return name !== undefined && isClass(parts[0]) && isActorName(name) ? { class: parts[0], name } : undefined;
}

/** Parses a caller value; `undefined` if it is not valid. */
export function parseCaller(value: string): Caller | undefined {
  const parts = splitOnce(value, '/');
  if (!parts || !isClass(parts[0])) return undefined;
  const [tenant, rest] = parts;
  if (rest === `${FRONT_CLASS}/${FRONT_NAME}`) return { tenant, front: true };
  const actor = parseActor(rest);
  return actor ? { tenant, front: false, actor } : undefined;
}

/** Parses a chain value (empty for none); `undefined` if it is not valid. */
export function parseChain(value: string): ActorRef[] | undefined {
  if (value === '') return [];
  const actors = value.split(',').map(parseActor);
  return actors.every((a) => a !== undefined) ? (actors as ActorRef[]) : undefined;
}

/** Parses an app value into its tenant and app; `undefined` if not valid. */
export function parseApp(value: string): { tenant: string; app: string } | undefined {
  const parts = splitOnce(value, '/');
  return parts && isClass(parts[0]) && isApp(parts[1]) ? { tenant: parts[0], app: parts[1] } : undefined;
}

/** Who calls this event: absent for a client outside the app. */
export function caller(request: Request): Caller | undefined {
  const value = request.headers.get(HEAD.caller);
  return value === null ? undefined : parseCaller(value);
}

/** The actors waiting on this event, oldest first. */
export function chain(request: Request): ActorRef[] | undefined {
  const value = request.headers.get(HEAD.chain);
  return value === null ? undefined : parseChain(value);
}

/** The tenant and app the event belongs to. */
export function app(request: Request): { tenant: string; app: string } | undefined {
  const value = request.headers.get(HEAD.app);
  return value === null ? undefined : parseApp(value);
}

/**
 * Whether `request` is a WebSocket upgrade the host kept aside for the
 * front: the host sets the upgrade mark to exactly `websocket`, and no
 * client can. Answer it with `handOff`, or with any response to refuse it.
 */
export function isWebSocket(request: Request): boolean {
  return request.headers.get(HEAD.upgrade) === UPGRADE_WEBSOCKET;
}

/**
 * A front's answer handing a WebSocket to actor `name` of `cls`, whose
 * `onWebSocketOpen` sees `path` (path and query): a `426` with the three
 * hand-off headers, the name percent-encoded.
 */
export function handOff(cls: string, name: string, path: string): Response {
  return new Response('websocket upgrade required', {
    status: 426,
    headers: {
      'content-type': 'text/plain; charset=utf-8',
      [HEAD.handoffClass]: cls,
      [HEAD.handoffName]: encodeName(name),
      [HEAD.handoffPath]: path,
    },
  });
}
