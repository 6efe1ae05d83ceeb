import { Meta, StoryFn } from '@storybook/react';
import { TalosClusterObject } from '../api-types';
import { nodesText } from '../components/nodes';
import { VersionsCard } from '../components/VersionsCard';
import { cluster } from '../fixtures/objects';
import {
  autoPatch,
  blockedReleases,
  clusterName,
  compatibility,
  versionRows,
} from '../mapping/versions';

export default {
  title: 'Ichor/VersionsCard',
  component: VersionsCard,
} as Meta;

/** The card as IchorSections renders it for one object. */
function card(object: TalosClusterObject) {
  return () => (
    <VersionsCard
      cluster={clusterName(object)}
      rows={versionRows(object)}
      compatibility={compatibility(object)}
      blocked={blockedReleases(object)}
      autoPatch={autoPatch(object.status?.autoPatch)}
      nodes={nodesText(object)}
      onUpgrade={() => undefined}
    />
  );
}

function withStatus(status: Record<string, unknown>, spec: Record<string, unknown> = {}) {
  const base = cluster();
  return {
    ...base,
    spec: { ...base.spec, ...spec },
    status: { ...base.status, ...status },
  } as TalosClusterObject;
}

const T = '2026-12-05T10:00:00Z';

/** Patches offered for Talos and Kubernetes, a Kubernetes minor held back by Cilium. */
export const PatchesAvailable: StoryFn = card(cluster());

/** Up to date: nothing newer passes the rules; the controller's sentence says so. */
export const UpToDate: StoryFn = card(
  withStatus({
    upgradeChoices: {
      talos: { available: true, patch: [], nextMinor: [] },
      kubernetes: { available: true, patch: [], nextMinor: [] },
    },
    blockedReleases: { count: 0, releases: 0, nearest: [] },
    conditions: [
      { type: 'VersionsCompatible', status: 'True', reason: 'Compatible', message: 'compatible' },
      {
        type: 'TalosUpgradeAvailable',
        status: 'False',
        reason: 'UpToDate',
        message: 'no published Talos newer than v1.14.3 passes the upgrade rules',
      },
      {
        type: 'KubernetesUpgradeAvailable',
        status: 'False',
        reason: 'UpToDate',
        message: 'no published Kubernetes newer than v1.36.6 passes the upgrade rules',
      },
    ],
  })
);

/** The release check is off: no list, and the reason on each row. */
export const ListUnavailable: StoryFn = card(
  withStatus({
    upgradeChoices: {
      talos: { available: false, unavailableReason: 'the release check is off' },
      kubernetes: { available: false, unavailableReason: 'the release check is off' },
    },
    blockedReleases: null,
  })
);

/** A stale list: the choices stay, with the server's note. */
export const ListStale: StoryFn = card(
  withStatus({
    upgradeChoices: {
      talos: {
        patch: ['v1.14.5'],
        default: 'v1.14.5',
        available: true,
        unavailableReason: 'the last Talos listing failed; the list may be stale',
      },
      kubernetes: { patch: ['v1.36.7'], default: 'v1.36.7', available: true },
    },
  })
);

/** Not observed yet: a cluster the operator has not written a status for. */
export const NotObserved: StoryFn = card({ ...cluster(), status: undefined });

/** An unknown version: a Node's version cannot be read, the pair cannot be judged. */
export const UnknownVersion: StoryFn = card(
  withStatus({
    talosVersion: null,
    nodes: { count: 3 },
    conditions: [
      {
        type: 'Ready',
        status: 'False',
        reason: 'NodeVersionUnreadable',
        message: 'Node cp-1 reports osImage "Talos (v1.15.0)"; Talos 1.15 is unknown to this Ichor',
        lastTransitionTime: T,
      },
      {
        type: 'VersionsCompatible',
        status: 'False',
        reason: 'UnknownVersion',
        message: 'Talos v1.15.0 is refused: Talos 1.15 is unknown to this Ichor',
      },
    ],
  })
);

/** Nodes half upgraded, Cilium behind the embedded chart, auto-patch on. */
export const NodesDifferAndChartNewer: StoryFn = card(
  withStatus(
    {
      nodes: {
        count: 3,
        differ: true,
        talosVersions: ['v1.14.3', 'v1.14.4'],
        kubernetesVersions: ['v1.36.6'],
      },
      cni: { detected: 'cilium', detectedVersion: '1.19.10' },
      autoPatch: {
        enabled: true,
        windowOpen: false,
        nextWindow: { start: '2026-12-06T02:00:00Z', end: '2026-12-06T06:00:00Z' },
        reason: 'WindowClosed',
        message: 'the next window opens at 2026-12-06T02:00:00Z',
      },
      conditions: [
        { type: 'VersionsCompatible', status: 'True', reason: 'Compatible', message: 'compatible' },
        {
          type: 'CiliumUpgradeAvailable',
          status: 'True',
          reason: 'ChartNewer',
          message: 'Cilium 1.19.10 runs; this Ichor embeds chart 1.20.4: run `ichor cni upgrade`',
        },
      ],
    },
    { talosVersion: 'v1.14.4' }
  )
);

/** An incompatible pair, as adopted; another CNI. */
export const IncompatibleOtherCni: StoryFn = card(
  withStatus({
    cni: { detected: 'flannel', detectedVersion: '0.26.1' },
    conditions: [
      {
        type: 'VersionsCompatible',
        status: 'False',
        reason: 'TalosKubernetesIncompatible',
        message: 'Talos v1.14.3 does not run Kubernetes v1.32.4 (it runs 1.33 to 1.37)',
      },
    ],
  })
);
