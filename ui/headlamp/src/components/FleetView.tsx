/**
 * The fleet: every TalosCluster with its versions, compatibility, the patches its status
 * offers, its running operations and auto-patch, sortable and filterable, under one
 * attention line across clusters.
 */

import { SectionBox } from '@kinvolk/headlamp-plugin/lib/CommonComponents';
import {
  Alert,
  Table,
  TableBody,
  TableCell,
  TableHead,
  TableRow,
  TableSortLabel,
  TextField,
  Typography,
} from '@mui/material';
import { ReactNode } from 'react';
import { FleetRow, SortKey } from '../mapping/fleet';

export interface FleetViewProps {
  rows: FleetRow[];
  attention: string | null;
  filter: string;
  sort: { key: SortKey; descending: boolean };
  error?: string;
  onFilter: (text: string) => void;
  onSort: (key: SortKey) => void;
  clusterLink?: (row: FleetRow) => ReactNode;
}

const COLUMNS: { key: SortKey | null; label: string }[] = [
  { key: 'name', label: 'Cluster' },
  { key: 'talos', label: 'Talos' },
  { key: 'kubernetes', label: 'Kubernetes' },
  { key: null, label: 'Cilium' },
  { key: 'compatibility', label: 'Compatibility' },
  { key: 'patches', label: 'Patches' },
  { key: 'operations', label: 'Running operations' },
  { key: null, label: 'Auto-patch' },
];

export function FleetView(props: FleetViewProps) {
  const { rows, attention, filter, sort, error, onFilter, onSort, clusterLink } = props;
  return (
    <SectionBox title="Talos clusters">
      {attention && (
        <Alert severity="info" sx={{ mb: 2 }} role="status">
          {attention}
        </Alert>
      )}
      {error && (
        <Alert severity="error" sx={{ mb: 2 }}>
          {error}
        </Alert>
      )}
      <TextField
        label="Filter clusters"
        size="small"
        value={filter}
        onChange={event => onFilter(event.target.value)}
        sx={{ mb: 2 }}
      />
      <Table size="small" aria-label="Talos clusters">
        <TableHead>
          <TableRow>
            {COLUMNS.map(column => (
              <TableCell
                key={column.label}
                component="th"
                scope="col"
                sortDirection={
                  column.key && sort.key === column.key ? (sort.descending ? 'desc' : 'asc') : false
                }
              >
                {column.key ? (
                  <TableSortLabel
                    active={sort.key === column.key}
                    direction={sort.key === column.key && sort.descending ? 'desc' : 'asc'}
                    onClick={() => onSort(column.key as SortKey)}
                  >
                    {column.label}
                  </TableSortLabel>
                ) : (
                  column.label
                )}
              </TableCell>
            ))}
          </TableRow>
        </TableHead>
        <TableBody>
          {rows.length === 0 && (
            <TableRow>
              <TableCell colSpan={COLUMNS.length}>
                <Typography color="text.secondary">
                  {filter ? 'No cluster matches the filter.' : 'No TalosCluster is visible.'}
                </Typography>
              </TableCell>
            </TableRow>
          )}
          {rows.map(row => (
            <TableRow key={row.key} data-cluster={row.key}>
              <TableCell component="th" scope="row">
                {clusterLink ? clusterLink(row) : row.key}
              </TableCell>
              <TableCell>{row.talos}</TableCell>
              <TableCell>{row.kubernetes}</TableCell>
              <TableCell>{row.cilium}</TableCell>
              <TableCell title={row.compatibilityMessage}>{row.compatibilityLabel}</TableCell>
              <TableCell>{row.patches.length ? row.patches.join(', ') : '—'}</TableCell>
              <TableCell>{row.runningOperations}</TableCell>
              <TableCell>{row.autoPatch}</TableCell>
            </TableRow>
          ))}
        </TableBody>
      </Table>
    </SectionBox>
  );
}
