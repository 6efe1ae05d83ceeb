/**
 * The fleet view: one row per TalosCluster (its versions, compatibility, the patches its
 * status offers, its running operations, auto-patch) and the one attention line across
 * clusters, "Patch updates are available for Talos, Kubernetes".
 */

import { TalosClusterObject, TalosOperationObject } from '../api-types';
import { ACTIVE_PHASES } from './operations';
import { autoPatch, Compatibility, compatibility, newestPatch, versionRows } from './versions';

export interface FleetRow {
  key: string;
  namespace: string;
  name: string;
  talos: string;
  kubernetes: string;
  cilium: string;
  compatibility: Compatibility;
  compatibilityLabel: string;
  compatibilityMessage?: string;
  /** "Talos v1.14.5", "Kubernetes v1.36.7": the newest patch of each. */
  patches: string[];
  patchComponents: ('Talos' | 'Kubernetes')[];
  runningOperations: number;
  autoPatch: string;
}

export function fleetRow(
  cluster: TalosClusterObject,
  operations: TalosOperationObject[]
): FleetRow {
  const namespace = cluster.metadata?.namespace ?? '';
  const name = cluster.metadata?.name ?? '';
  const rows = versionRows(cluster);
  const running = (key: string) => rows.find(r => r.key === key)?.running ?? 'unknown';
  const compat = compatibility(cluster);
  const patches: string[] = [];
  const patchComponents: ('Talos' | 'Kubernetes')[] = [];
  const choices = cluster.status?.upgradeChoices;
  for (const [label, group] of [
    ['Talos', choices?.talos],
    ['Kubernetes', choices?.kubernetes],
  ] as const) {
    const patch = newestPatch(group);
    if (patch) {
      patches.push(`${label} ${patch}`);
      patchComponents.push(label);
    }
  }
  const active = operations.filter(
    op =>
      op?.metadata?.namespace === namespace &&
      op.spec?.clusterRef?.name === name &&
      ACTIVE_PHASES.includes(op.status?.phase || 'Pending')
  ).length;
  const row: FleetRow = {
    key: `${namespace}/${name}`,
    namespace,
    name,
    talos: running('talos'),
    kubernetes: running('kubernetes'),
    cilium: running('cilium'),
    compatibility: compat.state,
    compatibilityLabel: compat.label,
    patches,
    patchComponents,
    runningOperations: active,
    autoPatch: autoPatch(cluster.status?.autoPatch).label,
  };
  if (compat.message) {
    row.compatibilityMessage = compat.message;
  }
  return row;
}

export function fleetRows(
  clusters: TalosClusterObject[],
  operations: TalosOperationObject[]
): FleetRow[] {
  return clusters.map(c => fleetRow(c, operations)).sort((a, b) => a.key.localeCompare(b.key));
}

/** "Patch updates are available for Talos, Kubernetes", or null when none is. */
export function attentionLine(rows: FleetRow[]): string | null {
  const components = (['Talos', 'Kubernetes'] as const).filter(c =>
    rows.some(r => r.patchComponents.includes(c))
  );
  if (components.length === 0) {
    return null;
  }
  return `Patch updates are available for ${components.join(', ')}`;
}

/** Rows whose name, namespace, versions or state contain ``text`` (case-insensitive). */
export function filterRows(rows: FleetRow[], text: string): FleetRow[] {
  const needle = text.trim().toLowerCase();
  if (!needle) {
    return rows;
  }
  return rows.filter(r =>
    [r.key, r.talos, r.kubernetes, r.cilium, r.compatibilityLabel, r.autoPatch, ...r.patches]
      .join(' ')
      .toLowerCase()
      .includes(needle)
  );
}

export type SortKey = 'name' | 'talos' | 'kubernetes' | 'compatibility' | 'patches' | 'operations';

function versionKey(v: string): number[] {
  const m = /^v?(\d+)\.(\d+)\.(\d+)/.exec(v);
  return m ? [Number(m[1]), Number(m[2]), Number(m[3])] : [-1, -1, -1];
}

function compareVersions(a: string, b: string): number {
  const [x, y] = [versionKey(a), versionKey(b)];
  for (let i = 0; i < 3; i++) {
    if (x[i] !== y[i]) {
      return x[i] - y[i];
    }
  }
  return a.localeCompare(b);
}

export function sortRows(rows: FleetRow[], key: SortKey, descending = false): FleetRow[] {
  const compare: Record<SortKey, (a: FleetRow, b: FleetRow) => number> = {
    name: (a, b) => a.key.localeCompare(b.key),
    talos: (a, b) => compareVersions(a.talos, b.talos),
    kubernetes: (a, b) => compareVersions(a.kubernetes, b.kubernetes),
    compatibility: (a, b) => a.compatibility.localeCompare(b.compatibility),
    patches: (a, b) => a.patches.length - b.patches.length,
    operations: (a, b) => a.runningOperations - b.runningOperations,
  };
  const sorted = [...rows].sort((a, b) => compare[key](a, b) || a.key.localeCompare(b.key));
  return descending ? sorted.reverse() : sorted;
}
