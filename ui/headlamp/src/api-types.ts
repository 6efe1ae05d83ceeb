/**
 * The shapes of Ichor's objects as the API server returns them (crds/, docs/api.md).
 *
 * Every field is optional: the status is the operator's, written over time, and other
 * engineers add to it; a reader that needs a field checks for it. Nothing here decides
 * anything: the rules stay on the server.
 */

export const GROUP = 'ichor.dev';
export const VERSION = 'v1alpha1';
export const API_VERSION = `${GROUP}/${VERSION}`;

export interface ObjectMeta {
  name?: string;
  namespace?: string;
  uid?: string;
  generateName?: string;
  creationTimestamp?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  generation?: number;
}

export interface Condition {
  type?: string;
  status?: string;
  reason?: string;
  message?: string;
  observedGeneration?: number;
  lastTransitionTime?: string;
}

export interface ChoiceGroup {
  recommended?: string | null;
  patch?: string[] | null;
  nextMinor?: string[] | null;
  default?: string | null;
  available?: boolean | null;
  unavailableReason?: string | null;
}

export interface BlockedLine {
  component?: string;
  version?: string;
  blocker?: string;
  message?: string;
}

export interface AutoPatchStatus {
  enabled?: boolean;
  windowOpen?: boolean;
  nextWindow?: { start?: string; end?: string } | null;
  lastRun?: {
    operation?: string;
    component?: string;
    version?: string;
    result?: string;
    time?: string;
  } | null;
  suspension?: {
    operation?: string;
    component?: string;
    version?: string;
    reason?: string;
    time?: string;
  } | null;
  reason?: string | null;
  message?: string | null;
}

export interface TalosClusterSpec {
  talosVersion?: string;
  kubernetesVersion?: string;
  versionContract?: string;
  cni?: { preset?: string };
  upgradeStrategy?: string;
}

export interface TalosClusterStatus {
  observedGeneration?: number;
  talosVersion?: string | null;
  kubernetesVersion?: string | null;
  nodes?: {
    count?: number;
    talosVersions?: string[];
    kubernetesVersions?: string[];
    differ?: boolean;
  } | null;
  cni?: {
    detected?: string | null;
    detectedVersion?: string | null;
    imageOverride?: string | null;
  } | null;
  upgradeChoices?: { talos?: ChoiceGroup | null; kubernetes?: ChoiceGroup | null } | null;
  blockedReleases?: { count?: number; releases?: number; nearest?: BlockedLine[] } | null;
  autoPatch?: AutoPatchStatus | null;
  conditions?: Condition[] | null;
}

export interface TalosClusterObject {
  apiVersion?: string;
  kind?: string;
  metadata?: ObjectMeta;
  spec?: TalosClusterSpec;
  status?: TalosClusterStatus;
}

export interface TalosOperationSpec {
  clusterRef?: { name?: string };
  type?: string;
  version?: string | null;
  override?: boolean;
}

export interface TalosOperationStatus {
  phase?: string | null;
  message?: string | null;
  startedAt?: string | null;
  finishedAt?: string | null;
  jobName?: string | null;
  conditions?: Condition[] | null;
}

export interface TalosOperationObject {
  apiVersion?: string;
  kind?: string;
  metadata?: ObjectMeta;
  spec?: TalosOperationSpec;
  status?: TalosOperationStatus;
}

/** An upgrade the dialog can plan: one component of one cluster. */
export type Component = 'talos' | 'kubernetes' | 'cni';

export const COMPONENT_NAMES: Record<Component, string> = {
  talos: 'Talos',
  kubernetes: 'Kubernetes',
  cni: 'Cilium',
};

export function conditionOf(
  conditions: Condition[] | null | undefined,
  type: string
): Condition | undefined {
  return (conditions ?? []).find(c => c?.type === type);
}
