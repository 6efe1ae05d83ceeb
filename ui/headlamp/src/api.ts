/**
 * The two requests the upgrade dialog makes besides reads, through Headlamp's request
 * layer (so they carry the signed-in user's credentials): the TalosOperation create, as
 * a server-side dry run (the plan) or for real, and the SelfSubjectAccessReview for the
 * override verb. Their answers are read by the pure functions of ./mapping.
 */

import { ApiProxy } from '@kinvolk/headlamp-plugin/lib';
import { GROUP, VERSION } from './api-types';
import { Access, accessFromError, accessFromReview, Target } from './mapping/access';
import { OperationBody, parseWarnings, PlanAnswer, readFailure } from './mapping/plan';

export type CreateAnswer = PlanAnswer & { name?: string };

/** POST the operation; ``dryRun`` makes it the plan (nothing is stored, no Event). */
export async function submitOperation(
  namespace: string,
  body: OperationBody,
  dryRun: boolean
): Promise<CreateAnswer> {
  const path =
    `/apis/${GROUP}/${VERSION}/namespaces/${encodeURIComponent(namespace)}/talosoperations` +
    (dryRun ? '?dryRun=All' : '');
  try {
    const response: Response = await ApiProxy.request(path, {
      method: 'POST',
      body: JSON.stringify(body),
      headers: { 'Content-Type': 'application/json' },
      isJSON: false,
    });
    const warnings = parseWarnings(response.headers.get('Warning'));
    let name: string | undefined;
    try {
      name = (await response.json())?.metadata?.name;
    } catch {
      name = undefined;
    }
    return name ? { kind: 'accepted', warnings, name } : { kind: 'accepted', warnings };
  } catch (error) {
    return readFailure(error);
  }
}

/** Whether the signed-in user holds ``override`` on this TalosCluster. */
export async function checkOverride(target: Target): Promise<Access> {
  const review = {
    apiVersion: 'authorization.k8s.io/v1',
    kind: 'SelfSubjectAccessReview',
    spec: {
      resourceAttributes: {
        group: GROUP,
        resource: 'talosclusters',
        verb: 'override',
        namespace: target.namespace,
        name: target.name,
      },
    },
  };
  try {
    const answer = await ApiProxy.request(
      '/apis/authorization.k8s.io/v1/selfsubjectaccessreviews',
      {
        method: 'POST',
        body: JSON.stringify(review),
        headers: { 'Content-Type': 'application/json' },
      }
    );
    return accessFromReview(answer, target);
  } catch (error) {
    return accessFromError(error, target);
  }
}
