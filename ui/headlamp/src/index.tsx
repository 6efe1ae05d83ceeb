/**
 * Ichor's Headlamp plugin: the Versions card on every TalosCluster page, the upgrade
 * dialog (the server's dry run as the plan, the override checked by RBAC), the cluster's
 * operations and Events, and the fleet of TalosClusters. Public plugin API only.
 */

import {
  registerDetailsViewHeaderAction,
  registerDetailsViewSection,
  registerRoute,
  registerSidebarEntry,
} from '@kinvolk/headlamp-plugin/lib';
import { IchorSections } from './components/IchorSections';
import { ClusterPage, FleetPage } from './components/Pages';
import { VersionsLink } from './components/VersionsLink';
import { isTalosCluster } from './resources';

registerSidebarEntry({
  parent: null,
  name: 'ichor',
  label: 'Ichor',
  url: '/ichor/clusters',
  icon: 'mdi:arrow-up-bold-circle-outline',
});

registerSidebarEntry({
  parent: 'ichor',
  name: 'ichor-clusters',
  label: 'Talos clusters',
  url: '/ichor/clusters',
});

registerRoute({
  path: '/ichor/clusters',
  sidebar: 'ichor-clusters',
  name: 'ichor-clusters',
  exact: true,
  component: () => <FleetPage />,
});

registerRoute({
  path: '/ichor/clusters/:namespace/:name',
  sidebar: 'ichor-clusters',
  name: 'ichor-cluster',
  exact: true,
  component: () => <ClusterPage />,
});

registerDetailsViewSection(({ resource }) =>
  isTalosCluster(resource) ? <IchorSections resource={resource} /> : null
);

// Headlamp's own page of a TalosCluster links to the plugin's page.
registerDetailsViewHeaderAction(VersionsLink);
