/**
 * A header action on Headlamp's own page of a TalosCluster (its generic custom resource
 * page): a link to the plugin's page of the cluster. That page of this Headlamp version
 * does not render the sections registerDetailsViewSection adds (only DetailsGrid does),
 * so the card is one click away there.
 */

import { Link } from '@kinvolk/headlamp-plugin/lib/CommonComponents';
import { useLocation } from 'react-router-dom';
import { isTalosCluster } from '../resources';

export function VersionsLink({ item }: { item?: unknown }) {
  const location = useLocation();
  if (!isTalosCluster(item) || location.pathname.includes('/ichor/clusters/')) {
    return null;
  }
  const meta = (item as { jsonData: { metadata: { name: string; namespace: string } } }).jsonData
    .metadata;
  return (
    <Link routeName="ichor-cluster" params={{ namespace: meta.namespace, name: meta.name }}>
      Versions and upgrades
    </Link>
  );
}
