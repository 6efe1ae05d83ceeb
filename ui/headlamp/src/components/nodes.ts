import { TalosClusterObject } from '../api-types';

/** "3 Nodes, running different versions", or nothing when the status has no count. */
export function nodesText(cluster: TalosClusterObject): string | undefined {
  const count = cluster.status?.nodes?.count;
  if (typeof count !== 'number') {
    return undefined;
  }
  return `${count} ${count === 1 ? 'Node' : 'Nodes'}${
    cluster.status?.nodes?.differ ? ', running different versions' : ''
  }`;
}
