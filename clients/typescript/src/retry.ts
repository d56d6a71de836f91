/**
 * Retry policy shared by admin calls, producers and consumers.
 *
 * @module
 */

import { HermesError } from "./errors.js";

/** How retriable failures are retried. */
export interface RetryOptions {
  /** Tries in total, the first included (default 15; at least 1). */
  maxAttempts?: number;
  /** Wait before the second try in ms (default 100); it doubles per try. */
  backoffMs?: number;
  /** Cap of the wait in ms (default 1000). */
  maxBackoffMs?: number;
}

/** A normalized {@link RetryOptions}. */
export interface RetryPolicy {
  readonly maxAttempts: number;
  readonly backoffMs: number;
  readonly maxBackoffMs: number;
}

/** Default tries in total. */
export const DEFAULT_RETRY_ATTEMPTS = 15;
/** Default first backoff in ms. */
export const DEFAULT_RETRY_BACKOFF_MS = 100;
/** Default backoff cap in ms. */
export const DEFAULT_RETRY_MAX_BACKOFF_MS = 1000;

/** Fills in defaults and makes the policy usable. */
export function retryPolicy(o: RetryOptions = {}): RetryPolicy {
  const maxAttempts = Math.max(1, Math.floor(o.maxAttempts ?? DEFAULT_RETRY_ATTEMPTS));
  const backoffMs = Math.max(1, o.backoffMs ?? DEFAULT_RETRY_BACKOFF_MS);
  const maxBackoffMs = Math.max(backoffMs, o.maxBackoffMs ?? DEFAULT_RETRY_MAX_BACKOFF_MS);
  return { maxAttempts, backoffMs, maxBackoffMs };
}

/**
 * The wait after failed attempt number `attempt` (1-based): exponential
 * backoff with ±20% jitter, never less than the broker's hint.
 */
export function retryDelay(p: RetryPolicy, attempt: number, hintMs = 0): number {
  let d = p.backoffMs;
  for (let i = 1; i < attempt && d < p.maxBackoffMs; i++) d *= 2;
  d = Math.min(d, p.maxBackoffMs);
  d = d * 0.8 + Math.random() * d * 0.4;
  return Math.max(d, hintMs);
}

/** Whether `err` may succeed when sent again. */
export function isRetriable(err: unknown): boolean {
  return err instanceof HermesError && err.retriable;
}

/** Resolves after `ms`, or rejects when `signal` aborts first. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = (): void => {
      clearTimeout(t);
      reject(signal!.reason);
    };
    const t = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}
