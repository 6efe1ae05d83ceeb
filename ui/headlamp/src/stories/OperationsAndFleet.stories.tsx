import { Meta, StoryFn } from '@storybook/react';
import { FleetView } from '../components/FleetView';
import { OperationsView } from '../components/OperationsSection';
import { cluster, operation } from '../fixtures/objects';
import { attentionLine, fleetRows } from '../mapping/fleet';
import { clusterOperations } from '../mapping/operations';

export default { title: 'Ichor/OperationsAndFleet' } as Meta;

const ops = [
  operation(
    'prod-kubernetes-x7k2q',
    { clusterRef: { name: 'prod' }, type: 'kubernetes', version: 'v1.37.2', override: true },
    {
      phase: 'Running',
      message: 'the Job runs talosctl upgrade-k8s',
      startedAt: '2026-12-05T10:01:00Z',
      jobName: 'prod-kubernetes-x7k2q',
    },
    '2026-12-05T10:01:00Z'
  ),
  operation(
    'prod-talos-4bd9s',
    { clusterRef: { name: 'prod' }, type: 'talos', version: 'v1.14.4' },
    {
      phase: 'Succeeded',
      startedAt: '2026-12-04T10:00:00Z',
      finishedAt: '2026-12-04T10:09:00Z',
      jobName: 'prod-talos-4bd9s',
    },
    '2026-12-04T10:00:00Z'
  ),
];

export const Operations: StoryFn = () => (
  <OperationsView
    cluster="default/prod"
    rows={clusterOperations(ops, { namespace: 'default', name: 'prod' })}
  />
);

export const NoOperations: StoryFn = () => <OperationsView cluster="default/prod" rows={[]} />;

const rows = fleetRows([cluster()], ops);

export const Fleet: StoryFn = () => (
  <FleetView
    rows={rows}
    attention={attentionLine(rows)}
    filter=""
    sort={{ key: 'name', descending: false }}
    onFilter={() => undefined}
    onSort={() => undefined}
  />
);
