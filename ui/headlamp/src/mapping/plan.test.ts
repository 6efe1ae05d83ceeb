import { describe, expect, it } from 'vitest';
import { apiError, OVERRIDABLE_DENIAL, UNKNOWN_DENIAL } from '../fixtures/objects';
import { operationBody, parseWarnings, readDenial, readFailure } from './plan';

describe('operationBody', () => {
  it('is the operation `ichor upgrade` creates', () => {
    expect(operationBody('prod', 'kubernetes', 'v1.37.2', false)).toEqual({
      apiVersion: 'ichor.dev/v1alpha1',
      kind: 'TalosOperation',
      metadata: { generateName: 'prod-kubernetes-' },
      spec: { clusterRef: { name: 'prod' }, type: 'kubernetes', version: 'v1.37.2' },
    });
    expect(operationBody('prod', 'talos', 'v1.14.4', true).spec).toEqual({
      clusterRef: { name: 'prod' },
      type: 'talos',
      version: 'v1.14.4',
      override: true,
    });
  });

  it('gives a Cilium operation no version', () => {
    expect(operationBody('edge', 'cni', 'v9.9.9', false).spec).toEqual({
      clusterRef: { name: 'edge' },
      type: 'cni',
    });
  });
});

describe('parseWarnings', () => {
  it('reads every warning of a joined header, unescaped', () => {
    const header =
      '299 - "override by olivia (cilium-kubernetes): Kubernetes v1.37.2 is refused", ' +
      '299 - "a \\"quoted\\" word and a back\\\\slash"';
    expect(parseWarnings(header)).toEqual([
      'override by olivia (cilium-kubernetes): Kubernetes v1.37.2 is refused',
      'a "quoted" word and a back\\slash',
    ]);
  });

  it('reads none from nothing or from garbage', () => {
    expect(parseWarnings(null)).toEqual([]);
    expect(parseWarnings('')).toEqual([]);
    expect(parseWarnings('not a warning')).toEqual([]);
  });
});

describe('readDenial / readFailure', () => {
  it('takes the webhook sentence as it is, and the override mark from it', () => {
    const answer = readFailure(apiError(OVERRIDABLE_DENIAL));
    expect(answer).toEqual({
      kind: 'refused',
      webhook: 'taloscluster.ichor.dev',
      message: OVERRIDABLE_DENIAL,
      overridable: true,
    });
  });

  it('marks a refusal no override passes (an unknown version) as not overridable', () => {
    const answer = readFailure(apiError(UNKNOWN_DENIAL));
    expect(answer).toMatchObject({ kind: 'refused', overridable: false, message: UNKNOWN_DENIAL });
  });

  it('is not overridable when the server says the user lacks the verb', () => {
    const text =
      "Kubernetes v1.37.2 is refused. `override: true` is set, but user 'nadia' does not hold the verb.";
    expect(readFailure(apiError(text))).toMatchObject({ kind: 'refused', overridable: false });
  });

  it('reads a denial with no status text before it (HTTP/2)', () => {
    expect(readDenial(' - admission webhook "a.ichor.dev" denied the request: no')).toEqual({
      webhook: 'a.ichor.dev',
      message: 'no',
    });
    expect(readDenial('admission webhook "a.ichor.dev" denied the request: no')).not.toBeNull();
  });

  it('takes another webhook, RBAC or the network as an error, not a refusal', () => {
    const other = new Error(
      'Forbidden - admission webhook "policy.example.com" denied the request: `override: true` on the TalosOperation would pass'
    );
    expect(readFailure(other)).toMatchObject({ kind: 'error' });
    const forbidden = Object.assign(
      new Error(
        'Forbidden - talosoperations.ichor.dev is forbidden: User "eve" cannot create resource "talosoperations"'
      ),
      { status: 403 }
    );
    expect(readFailure(forbidden)).toEqual({
      kind: 'error',
      status: 403,
      message: forbidden.message,
    });
    expect(readFailure('Request timed-out')).toEqual({
      kind: 'error',
      message: 'Request timed-out',
    });
    expect(readFailure(undefined)).toMatchObject({ kind: 'error' });
  });

  it('does not take a hook named like Ichor in a longer name', () => {
    expect(
      readDenial('admission webhook "evil.ichor.dev.example" denied the request: x')
    ).toBeNull();
  });
});
