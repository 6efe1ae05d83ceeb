/**
 * Events on a TalosCluster, newest first: Ichor records a passed refusal as a Warning
 * Event (``Override``, ``AdoptedIncompatible``) and the executors' steps as Events.
 */

export interface EventObject {
  type?: string;
  reason?: string;
  message?: string;
  count?: number;
  firstTimestamp?: string | null;
  lastTimestamp?: string | null;
  eventTime?: string | null;
  involvedObject?: { kind?: string; name?: string; namespace?: string };
  metadata?: { name?: string; namespace?: string; uid?: string; creationTimestamp?: string };
}

export interface EventRow {
  key: string;
  type: string;
  reason: string;
  message: string;
  time: string;
  count: number;
}

function when(event: EventObject): string {
  return (
    event.lastTimestamp ||
    event.eventTime ||
    event.firstTimestamp ||
    event.metadata?.creationTimestamp ||
    ''
  );
}

export function clusterEvents(
  events: EventObject[],
  cluster: { namespace: string; name: string }
): EventRow[] {
  return events
    .filter(
      e =>
        e?.involvedObject?.kind === 'TalosCluster' &&
        e.involvedObject.name === cluster.name &&
        (e.involvedObject.namespace ?? e.metadata?.namespace) === cluster.namespace
    )
    .map(e => ({
      key: e.metadata?.uid || `${e.metadata?.name}`,
      type: e.type || 'Normal',
      reason: e.reason || '',
      message: e.message || '',
      time: when(e),
      count: e.count ?? 1,
    }))
    .sort((a, b) => b.time.localeCompare(a.time) || a.key.localeCompare(b.key));
}
