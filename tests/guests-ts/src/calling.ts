// `/call`, `/many` and `/sequential` for the TypeScript actor and front
// alike: what is called is in the query, what came back is answered as
// JSON, so the tests read both the same way (and as they read the Rust
// guests' answers, but for the errors' names: here the SDK's kinds).

import { actors, CallError } from '@wasmkeep/sdk/front';

type Json = Record<string, unknown>;

function errorOf(e: CallError): Json {
  return e.kind === 'failed' ? { error: 'failed', reason: e.reason } : { error: e.kind };
}

async function answerOf(r: Response): Promise<Json> {
  const body = new Uint8Array(await r.arrayBuffer());
  const text = new TextDecoder().decode(body.subarray(0, 200));
  return { status: r.status, len: body.length, body: text, headers: [...r.headers.keys()] };
}

function bytes(mb: number): Uint8Array<ArrayBuffer> {
  return new Uint8Array(mb << 20).fill(0x78);
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** One call to `to` (`class/name`) at `path`, with a body of `mb` MiB and a forged caller. */
export async function call(url: URL): Promise<Response> {
  const to = url.searchParams.get('to') ?? '';
  const slash = to.indexOf('/');
  const [cls, name] = slash < 0 ? [to, ''] : [to.slice(0, slash), to.slice(slash + 1)];
  const mb = Number(url.searchParams.get('mb') ?? 0);
  try {
    const r = await actors.call(cls, name, {
      method: mb > 0 ? 'POST' : 'GET',
      path: url.searchParams.get('path') ?? '/peek',
      headers: { 'x-wasmkeep-caller': 'forged' },
      body: mb > 0 ? bytes(mb) : undefined,
    });
    return Response.json(await answerOf(r));
  } catch (e) {
    if (e instanceof CallError) return Response.json(errorOf(e));
    throw e;
  }
}

/**
 * One `callMany`: to each of `to` (comma separated) at the matching entry
 * of `paths` (`|` separated) or at `path`, with the matching method of
 * `methods` (`GET` otherwise), each with a body of `mb` MiB; started
 * `after` milliseconds into the event.
 */
export async function many(url: URL): Promise<Response> {
  const q = url.searchParams;
  await sleep(Number(q.get('after') ?? 0));
  const to = q.get('to') ? q.get('to')!.split(',') : [];
  const paths = (q.get('paths') ?? '').split('|');
  const methods = (q.get('methods') ?? '').split('|');
  const mb = Number(q.get('mb') ?? 0);
  const entries: Array<[string, { method: string; path: string; body?: BodyInit }]> = to.map((address, i) => [
    address,
    {
      method: methods[i] || 'GET',
      path: paths[i] || q.get('path') || '/peek',
      body: mb > 0 ? bytes(mb) : undefined,
    },
  ]);
  const results = await actors.callMany(entries);
  const out: Json[] = [];
  for (const r of results) out.push(r instanceof CallError ? errorOf(r) : await answerOf(r));
  return Response.json(out);
}
