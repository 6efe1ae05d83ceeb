/**
 * The override checkbox: whether it shows, and whether the signed-in user may tick it.
 *
 * It shows only after a refusal the server says the verb passes (or while ticked, so it
 * can be unticked). It is enabled only when a SelfSubjectAccessReview says the user
 * holds ``override`` on ``talosclusters.ichor.dev`` for this cluster; otherwise it is
 * disabled with the reason. The webhook checks the verb again on every write: the
 * checkbox is a courtesy, not the gate.
 */

import { PlanAnswer } from './plan';

export type Access =
  | { state: 'checking' }
  | { state: 'allowed' }
  | { state: 'denied'; reason: string }
  | { state: 'error'; reason: string };

export interface Target {
  namespace: string;
  name: string;
}

export function verbText({ namespace, name }: Target): string {
  return `the RBAC verb override on talosclusters.ichor.dev/${name} in namespace ${namespace}`;
}

/** The review's answer (``status.allowed``, ``status.reason``) as an Access. */
export function accessFromReview(review: unknown, target: Target): Access {
  const status = (
    review as { status?: { allowed?: unknown; reason?: unknown; evaluationError?: unknown } }
  )?.status;
  if (status?.allowed === true) {
    return { state: 'allowed' };
  }
  if (!status || typeof status.allowed !== 'boolean') {
    return {
      state: 'error',
      reason: `The access check gave no answer, so the override stays off (it needs ${verbText(
        target
      )}).`,
    };
  }
  const server = typeof status.reason === 'string' && status.reason ? ` (${status.reason})` : '';
  return {
    state: 'denied',
    reason: `You do not hold ${verbText(
      target
    )}${server}; ask an administrator to bind you to a role that grants it.`,
  };
}

export function accessFromError(error: unknown, target: Target): Access {
  const message = error instanceof Error ? error.message : String(error);
  return {
    state: 'error',
    reason: `The access check for ${verbText(
      target
    )} failed (${message}), so the override stays off.`,
  };
}

export interface OverrideControl {
  visible: boolean;
  disabled: boolean;
  /** Why it is disabled (shown next to it). */
  reason?: string;
}

/** The checkbox for the plan shown now, the user's tick, and the review's answer. */
export function overrideControl(
  plan: PlanAnswer | null,
  ticked: boolean,
  access: Access
): OverrideControl {
  const refusedPassable = plan?.kind === 'refused' && plan.overridable;
  if (!refusedPassable && !ticked) {
    return { visible: false, disabled: true };
  }
  if (access.state === 'allowed') {
    return { visible: true, disabled: false };
  }
  if (access.state === 'checking') {
    return {
      visible: true,
      disabled: true,
      reason: 'Checking whether you hold the override verb…',
    };
  }
  // A tick that is no longer allowed can still be removed.
  return { visible: true, disabled: !ticked, reason: access.reason };
}
