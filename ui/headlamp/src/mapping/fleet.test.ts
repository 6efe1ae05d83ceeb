import { describe, expect, it } from 'vitest';
import { TalosClusterObject } from '../api-types';
import { cluster, operation } from '../fixtures/objects';
import { attentionLine, filterRows, fleetRows, sortRows } from './fleet';

function named(
  name: string,
  namespace: string,
  status: Record<string, unknown>
): TalosClusterObject {
  const base = cluster();
  return {
    ...base,
    metadata: { ...base.metadata, name, namespace },
    status: { ...base.status, ...status },
  } as TalosClusterObject;
}

const edge = named('edge', 'default', {
  talosVersion: 'v1.12.4',
  kubernetesVersion: 'v1.33.2',
  cni: { detected: 'cilium', detectedVersion: '1.19.10' },
  upgradeChoices: {
    talos: { patch: [], nextMinor: ['v1.13.9'], default: 'v1.13.9', available: true },
    kubernetes: { patch: [], available: true },
  },
  conditions: [
    {
      type: 'VersionsCompatible',
      status: 'False',
      reason: 'TalosKubernetesIncompatible',
      message: 'no',
    },
  ],
  autoPatch: { enabled: true, windowOpen: false, nextWindow: { start: 'S', end: 'E' } },
});

describe('fleetRows', () => {
  const ops = [
    operation(
      'r',
      { clusterRef: { name: 'prod' }, type: 'talos', version: 'v1.14.5' },
      { phase: 'Running' }
    ),
    operation('p', { clusterRef: { name: 'prod' }, type: 'kubernetes', version: 'v1.36.7' }),
    operation(
      's',
      { clusterRef: { name: 'prod' }, type: 'talos', version: 'v1.14.4' },
      { phase: 'Succeeded' }
    ),
  ];
  const rows = fleetRows([cluster(), edge], ops);

  it('reads each cluster, its patches and its running operations', () => {
    expect(
      rows.map(r => [
        r.key,
        r.talos,
        r.kubernetes,
        r.cilium,
        r.compatibilityLabel,
        r.patches,
        r.runningOperations,
        r.autoPatch,
      ])
    ).toEqual([
      [
        'default/edge',
        'v1.12.4',
        'v1.33.2',
        '1.19.10',
        'Incompatible',
        [],
        0,
        'On, next window S to E',
      ],
      [
        'default/prod',
        'v1.14.3',
        'v1.36.6',
        '1.20.4',
        'Compatible',
        ['Talos v1.14.5', 'Kubernetes v1.36.7'],
        2,
        'Off',
      ],
    ]);
  });

  it('says the attention line across clusters, only for what has a patch', () => {
    expect(attentionLine(rows)).toBe('Patch updates are available for Talos, Kubernetes');
    const onlyTalos = named('t', 'x', {
      upgradeChoices: { talos: { patch: ['v1.14.5'], available: true } },
    });
    expect(attentionLine(fleetRows([onlyTalos, edge], []))).toBe(
      'Patch updates are available for Talos'
    );
    expect(attentionLine(fleetRows([edge], []))).toBeNull();
    // a stale or unavailable list offers no patch
    const off = named('o', 'x', {
      upgradeChoices: { talos: { patch: ['v1.14.5'], available: false } },
    });
    expect(attentionLine(fleetRows([off], []))).toBeNull();
  });

  it('filters by any shown text and sorts by version numbers, not strings', () => {
    expect(filterRows(rows, 'INCOMPAT').map(r => r.name)).toEqual(['edge']);
    expect(filterRows(rows, ' ').length).toBe(2);
    const many = fleetRows(
      [named('a', 'n', { talosVersion: 'v1.9.0' }), named('b', 'n', { talosVersion: 'v1.10.0' })],
      []
    );
    expect(sortRows(many, 'talos').map(r => r.name)).toEqual(['a', 'b']);
    expect(sortRows(many, 'talos', true).map(r => r.name)).toEqual(['b', 'a']);
    expect(sortRows(rows, 'operations', true)[0].name).toBe('prod');
  });
});
