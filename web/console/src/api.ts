// The console's client of the node's public HTTP APIs (REST /v1 and
// /metrics). With a login, every request carries the user's credentials
// in an Authorization header (Basic for a user and password, Bearer for
// an API token), exactly as any REST client sends them; the browser's
// own credentials are then left out, so that it never shows its own
// password prompt.

export class ApiError extends Error {
  constructor(
    public status: number,
    public code: string,
    message: string,
  ) {
    super(message);
  }
}

const storeKey = 'hermes.console.auth';
let authorization: string | null = sessionStorage.getItem(storeKey);
let onUnauthenticated: () => void = () => {};

export function setUnauthenticatedHandler(f: () => void) {
  onUnauthenticated = f;
}

export function basic(user: string, password: string): string {
  const bytes = new TextEncoder().encode(`${user}:${password}`);
  let bin = '';
  for (const b of bytes) bin += String.fromCharCode(b);
  return 'Basic ' + btoa(bin);
}

export function bearer(token: string): string {
  return 'Bearer ' + token.trim();
}

export function setAuthorization(a: string | null) {
  authorization = a;
  if (a) sessionStorage.setItem(storeKey, a);
  else sessionStorage.removeItem(storeKey);
}

export function hasAuthorization(): boolean {
  return authorization !== null;
}

async function request(method: string, path: string, body?: unknown, auth = authorization): Promise<Response> {
  const headers: Record<string, string> = { Accept: 'application/json' };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  if (auth) headers['Authorization'] = auth;
  return fetch(path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    credentials: auth ? 'omit' : 'same-origin',
    cache: 'no-store',
  });
}

async function toError(resp: Response): Promise<ApiError> {
  let code = 'HTTP_' + resp.status;
  let message = resp.statusText || 'request failed';
  try {
    const j = await resp.json();
    if (j?.error) {
      code = j.error.code ?? code;
      message = j.error.message ?? message;
    }
  } catch {
    // not JSON
  }
  return new ApiError(resp.status, code, message);
}

/** Calls a JSON API; a 401 logs the user out. */
export async function api<T>(method: string, path: string, body?: unknown): Promise<T> {
  const resp = await request(method, path, body);
  if (!resp.ok) {
    const err = await toError(resp);
    if (resp.status === 401) onUnauthenticated();
    throw err;
  }
  if (resp.status === 204) return undefined as T;
  return (await resp.json()) as T;
}

/** Checks credentials: the principal they name. */
export async function login(auth: string): Promise<WhoAmI> {
  const resp = await request('GET', '/v1/whoami', undefined, auth);
  if (!resp.ok) throw await toError(resp);
  return (await resp.json()) as WhoAmI;
}

export async function text(path: string): Promise<{ ok: boolean; status: number; body: string }> {
  const resp = await request('GET', path);
  if (resp.status === 401) onUnauthenticated();
  return { ok: resp.ok, status: resp.status, body: await resp.text() };
}

export const enc = encodeURIComponent;

// The shapes of the answers the console reads (see /openapi.json).

export interface WhoAmI {
  principal: string;
  via: string;
  auth_required: boolean;
}

export interface ConsoleConfig {
  auth_required: boolean;
}

export interface Partition {
  partition: number;
  start_offset: number;
  end_offset: number;
  size_bytes: number;
}

export interface TopicConfig {
  partitions: number;
  retention_ms: number;
  retention_bytes: number;
  max_message_bytes: number;
  default_mode: string;
  segment_bytes: number;
  replication_factor: number;
}

export interface Topic {
  name: string;
  config: TopicConfig;
  partitions: Partition[];
}

export interface Placement {
  partition: number;
  leader: string;
  leader_term: number;
  replicas: string[];
  local: boolean;
}

export interface Header {
  key?: string;
  key_base64?: string;
  value?: string;
  value_base64?: string;
}

export interface StoredRecord {
  partition: number;
  offset: number;
  timestamp: string;
  timestamp_unix_nano: number;
  message_id: string;
  key?: string;
  key_base64?: string;
  headers?: Header[];
  payload?: string;
  payload_base64?: string;
}

export interface FetchResponse {
  records: StoredRecord[];
  next_offset: number;
  high_watermark: number;
  start_offset: number;
}

export interface GroupSummary {
  group: string;
  members: number;
  topics: string[];
}

export interface GroupMember {
  member_id: string;
  client_id: string;
  topic: string;
  partitions: number[];
}

export interface GroupPartition {
  topic: string;
  partition: number;
  committed: number;
  high_watermark: number;
  lag: number;
  owner: string;
  pending_acks: number;
}

export interface Group {
  group: string;
  generation: number;
  members: GroupMember[];
  partitions: GroupPartition[];
}

export interface ClusterNode {
  id: string;
  grpc: string;
  http: string;
  kafka?: string;
  ready?: boolean;
}

export interface ClusterPartition {
  topic: string;
  partition: number;
  leader: string;
  replicas: string[];
  target?: string[];
  lag?: { [node: string]: number };
  high_watermark: number;
  leaderless: boolean;
  under_replicated: boolean;
}

export interface ClusterStatus {
  node_id: string;
  metadata_leader: string;
  nodes: ClusterNode[];
  partitions: ClusterPartition[];
  leaderless: number;
  under_replicated: number;
}

export interface PublishAck {
  mode: string;
  records: { partition: number; offset: number; message_id: string }[];
}
