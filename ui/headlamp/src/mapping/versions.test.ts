import { describe, expect, it } from 'vitest';
import { TalosClusterObject } from '../api-types';
import { cluster } from '../fixtures/objects';
import {
  autoPatch,
  blockedReleases,
  compatibility,
  listState,
  NOT_RECORDED,
  versionRows,
} from './versions';

function row(object: TalosClusterObject, key: string) {
  const found = versionRows(object).find(r => r.key === key);
  if (!found) {
    throw new Error(`no row ${key}`);
  }
  return found;
}

function withStatus(status: Record<string, unknown>, spec?: Record<string, unknown>) {
  const base = cluster();
  return {
    ...base,
    spec: { ...base.spec, ...(spec ?? {}) },
    status: { ...base.status, ...status },
  } as TalosClusterObject;
}

describe('versionRows', () => {
  it('reads each component, the newest patch as the hint and the Upgrade buttons', () => {
    const rows = versionRows(cluster());
    expect(rows.map(r => [r.key, r.running, r.hint, r.upgrade])).toEqual([
      ['talos', 'v1.14.3', 'Patch available: v1.14.5', 'talos'],
      ['contract', 'v1.14', undefined, undefined],
      ['kubernetes', 'v1.36.6', 'Patch available: v1.36.7', 'kubernetes'],
      ['cilium', '1.20.4', undefined, undefined],
    ]);
    expect(rows.every(r => r.note === undefined || r.key === 'cilium')).toBe(true);
  });

  it('shows an unknown version as unknown, with the Ready condition saying why', () => {
    const object = withStatus({
      talosVersion: undefined,
      conditions: [
        {
          type: 'Ready',
          status: 'False',
          reason: 'NodeVersionUnreadable',
          message: 'Node cp-1 reports osImage "Talos (banana)", which is not a Talos version',
        },
      ],
    });
    const talos = row(object, 'talos');
    expect(talos.running).toBe('unknown');
    expect(talos.runningKnown).toBe(false);
    expect(talos.detail).toContain('"Talos (banana)"');
    expect(talos.spec).toBe('v1.14.3');
    // the button stays: the server's plan judges what an unknown version may do
    expect(talos.upgrade).toBe('talos');
  });

  it('says "not observed yet" for a cluster the operator has not read', () => {
    const object: TalosClusterObject = { ...cluster(), status: undefined };
    const rows = versionRows(object);
    expect(rows.find(r => r.key === 'talos')).toMatchObject({
      running: 'unknown',
      detail: 'not observed yet',
      note: `Release list unavailable: ${NOT_RECORDED}`,
    });
    expect(rows.find(r => r.key === 'cilium')).toMatchObject({
      running: 'unknown',
      detail: 'no CNI is observed yet',
    });
    expect(rows.find(r => r.key === 'contract')?.running).toBe('v1.14');
  });

  it.each([
    [
      { patch: ['v1.14.5'], available: false, unavailableReason: 'the release check is off' },
      'Release list unavailable: the release check is off',
      undefined,
    ],
    [
      { available: false },
      'Release list unavailable: the status marks the release list unavailable',
      undefined,
    ],
    [
      {
        patch: ['v1.14.5'],
        default: 'v1.14.5',
        available: true,
        unavailableReason: 'the last Talos listing failed; the list may be stale',
      },
      'Note: the last Talos listing failed; the list may be stale',
      'Patch available: v1.14.5',
    ],
  ])('gives the unavailable reason %#', (group, note, hint) => {
    const talos = row(withStatus({ upgradeChoices: { talos: group } }), 'talos');
    expect(talos.note).toBe(note);
    expect(talos.hint).toBe(hint);
  });

  it('says why nothing is offered with the condition the controller wrote', () => {
    const object = withStatus({
      upgradeChoices: { kubernetes: { available: true, patch: [], nextMinor: [] } },
      conditions: [
        {
          type: 'KubernetesUpgradeAvailable',
          status: 'False',
          reason: 'CNINotObserved',
          message: 'no Kubernetes is offered until the CNI and its release are observed',
        },
      ],
    });
    expect(row(object, 'kubernetes').note).toBe(
      'no Kubernetes is offered until the CNI and its release are observed'
    );
    expect(row(object, 'kubernetes').hint).toBeUndefined();
  });

  it('names the versions of Nodes that differ, and the spec when it differs', () => {
    const object = withStatus(
      {
        nodes: { count: 3, differ: true, talosVersions: ['v1.14.3', 'v1.14.4'] },
      },
      { talosVersion: 'v1.14.4' }
    );
    const talos = row(object, 'talos');
    expect(talos.detail).toBe('Nodes run v1.14.3, v1.14.4');
    expect(talos.spec).toBe('v1.14.4');
  });

  it('offers the embedded chart on the Cilium row only when the condition says so', () => {
    const object = withStatus({
      cni: { detected: 'cilium', detectedVersion: '1.19.10' },
      conditions: [
        {
          type: 'CiliumUpgradeAvailable',
          status: 'True',
          reason: 'ChartNewer',
          message: 'Cilium 1.19.10 runs; this Ichor embeds chart 1.20.4: run `ichor cni upgrade`',
        },
      ],
    });
    expect(row(object, 'cilium')).toMatchObject({
      running: '1.19.10',
      upgrade: 'cni',
      hint: 'Chart upgrade available',
      note: 'Cilium 1.19.10 runs; this Ichor embeds chart 1.20.4: run `ichor cni upgrade`',
    });
    expect(row(cluster(), 'cilium').upgrade).toBeUndefined();
  });

  it.each([
    [{ cni: { detected: 'flannel' } }, {}, 'flannel', 'the cluster runs flannel, not Cilium'],
    [
      { cni: {} },
      { cni: { preset: 'unmanaged' } },
      'not observed',
      'unmanaged CNI: Ichor installs no Cilium',
    ],
    [
      { cni: { detected: 'calico', detectedVersion: '3.29.1' } },
      { cni: { preset: 'unmanaged' } },
      'calico 3.29.1',
      'unmanaged CNI: Ichor installs no Cilium',
    ],
    [{ cni: { detected: 'cilium' } }, {}, 'unknown', undefined],
  ])('reads another CNI or none %#', (status, spec, running, detail) => {
    const cilium = row(withStatus(status, spec), 'cilium');
    expect(cilium.running).toBe(running);
    expect(cilium.detail).toBe(detail);
    expect(cilium.upgrade).toBeUndefined();
  });

  it('tolerates a status of the wrong shape without throwing', () => {
    const odd = {
      metadata: {},
      spec: {},
      status: { upgradeChoices: { talos: null }, nodes: null },
    };
    expect(() => versionRows(odd as TalosClusterObject)).not.toThrow();
    expect(versionRows({}).map(r => r.running)).toEqual([
      'unknown',
      'unknown',
      'unknown',
      'unknown',
    ]);
  });
});

