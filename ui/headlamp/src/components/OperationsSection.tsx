/**
 * A cluster's TalosOperations, newest first, live (Headlamp's watch): the phase, the
 * sentence that explains it, and a link to the Job (its Pods carry the logs).
 */

import { SectionBox } from '@kinvolk/headlamp-plugin/lib/CommonComponents';
import { Table, TableBody, TableCell, TableHead, TableRow, Typography } from '@mui/material';
import { ReactNode } from 'react';
import { OperationRow } from '../mapping/operations';

export interface OperationsViewProps {
  cluster: string;
  rows: OperationRow[];
  error?: string;
  /** A link to the Job's page; the view shows the name when none is given. */
  jobLink?: (row: OperationRow) => ReactNode;
}

export function OperationsView({ cluster, rows, error, jobLink }: OperationsViewProps) {
  return (
    <SectionBox title="Operations">
      {error && <Typography color="error">{error}</Typography>}
      {rows.length === 0 && !error ? (
        <Typography color="text.secondary">No TalosOperation for {cluster} yet.</Typography>
      ) : (
        <Table size="small" aria-label={`TalosOperations of ${cluster}`}>
          <TableHead>
            <TableRow>
              {['Name', 'Upgrade', 'Phase', 'Message', 'Started', 'Job'].map(h => (
                <TableCell key={h} component="th" scope="col">
                  {h}
                </TableCell>
              ))}
            </TableRow>
          </TableHead>
          <TableBody>
            {rows.map(row => (
              <TableRow key={row.name} data-operation={row.name}>
                <TableCell component="th" scope="row">
                  {row.name}
                  {row.startedBy && (
                    <Typography variant="body2" color="text.secondary">
                      started by {row.startedBy}
                    </Typography>
                  )}
                </TableCell>
                <TableCell>
                  {row.what}
                  {row.override && (
                    <Typography variant="body2" color="text.secondary">
                      override: true
                    </Typography>
                  )}
                </TableCell>
                <TableCell data-phase={row.phase}>
                  <strong>{row.phase}</strong>
                </TableCell>
                <TableCell>{row.message || '—'}</TableCell>
                <TableCell>{row.startedAt ?? '—'}</TableCell>
                <TableCell>{row.jobName ? (jobLink ? jobLink(row) : row.jobName) : '—'}</TableCell>
              </TableRow>
            ))}
          </TableBody>
        </Table>
      )}
    </SectionBox>
  );
}
