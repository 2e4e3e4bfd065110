/** A JSON call to the API: status and body (parsed when it is a JSON object, else text). */
export async function apiCall(base: string, method: string, p: string, body?: unknown): Promise<{ status: number; json: any }> {
  const res = await fetch(`${base}${p}`, {
    method,
    // Every mutating route wants a JSON type, even without a body (api/crossSite.ts).
    headers: method === 'GET' ? {} : { 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, json: text.startsWith('{') ? JSON.parse(text) : text };
}
