/**
 * What the plugin adds to a TalosCluster's page (its own page and Headlamp's generic
 * custom resource page alike, through registerDetailsViewSection): the Versions card
 * with its Upgrade dialog, the cluster's operations and its Events.
 */

import { Link } from '@kinvolk/headlamp-plugin/lib/CommonComponents';
import { useState } from 'react';
import { Component, TalosClusterObject, TalosOperationObject } from '../api-types';
import { clusterEvents, EventObject } from '../mapping/events';
import { clusterOperations } from '../mapping/operations';
import {
  autoPatch,
  blockedReleases,
  clusterName,
  compatibility,
  versionRows,
} from '../mapping/versions';
import { ClusterEvent, TalosOperation } from '../resources';
import { EventsView } from './EventsView';
import { nodesText } from './nodes';
import { OperationsView } from './OperationsSection';
import { UpgradeDialog } from './UpgradeDialog';
import { VersionsCard } from './VersionsCard';

function jsonOf<T>(item: unknown): T {
  return ((item as { jsonData?: T })?.jsonData ?? item) as T;
}

export function IchorSections({ resource }: { resource: unknown }) {
  const cluster = jsonOf<TalosClusterObject>(resource);
  const namespace = cluster.metadata?.namespace ?? '';
  const name = cluster.metadata?.name ?? '';
  const [dialog, setDialog] = useState<Component | null>(null);
  const [operations, operationsError] = TalosOperation.useList({ namespace });
  const [events] = ClusterEvent.useList({
    namespace,
    fieldSelector: `involvedObject.kind=TalosCluster,involvedObject.name=${name}`,
  });
  const label = clusterName(cluster);
  return (
    <>
      <VersionsCard
        cluster={label}
        rows={versionRows(cluster)}
        compatibility={compatibility(cluster)}
        blocked={blockedReleases(cluster)}
        autoPatch={autoPatch(cluster.status?.autoPatch)}
        nodes={nodesText(cluster)}
        onUpgrade={setDialog}
      />
      {dialog && (
        <UpgradeDialog
          cluster={cluster}
          component={dialog}
          open={dialog !== null}
          onClose={() => setDialog(null)}
        />
      )}
      <OperationsView
        cluster={label}
        rows={clusterOperations(
          (operations ?? []).map(o => jsonOf<TalosOperationObject>(o)),
          { namespace, name }
        )}
        error={
          operationsError
            ? `The operations cannot be listed: ${operationsError.message}`
            : undefined
        }
        jobLink={row => (
          <Link routeName="job" params={{ namespace: row.namespace, name: row.jobName ?? '' }}>
            {row.jobName}
          </Link>
        )}
      />
      <EventsView
        cluster={label}
        rows={clusterEvents(
          (events ?? []).map(e => jsonOf<EventObject>(e)),
          { namespace, name }
        )}
      />
    </>
  );
}
