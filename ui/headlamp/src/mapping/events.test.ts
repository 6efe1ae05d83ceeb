import { describe, expect, it } from 'vitest';
import { clusterEvents } from './events';

describe('clusterEvents', () => {
  it("keeps the cluster's Events, newest first", () => {
    const events = [
      {
        type: 'Normal',
        reason: 'Observed',
        message: 'read',
        lastTimestamp: '2026-12-05T10:00:00Z',
        involvedObject: { kind: 'TalosCluster', name: 'prod', namespace: 'default' },
        metadata: { uid: '1', namespace: 'default' },
      },
      {
        type: 'Warning',
        reason: 'Override',
        message: 'olivia passed',
        eventTime: '2026-12-05T11:00:00Z',
        count: 2,
        involvedObject: { kind: 'TalosCluster', name: 'prod', namespace: 'default' },
        metadata: { uid: '2', namespace: 'default' },
      },
      {
        reason: 'Other',
        involvedObject: { kind: 'TalosCluster', name: 'edge', namespace: 'default' },
        metadata: { uid: '3' },
      },
      { reason: 'Pod', involvedObject: { kind: 'Pod', name: 'prod' }, metadata: { uid: '4' } },
    ];
    expect(clusterEvents(events, { namespace: 'default', name: 'prod' })).toEqual([
      {
        key: '2',
        type: 'Warning',
        reason: 'Override',
        message: 'olivia passed',
        time: '2026-12-05T11:00:00Z',
        count: 2,
      },
      {
        key: '1',
        type: 'Normal',
        reason: 'Observed',
        message: 'read',
        time: '2026-12-05T10:00:00Z',
        count: 1,
      },
    ]);
  });
});
