/**
 * What the Versions card shows, read from a TalosCluster as the operator wrote it.
 *
 * Pure functions of the object: no request, no rule. A row says what runs, what the
 * status offers (the "Patch available" hint), and why nothing is offered when the
 * status says so. A field the status lacks reads as "not observed", never as a guess.
 */

import {
  AutoPatchStatus,
  BlockedLine,
  ChoiceGroup,
  Component,
  COMPONENT_NAMES,
  Condition,
  conditionOf,
  TalosClusterObject,
} from '../api-types';

export type RowKey = 'talos' | 'contract' | 'kubernetes' | 'cilium';

export interface VersionRow {
  key: RowKey;
  label: string;
  /** What runs, as the status says ("unknown" when it does not). */
  running: string;
  runningKnown: boolean;
  /** The spec's version when it differs from what runs. */
  spec?: string;
  /** More about what runs: Nodes that differ, another CNI. */
  detail?: string;
  /** "Patch available: vX.Y.Z" (the newest patch the status offers). */
  hint?: string;
  /** Why nothing is offered, or the server's note on the list. */
  note?: string;
  /** The component the row's Upgrade button plans; absent: no button. */
  upgrade?: Component;
}

/** Why a component's choices cannot be listed, or the note that goes with them. */
export interface ListState {
  available: boolean;
  reason?: string;
}

export const NOT_RECORDED =
  'no upgrade choices are recorded for this cluster yet (the operator has not written its status)';

/** The availability of a component's choice list, as the status records it. */
export function listState(group: ChoiceGroup | null | undefined): ListState {
  if (!group) {
    return { available: false, reason: NOT_RECORDED };
  }
  if (group.available !== true) {
    return {
      available: false,
      reason: group.unavailableReason || 'the status marks the release list unavailable',
    };
  }
  return group.unavailableReason
    ? { available: true, reason: group.unavailableReason }
    : { available: true };
}

/** The newest patch the status offers (the lists are newest first). */
export function newestPatch(group: ChoiceGroup | null | undefined): string | undefined {
  const patches = group?.available === true ? group.patch ?? [] : [];
  return patches.find(v => typeof v === 'string' && v !== '');
}

function falseMessage(condition: Condition | undefined): string | undefined {
  if (!condition || condition.status === 'True' || !condition.message) {
    return undefined;
  }
  return condition.message;
}

function unknownBecause(conditions: Condition[] | null | undefined): string {
  const ready = conditionOf(conditions, 'Ready');
  if (ready && ready.status !== 'True' && ready.message) {
    return ready.message;
  }
  return 'not observed yet';
}

function componentRow(object: TalosClusterObject, component: 'talos' | 'kubernetes'): VersionRow {
  const status = object.status ?? {};
  const running = component === 'talos' ? status.talosVersion : status.kubernetesVersion;
  const spec = component === 'talos' ? object.spec?.talosVersion : object.spec?.kubernetesVersion;
  const seen =
    component === 'talos' ? status.nodes?.talosVersions : status.nodes?.kubernetesVersions;
  const group = status.upgradeChoices?.[component];
  const state = listState(group);
  const patch = newestPatch(group);
  const condition = conditionOf(
    status.conditions,
    component === 'talos' ? 'TalosUpgradeAvailable' : 'KubernetesUpgradeAvailable'
  );
  const row: VersionRow = {
    key: component,
    label: COMPONENT_NAMES[component],
    running: running || 'unknown',
    runningKnown: !!running,
    upgrade: component,
  };
  if (spec && spec !== running) {
    row.spec = spec;
  }
  if (status.nodes?.differ && seen && seen.length > 1) {
    row.detail = `Nodes run ${seen.join(', ')}`;
  } else if (!running) {
    row.detail = unknownBecause(status.conditions);
  }
  if (patch) {
    row.hint = `Patch available: ${patch}`;
  }
  if (!state.available) {
    row.note = `Release list unavailable: ${state.reason}`;
  } else if (state.reason) {
    row.note = `Note: ${state.reason}`;
  } else if (!group?.default) {
    row.note = falseMessage(condition) ?? 'no recorded release passes the upgrade rules';
  }
  return row;
}

function ciliumRow(object: TalosClusterObject): VersionRow {
  const status = object.status ?? {};
  const cni = status.cni ?? {};
  const condition = conditionOf(status.conditions, 'CiliumUpgradeAvailable');
  const row: VersionRow = {
    key: 'cilium',
    label: 'Cilium',
    running: 'unknown',
    runningKnown: false,
  };
  if (object.spec?.cni?.preset === 'unmanaged') {
    row.running = cni.detected
      ? [cni.detected, cni.detectedVersion].filter(Boolean).join(' ')
      : 'not observed';
    row.runningKnown = !!cni.detected;
    row.detail = 'unmanaged CNI: Ichor installs no Cilium';
    return row;
  }
  if (!cni.detected) {
    row.detail = condition?.message || 'no CNI is observed yet';
    return row;
  }
  if (cni.detected !== 'cilium') {
    row.running = [cni.detected, cni.detectedVersion].filter(Boolean).join(' ');
    row.runningKnown = true;
    row.detail = `the cluster runs ${cni.detected}, not Cilium`;
    return row;
  }
  row.running = cni.detectedVersion || 'unknown';
  row.runningKnown = !!cni.detectedVersion;
  if (condition?.status === 'True') {
    // ChartNewer: the chart this Ichor embeds is newer; the message names it.
    row.hint = 'Chart upgrade available';
    row.note = condition.message;
    row.upgrade = 'cni';
  } else if (condition?.message) {
    row.note = condition.message;
  }
  return row;
}

