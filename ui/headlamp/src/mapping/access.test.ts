import { describe, expect, it } from 'vitest';
import { accessFromError, accessFromReview, overrideControl } from './access';
import { PlanAnswer } from './plan';

const target = { namespace: 'default', name: 'prod' };
const passable: PlanAnswer = {
  kind: 'refused',
  webhook: 'w.ichor.dev',
  message: 'm',
  overridable: true,
};
const blocking: PlanAnswer = {
  kind: 'refused',
  webhook: 'w.ichor.dev',
  message: 'm',
  overridable: false,
};
const accepted: PlanAnswer = { kind: 'accepted', warnings: [] };

describe('accessFromReview', () => {
  it('is allowed only on status.allowed === true', () => {
    expect(accessFromReview({ status: { allowed: true } }, target)).toEqual({ state: 'allowed' });
    expect(accessFromReview({ status: { allowed: 'true' } }, target).state).toBe('error');
    expect(accessFromReview({}, target).state).toBe('error');
    expect(accessFromReview(null, target).state).toBe('error');
  });

  it('names the verb and the cluster, and the server reason when there is one', () => {
    const denied = accessFromReview({ status: { allowed: false, reason: '' } }, target);
    expect(denied).toEqual({
      state: 'denied',
      reason:
        'You do not hold the RBAC verb override on talosclusters.ichor.dev/prod in namespace default; ask an administrator to bind you to a role that grants it.',
    });
    const withReason = accessFromReview(
      { status: { allowed: false, reason: 'no RBAC policy matched' } },
      target
    );
    expect(withReason.state === 'denied' && withReason.reason).toContain(
      '(no RBAC policy matched)'
    );
  });

  it('keeps the override off when the check fails', () => {
    const failed = accessFromError(new Error('Request timed-out'), target);
    expect(failed.state).toBe('error');
    expect(failed.state === 'error' && failed.reason).toContain('Request timed-out');
  });
});

describe('overrideControl', () => {
  const denied = { state: 'denied' as const, reason: 'You do not hold it' };

  it('shows only after a refusal the server says the verb passes', () => {
    expect(overrideControl(null, false, { state: 'allowed' }).visible).toBe(false);
    expect(overrideControl(accepted, false, { state: 'allowed' }).visible).toBe(false);
    expect(overrideControl(blocking, false, { state: 'allowed' }).visible).toBe(false);
    expect(
      overrideControl({ kind: 'error', message: 'x' }, false, { state: 'allowed' }).visible
    ).toBe(false);
    expect(overrideControl(passable, false, { state: 'allowed' })).toEqual({
      visible: true,
      disabled: false,
    });
  });

  it('is disabled with the reason for a user without the verb, and while checking', () => {
    expect(overrideControl(passable, false, denied)).toEqual({
      visible: true,
      disabled: true,
      reason: 'You do not hold it',
    });
    expect(overrideControl(passable, false, { state: 'checking' })).toMatchObject({
      visible: true,
      disabled: true,
    });
    expect(overrideControl(passable, false, { state: 'error', reason: 'failed' })).toMatchObject({
      disabled: true,
      reason: 'failed',
    });
  });

  it('stays shown while ticked, so the tick can be taken back', () => {
    expect(overrideControl(accepted, true, { state: 'allowed' })).toEqual({
      visible: true,
      disabled: false,
    });
    expect(overrideControl(blocking, true, denied)).toMatchObject({
      visible: true,
      disabled: false,
    });
  });
});
