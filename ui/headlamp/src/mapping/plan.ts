/**
 * The plan: a server-side dry run of the TalosOperation create, read as the CLI reads it
 * (ichor/cli/kube.py and upgrades.py).
 *
 * A denial by Ichor's webhook (``admission webhook "<name>.ichor.dev" denied the request:
 * ...``) is a refusal of the rules and is shown as the server worded it. The denial names
 * a refusal ``override: true`` would pass among its Status causes, which the CLI reads;
 * Headlamp's request layer keeps only the Status message, so the plugin reads the fixed
 * words the webhook says it in (``OVERRIDABLE_MARK``), and they alone make the override
 * checkbox appear. Admission warnings (``Warning: 299 - "..."``) go with an
 * accepted plan. Anything else is an error of the request, shown as one.
 */

import { API_VERSION, Component } from '../api-types';

/**
 * The webhook's words when the override verb would pass a refusal: ichor/api/kinds.py's
 * OVERRIDE_WOULD_PASS_WORDS, kept equal by tests/unit/webhook/test_override_cause.py.
 */
export const OVERRIDABLE_MARK = '`override: true` on the TalosOperation would pass';

export type PlanAnswer =
  | { kind: 'accepted'; warnings: string[] }
  | { kind: 'refused'; message: string; webhook: string; overridable: boolean }
  | { kind: 'error'; message: string; status?: number };

export interface OperationBody {
  apiVersion: string;
  kind: 'TalosOperation';
  metadata: { generateName: string };
  spec: {
    clusterRef: { name: string };
    type: Component;
    version?: string;
    override?: boolean;
  };
}

/** The operation the CLI would create (``operation_body``): same name prefix, same spec. */
export function operationBody(
  cluster: string,
  type: Component,
  version: string | null,
  override: boolean
): OperationBody {
  const spec: OperationBody['spec'] = { clusterRef: { name: cluster }, type };
  if (version !== null && type !== 'cni') {
    spec.version = version;
  }
  if (override) {
    spec.override = true;
  }
  return {
    apiVersion: API_VERSION,
    kind: 'TalosOperation',
    metadata: { generateName: `${cluster}-${type}-` },
    spec,
  };
}

const WARNING = /\d{3} [^ ]+ "((?:[^"\\]|\\.)*)"/g;

/** The admission warnings of a response's ``Warning`` header(s), in order. */
export function parseWarnings(header: string | null | undefined): string[] {
  if (!header) {
    return [];
  }
  const found: string[] = [];
  for (const match of header.matchAll(WARNING)) {
    found.push(match[1].replace(/\\"/g, '"').replace(/\\\\/g, '\\'));
  }
  return found;
}

const DENIED = /(?:^|\s-\s)admission webhook "([^"]+)" denied the request: ([\s\S]*)$/;

/** Ichor's webhook's refusal in an API error's text, or null when it is none. */
export function readDenial(text: string): { webhook: string; message: string } | null {
  const match = DENIED.exec(text);
  if (!match || !match[1].endsWith('.ichor.dev')) {
    return null;
  }
  return { webhook: match[1], message: match[2] };
}

/** A failed dry run or create, as Headlamp's request layer reports it. */
export function readFailure(error: unknown): PlanAnswer {
  const text =
    error instanceof Error
      ? error.message
      : typeof error === 'string'
      ? error
      : String((error as { message?: unknown })?.message ?? error);
  const status = (error as { status?: unknown })?.status;
  const denial = readDenial(text);
  if (denial) {
    return {
      kind: 'refused',
      webhook: denial.webhook,
      message: denial.message,
      overridable: denial.message.includes(OVERRIDABLE_MARK),
    };
  }
  return {
    kind: 'error',
    message: text.replace(/^\s*-\s*/, '') || 'the request failed',
    ...(typeof status === 'number' ? { status } : {}),
  };
}
