import { Client, Connection, type TLSConfig } from '@temporalio/client';
import { NativeConnection } from '@temporalio/worker';
import { temporal } from '@temporalio/proto';
import { ALL_SEARCH_ATTRIBUTES } from '../../contract';
import { SearchAttributeType } from '@temporalio/common';
import { workflowTypeBinding } from './typeBinding';

const INDEXED = temporal.api.enums.v1.IndexedValueType;
const INDEXED_TYPE: Record<string, temporal.api.enums.v1.IndexedValueType> = {
  [SearchAttributeType.INT]: INDEXED.INDEXED_VALUE_TYPE_INT,
  [SearchAttributeType.KEYWORD]: INDEXED.INDEXED_VALUE_TYPE_KEYWORD,
  [SearchAttributeType.TEXT]: INDEXED.INDEXED_VALUE_TYPE_TEXT,
  [SearchAttributeType.BOOL]: INDEXED.INDEXED_VALUE_TYPE_BOOL,
  [SearchAttributeType.DOUBLE]: INDEXED.INDEXED_VALUE_TYPE_DOUBLE,
  [SearchAttributeType.DATETIME]: INDEXED.INDEXED_VALUE_TYPE_DATETIME,
  [SearchAttributeType.KEYWORD_LIST]: INDEXED.INDEXED_VALUE_TYPE_KEYWORD_LIST,
};

/**
 * Registers the product's search attributes on a server that may not have them (an
 * external server, or a dev server whose SQLite file predates an attribute).
 */
export async function ensureSearchAttributes(connection: Connection, namespace: string): Promise<void> {
  const existing = await connection.operatorService.listSearchAttributes({ namespace });
  const missing: Record<string, temporal.api.enums.v1.IndexedValueType> = {};
  for (const key of ALL_SEARCH_ATTRIBUTES) {
    if (!(key.name in (existing.customAttributes ?? {}))) missing[key.name] = INDEXED_TYPE[key.type];
  }
  if (Object.keys(missing).length === 0) return;
  try {
    await connection.operatorService.addSearchAttributes({ namespace, searchAttributes: missing });
  } catch (err) {
    // Another instance registering the same attributes at the same moment is fine.
    if (!/already exists/i.test(String(err))) throw err;
  }
}

export interface TemporalConnections {
  connection: Connection;
  client: Client;
  nativeConnection: NativeConnection;
  close(): Promise<void>;
}

export async function connectTemporal(opts: {
  address: string;
  namespace: string;
  dataConverter?: Client['options']['dataConverter'];
  /** mTLS to the server (./tls); undefined: plain gRPC, as the loopback dev server speaks. */
  tls?: TLSConfig;
}): Promise<TemporalConnections> {
  const connection = await Connection.connect({ address: opts.address, tls: opts.tls });
  const nativeConnection = await NativeConnection.connect({ address: opts.address, tls: opts.tls });
  // Workers refuse a workflow input that does not name its workflow type (./typeBinding).
  const client = new Client({ connection, namespace: opts.namespace, dataConverter: opts.dataConverter, interceptors: workflowTypeBinding() });
  return {
    connection,
    client,
    nativeConnection,
    close: async () => {
      await nativeConnection.close();
      await connection.close();
    },
  };
}
