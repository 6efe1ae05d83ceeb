/**
 * A TalosOperation as a row: what it upgrades, its phase and the sentence that explains
 * it (the CLI's ``follow`` reads the same: ``status.message``, else the first condition
 * that is not True and has a message), and the Job that runs it.
 */

import { COMPONENT_NAMES, TalosOperationObject } from '../api-types';

export const ACTIVE_PHASES = ['Pending', 'Running'];

export interface OperationRow {
  name: string;
  namespace: string;
  cluster: string;
  what: string;
  override: boolean;
  phase: string;
  active: boolean;
  message: string;
  created?: string;
  startedAt?: string;
  finishedAt?: string;
  jobName?: string;
  /** ``ichor.dev/started-by``: auto-patch or declarative; absent for a person's. */
  startedBy?: string;
}

export function operationWhat(op: TalosOperationObject): string {
  const type = op.spec?.type;
  if (type === 'cni') {
    return 'Cilium to the embedded chart';
  }
  if (type === 'talos' || type === 'kubernetes') {
    return `${COMPONENT_NAMES[type]} to ${op.spec?.version ?? '?'}`;
  }
  return `${type ?? 'unknown type'} ${op.spec?.version ?? ''}`.trim();
}

export function operationRow(op: TalosOperationObject): OperationRow {
  const status = op.status ?? {};
  const phase = status.phase || 'Pending';
  let message = status.message || '';
  if (!message) {
    const explaining = (status.conditions ?? []).find(c => c?.message && c.status !== 'True');
    message = explaining?.message ?? '';
  }
  const row: OperationRow = {
    name: op.metadata?.name ?? '',
    namespace: op.metadata?.namespace ?? '',
    cluster: op.spec?.clusterRef?.name ?? '',
    what: operationWhat(op),
    override: op.spec?.override === true,
    phase,
    active: ACTIVE_PHASES.includes(phase),
    message,
  };
  const optional: [keyof OperationRow, string | null | undefined][] = [
    ['created', op.metadata?.creationTimestamp],
    ['startedAt', status.startedAt],
    ['finishedAt', status.finishedAt],
    ['jobName', status.jobName],
    ['startedBy', op.metadata?.labels?.['ichor.dev/started-by']],
  ];
  for (const [key, value] of optional) {
    if (value) {
      (row as unknown as Record<string, unknown>)[key] = value;
    }
  }
  return row;
}

/** The operations of one cluster, newest first. */
export function clusterOperations(
  operations: TalosOperationObject[],
  cluster: { namespace: string; name: string }
): OperationRow[] {
  return operations
    .filter(
      op =>
        op?.metadata?.namespace === cluster.namespace && op.spec?.clusterRef?.name === cluster.name
    )
    .map(operationRow)
    .sort(
      (a, b) => (b.created ?? '').localeCompare(a.created ?? '') || a.name.localeCompare(b.name)
    );
}