describe('listState', () => {
  it('is unavailable without a group, available with a note when the status has one', () => {
    expect(listState(undefined)).toEqual({ available: false, reason: NOT_RECORDED });
    expect(listState({ available: true })).toEqual({ available: true });
    expect(listState({ available: true, unavailableReason: 'stale' })).toEqual({
      available: true,
      reason: 'stale',
    });
  });
});

describe('compatibility', () => {
  it.each([
    ['True', 'Compatible', 'compatible', 'Compatible'],
    ['False', 'TalosKubernetesIncompatible', 'incompatible', 'Incompatible'],
    ['False', 'CiliumKubernetesIncompatible', 'incompatible', 'Incompatible'],
    ['False', 'UnknownVersion', 'unknown-version', 'Unknown version'],
    ['Unknown', 'InvalidSpec', 'not-judged', 'InvalidSpec'],
  ])('%s %s', (status, reason, state, label) => {
    const object = withStatus({
      conditions: [{ type: 'VersionsCompatible', status, reason, message: 'the rule says' }],
    });
    expect(compatibility(object)).toEqual({ state, label, message: 'the rule says' });
  });

  it('is "not judged yet" without the condition', () => {
    expect(compatibility(withStatus({ conditions: [] }))).toEqual({
      state: 'not-judged',
      label: 'Not judged yet',
    });
  });
});

describe('blockedReleases', () => {
  it('counts the releases and names the component of each nearest line', () => {
    expect(blockedReleases(cluster())).toEqual({
      headline: '3 newer releases are not offered',
      lines: [
        expect.objectContaining({ component: 'Kubernetes', version: 'v1.37.2', blocker: 'cilium' }),
      ],
    });
    expect(
      blockedReleases(withStatus({ blockedReleases: { releases: 1, nearest: [] } })).headline
    ).toBe('1 newer release is not offered');
    expect(blockedReleases(withStatus({ blockedReleases: undefined }))).toEqual({ lines: [] });
  });
});

describe('autoPatch', () => {
  it('is off without a status, and says why', () => {
    expect(autoPatch(undefined).label).toBe('Off');
    expect(
      autoPatch({ enabled: false, reason: 'Disabled', message: 'no windows are set' })
    ).toEqual({
      label: 'Off',
      detail: 'no windows are set',
    });
  });

  it('names the open window, or the next one', () => {
    expect(
      autoPatch({
        enabled: true,
        windowOpen: true,
        nextWindow: { start: '2026-12-05T02:00:00Z', end: '2026-12-05T06:00:00Z' },
      }).label
    ).toBe('On, window open until 2026-12-05T06:00:00Z');
    expect(
      autoPatch({
        enabled: true,
        windowOpen: false,
        nextWindow: { start: '2026-12-06T02:00:00Z', end: '2026-12-06T06:00:00Z' },
      }).label
    ).toBe('On, next window 2026-12-06T02:00:00Z to 2026-12-06T06:00:00Z');
    expect(autoPatch({ enabled: true }).label).toBe('On, no window due');
  });

  it('says a suspension and the last run', () => {
    const summary = autoPatch({
      enabled: true,
      suspension: {
        operation: 'prod-talos-x1',
        component: 'talos',
        version: 'v1.14.4',
        reason: 'PatchFailed',
      },
      lastRun: {
        operation: 'prod-talos-x1',
        component: 'talos',
        version: 'v1.14.4',
        result: 'Failed',
      },
    });
    expect(summary.detail).toBe(
      'suspended after prod-talos-x1 (Talos v1.14.4): PatchFailed; last run prod-talos-x1: Talos v1.14.4 Failed'
    );
  });
});
