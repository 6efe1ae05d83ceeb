/**
 * Ichor's kinds as Headlamp resource classes (the cert-manager plugin's pattern): the
 * lists, gets and watches go through Headlamp's own request layer, so they reach the
 * cluster the way every Headlamp page does, as the signed-in user.
 */

import { KubeObject, KubeObjectInterface } from '@kinvolk/headlamp-plugin/lib/k8s/cluster';
import {
  API_VERSION,
  TalosClusterSpec,
  TalosClusterStatus,
  TalosOperationSpec,
  TalosOperationStatus,
} from './api-types';

export interface TalosClusterInterface extends KubeObjectInterface {
  spec: TalosClusterSpec;
  status?: TalosClusterStatus;
}

export interface TalosOperationInterface extends KubeObjectInterface {
  spec: TalosOperationSpec;
  status?: TalosOperationStatus;
}

export class TalosCluster extends KubeObject<TalosClusterInterface> {
  static kind = 'TalosCluster';
  static apiName = 'talosclusters';
  static apiVersion = API_VERSION;
  static isNamespaced = true;

  static get detailsRoute() {
    return 'ichor-cluster';
  }

  get spec() {
    return this.jsonData.spec;
  }

  get status() {
    return this.jsonData.status;
  }
}

export class TalosOperation extends KubeObject<TalosOperationInterface> {
  static kind = 'TalosOperation';
  static apiName = 'talosoperations';
  static apiVersion = API_VERSION;
  static isNamespaced = true;

  get spec() {
    return this.jsonData.spec;
  }

  get status() {
    return this.jsonData.status;
  }
}

/** A resource Headlamp shows (its generic custom resource page too) is a TalosCluster. */
export function isTalosCluster(resource: unknown): resource is KubeObject {
  const data = (resource as { jsonData?: { kind?: string; apiVersion?: string } })?.jsonData;
  return data?.kind === 'TalosCluster' && !!data.apiVersion?.startsWith('ichor.dev/');
}

/** Core Events, read to show what Ichor recorded on a TalosCluster. */
export class ClusterEvent extends KubeObject<KubeObjectInterface> {
  static kind = 'Event';
  static apiName = 'events';
  static apiVersion = 'v1';
  static isNamespaced = true;
}
