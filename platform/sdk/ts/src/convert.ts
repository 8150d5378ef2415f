// Between the standard `Request` / `Response` a guest writes against and
// the records the host's interfaces carry. Header values are bytes on the
// wire; they cross as Latin-1 strings, one character a byte, so no byte
// is lost either way.

/** The host's request record. */
export interface RequestRecord {
  method: string;
  path: string;
  headers: Array<[string, Uint8Array]>;
  body: Uint8Array;
}

/** The host's response record. */
export interface ResponseRecord {
  status: number;
  headers: Array<[string, Uint8Array]>;
  body: Uint8Array;
}

/** The origin of the URL an actor's `Request` carries (the path is what matters). */
export const ACTOR_ORIGIN = 'http://actor';

export function bytesToLatin1(bytes: Uint8Array): string {
  let s = '';
  for (const b of bytes) s += String.fromCharCode(b);
  return s;
}

export function latin1ToBytes(s: string): Uint8Array {
  const out = new Uint8Array(s.length);
  for (let i = 0; i < s.length; i++) out[i] = s.charCodeAt(i) & 0xff;
  return out;
}

function headerPairs(headers: Headers): Array<[string, Uint8Array]> {
  const pairs: Array<[string, Uint8Array]> = [];
  headers.forEach((value, name) => pairs.push([name, latin1ToBytes(value)]));
  return pairs;
}

function toHeaders(pairs: Array<[string, Uint8Array]>): Headers {
  const headers = new Headers();
  for (const [name, value] of pairs) headers.append(name, bytesToLatin1(value));
  return headers;
}

/** Bytes as a body (they are never a shared buffer's view here). */
function asBody(bytes: Uint8Array): BodyInit {
  return bytes as Uint8Array<ArrayBuffer>;
}

/** Methods whose requests have no body (the `Request` constructor refuses one). */
const BODILESS = new Set(['GET', 'HEAD']);

/** A request event as the standard `Request` an actor handles. */
export function requestFromRecord(record: RequestRecord): Request {
  const method = record.method.toUpperCase();
  const body = BODILESS.has(method) || record.body.length === 0 ? undefined : asBody(record.body);
  return new Request(ACTOR_ORIGIN + (record.path.startsWith('/') ? record.path : `/${record.path}`), {
    method: record.method,
    headers: toHeaders(record.headers),
    body,
  });
}

/** What a call sends: a path (a `GET`), a `Request`, or its parts. */
export type CallRequest = string | Request | { method?: string; path: string; headers?: HeadersInit; body?: BodyInit };

/** A call's request as the host's record (the body read whole). */
export async function recordFromRequest(request: CallRequest): Promise<RequestRecord> {
  if (typeof request === 'string') {
    return { method: 'GET', path: request, headers: [], body: new Uint8Array() };
  }
  if (request instanceof Request) {
    const url = new URL(request.url);
    const body = new Uint8Array(await request.arrayBuffer());
    return { method: request.method, path: url.pathname + url.search, headers: headerPairs(request.headers), body };
  }
  const headers = headerPairs(new Headers(request.headers));
  const body = request.body === undefined ? new Uint8Array() : new Uint8Array(await new Response(request.body).arrayBuffer());
  return { method: request.method ?? 'GET', path: request.path, headers, body };
}

/** Statuses whose responses have no body (the `Response` constructor refuses one). */
const NULL_BODY = new Set([204, 205, 304]);

/** Whether a `Response` can carry `status` (the constructor refuses the rest). */
export function isResponseStatus(status: number): boolean {
  return status >= 200 && status <= 599;
}

/**
 * A callee's answer as a standard `Response`. Its status must be one a
 * `Response` can carry (`isResponseStatus`); a 205's body, which a
 * `Response` cannot carry, is dropped.
 */
export function responseFromRecord(record: ResponseRecord): Response {
  const body = NULL_BODY.has(record.status) ? null : asBody(record.body);
  return new Response(body, { status: record.status, headers: toHeaders(record.headers) });
}

/** An actor's answer as the host's record (the body read whole). */
export async function recordFromResponse(response: Response): Promise<ResponseRecord> {
  const body = new Uint8Array(await response.arrayBuffer());
  return { status: response.status, headers: headerPairs(response.headers), body };
}

/**
 * The `err` of a host call, as the component's bindings throw it (its
 * `payload`, a variant with a `tag`); `undefined` for anything else thrown.
 */
export function hostError(thrown: unknown): { tag: string; val?: unknown } | undefined {
  const p = (thrown as { payload?: unknown })?.payload ?? thrown;
  return p && typeof p === 'object' && 'tag' in p ? (p as { tag: string; val?: unknown }) : undefined;
}
