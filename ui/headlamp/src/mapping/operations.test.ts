import { describe, expect, it } from 'vitest';
import { operation } from '../fixtures/objects';
import { clusterOperations, operationRow } from './operations';

describe('operationRow', () => {
  it('reads the phase, the message, the Job and who started it', () => {
    const op = operation(
      'prod-talos-abcde',
      { clusterRef: { name: 'prod' }, type: 'talos', version: 'v1.14.4', override: true },
      {
        phase: 'Running',
        message: 'the Job runs talosctl upgrade',
        startedAt: '2026-12-05T10:01:00Z',
        jobName: 'prod-talos-abcde-upgrade',
      }
    );
    op.metadata!.labels = { 'ichor.dev/started-by': 'auto-patch' };
    expect(operationRow(op)).toEqual({
      name: 'prod-talos-abcde',
      namespace: 'default',
      cluster: 'prod',
      what: 'Talos to v1.14.4',
      override: true,
      phase: 'Running',
      active: true,
      message: 'the Job runs talosctl upgrade',
      created: '2026-12-05T10:00:00Z',
      startedAt: '2026-12-05T10:01:00Z',
      jobName: 'prod-talos-abcde-upgrade',
      startedBy: 'auto-patch',
    });
  });

  it('is Pending before the executor writes, and explains by the first unmet condition', () => {
    expect(
      operationRow(operation('a', { type: 'cni', clusterRef: { name: 'prod' } }, undefined))
    ).toMatchObject({
      phase: 'Pending',
      active: true,
      what: 'Cilium to the embedded chart',
      message: '',
    });
    const failed = operation(
      'b',
      { type: 'kubernetes', version: 'v1.37.2', clusterRef: { name: 'prod' } },
      {
        phase: 'Failed',
        conditions: [
          { type: 'Accepted', status: 'True', message: 'accepted' },
          { type: 'Ready', status: 'False', message: 'Nodes did not report v1.37.2' },
        ],
      }
    );
    expect(operationRow(failed)).toMatchObject({
      active: false,
      message: 'Nodes did not report v1.37.2',
    });
  });

  it('tolerates an operation of an unknown type', () => {
    expect(operationRow({ spec: { type: 'firmware' } }).what).toBe('firmware');
    expect(operationRow({}).what).toBe('unknown type');
  });
});

describe('clusterOperations', () => {
  it("keeps the cluster's own, newest first", () => {
    const ops = [
      operation(
        'old',
        { clusterRef: { name: 'prod' }, type: 'talos', version: 'v1.14.4' },
        {},
        '2026-12-01T00:00:00Z'
      ),
      operation(
        'new',
        { clusterRef: { name: 'prod' }, type: 'talos', version: 'v1.14.5' },
        {},
        '2026-12-05T00:00:00Z'
      ),
      operation('other', { clusterRef: { name: 'edge' }, type: 'talos', version: 'v1.14.5' }),
      {
        ...operation('elsewhere', { clusterRef: { name: 'prod' }, type: 'talos' }),
        metadata: { name: 'x', namespace: 'team-b' },
      },
    ];
    expect(clusterOperations(ops, { namespace: 'default', name: 'prod' }).map(r => r.name)).toEqual(
      ['new', 'old']
    );
  });
});