/** The card's rows, in the order a person reads them. */
export function versionRows(object: TalosClusterObject): VersionRow[] {
  const contract = object.spec?.versionContract;
  return [
    componentRow(object, 'talos'),
    {
      key: 'contract',
      label: 'Version contract',
      running: contract || 'unknown',
      runningKnown: !!contract,
    },
    componentRow(object, 'kubernetes'),
    ciliumRow(object),
  ];
}

export type Compatibility = 'compatible' | 'incompatible' | 'unknown-version' | 'not-judged';

export interface CompatibilitySummary {
  state: Compatibility;
  label: string;
  message?: string;
}

/** The ``VersionsCompatible`` condition, in words. */
export function compatibility(object: TalosClusterObject): CompatibilitySummary {
  const condition = conditionOf(object.status?.conditions, 'VersionsCompatible');
  if (!condition) {
    return { state: 'not-judged', label: 'Not judged yet' };
  }
  const message = condition.message || undefined;
  if (condition.status === 'True') {
    return { state: 'compatible', label: 'Compatible', message };
  }
  if (condition.reason === 'UnknownVersion') {
    return { state: 'unknown-version', label: 'Unknown version', message };
  }
  if (condition.status === 'False') {
    return { state: 'incompatible', label: 'Incompatible', message };
  }
  return { state: 'not-judged', label: condition.reason || 'Not judged', message };
}

export interface BlockedSummary {
  /** "2 newer releases are not offered" or absent when none is known. */
  headline?: string;
  lines: { component: string; version: string; blocker: string; message: string }[];
}

/** ``status.blockedReleases``: the nearest release of each component the choices skip. */
export function blockedReleases(object: TalosClusterObject): BlockedSummary {
  const blocked = object.status?.blockedReleases;
  if (!blocked) {
    return { lines: [] };
  }
  const lines = (blocked.nearest ?? []).map((line: BlockedLine) => ({
    component: componentLabel(line.component),
    version: line.version ?? '?',
    blocker: line.blocker ?? '',
    message: line.message ?? '',
  }));
  const releases = blocked.releases ?? blocked.count ?? 0;
  return {
    headline:
      releases > 0
        ? `${releases} newer ${releases === 1 ? 'release is' : 'releases are'} not offered`
        : undefined,
    lines,
  };
}

function componentLabel(component: string | undefined): string {
  if (component === 'talos' || component === 'kubernetes' || component === 'cni') {
    return COMPONENT_NAMES[component];
  }
  return component || '?';
}

export interface AutoPatchSummary {
  label: string;
  detail?: string;
}

/** ``status.autoPatch``: on or off, the window, and why nothing runs now. */
export function autoPatch(status: AutoPatchStatus | null | undefined): AutoPatchSummary {
  if (!status) {
    return { label: 'Off', detail: 'auto-patch is not configured for this cluster' };
  }
  const parts: string[] = [];
  if (status.suspension) {
    const s = status.suspension;
    parts.push(
      `suspended after ${s.operation ?? 'an operation'} (${componentLabel(s.component)} ${
        s.version ?? ''
      }): ${s.reason ?? 'no reason recorded'}`.replace(' )', ')')
    );
  }
  if (status.message) {
    parts.push(status.message);
  }
  if (status.lastRun) {
    const r = status.lastRun;
    parts.push(
      `last run ${r.operation ?? '?'}: ${componentLabel(r.component)} ${r.version ?? '?'} ${
        r.result ?? ''
      }`.trim()
    );
  }
  if (!status.enabled) {
    return { label: 'Off', detail: parts.join('; ') || undefined };
  }
  const window = status.nextWindow;
  let label = 'On';
  if (status.windowOpen && window?.end) {
    label = `On, window open until ${window.end}`;
  } else if (window?.start) {
    label = `On, next window ${window.start} to ${window.end ?? '?'}`;
  } else {
    label = 'On, no window due';
  }
  return { label, detail: parts.join('; ') || undefined };
}

/** The cluster's name as a person writes it: ``namespace/name``. */
export function clusterName(object: TalosClusterObject): string {
  return `${object.metadata?.namespace ?? ''}/${object.metadata?.name ?? ''}`;
}
