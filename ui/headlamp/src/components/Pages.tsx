/**
 * The plugin's two pages: the fleet (/ichor/clusters) and a cluster
 * (/ichor/clusters/:namespace/:name, Headlamp's details grid with the plugin's sections).
 */

import { DetailsGrid, Link } from '@kinvolk/headlamp-plugin/lib/CommonComponents';
import { useState } from 'react';
import { useParams } from 'react-router-dom';
import { TalosClusterObject, TalosOperationObject } from '../api-types';
import { attentionLine, filterRows, fleetRows, SortKey, sortRows } from '../mapping/fleet';
import { TalosCluster, TalosOperation } from '../resources';
import { FleetView } from './FleetView';

function jsonOf<T>(item: unknown): T {
  return ((item as { jsonData?: T })?.jsonData ?? item) as T;
}

export function FleetPage() {
  const [clusters, clustersError] = TalosCluster.useList();
  const [operations] = TalosOperation.useList();
  const [filter, setFilter] = useState('');
  const [sort, setSort] = useState<{ key: SortKey; descending: boolean }>({
    key: 'name',
    descending: false,
  });
  const rows = fleetRows(
    (clusters ?? []).map(c => jsonOf<TalosClusterObject>(c)),
    (operations ?? []).map(o => jsonOf<TalosOperationObject>(o))
  );
  return (
    <FleetView
      rows={sortRows(filterRows(rows, filter), sort.key, sort.descending)}
      attention={attentionLine(rows)}
      filter={filter}
      sort={sort}
      error={
        clustersError ? `The TalosClusters cannot be listed: ${clustersError.message}` : undefined
      }
      onFilter={setFilter}
      onSort={key =>
        setSort(current => ({
          key,
          descending: current.key === key ? !current.descending : false,
        }))
      }
      clusterLink={row => (
        <Link routeName="ichor-cluster" params={{ namespace: row.namespace, name: row.name }}>
          {row.key}
        </Link>
      )}
    />
  );
}

export function ClusterPage() {
  const { namespace, name } = useParams<{ namespace: string; name: string }>();
  // The Versions card, the operations and the Events come from the details view section
  // the plugin registers, as on Headlamp's own custom resource page.
  return <DetailsGrid resourceType={TalosCluster} name={name} namespace={namespace} />;
}
