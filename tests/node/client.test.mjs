// The Sluiceway gRPC API called from Node with @grpc/grpc-js and @grpc/proto-loader, the way a
// client in another language would: from the bundled protos (`make api-protos`), no generated code.
//
// Env: SLUICEWAY_SERVER (host:port of a running control plane), SLUICEWAY_TEST_ID (unique suffix
// for names), SLUICEWAY_API_PROTOS (the bundle; default var/api-protos of this checkout).
// Run by tests/integration/test_node_client.py; by hand: `node --test tests/node/client.test.mjs`.

import assert from 'node:assert/strict';
import path from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';

import grpc from '@grpc/grpc-js';
import protoLoader from '@grpc/proto-loader';
import protobuf from 'protobufjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const protosDir = process.env.SLUICEWAY_API_PROTOS || path.join(here, '..', '..', 'var', 'api-protos');
const server = process.env.SLUICEWAY_SERVER || 'localhost:8083';
const testId = process.env.SLUICEWAY_TEST_ID || Math.random().toString(16).slice(2, 12);

const packageDefinition = protoLoader.loadSync('sluiceway/api/v1/connectors.proto', {
  includeDirs: [protosDir],
  keepCase: true,
  enums: String,
  longs: String,
  defaults: true,
  oneofs: true,
});
const api = grpc.loadPackageDefinition(packageDefinition).sluiceway.api.v1;
const connectors = new api.ConnectorService(server, grpc.credentials.createInsecure());
after(() => connectors.close());

// google.rpc.Status and its detail messages, for the `grpc-status-details-bin` trailer.
const errorTypes = new protobuf.Root();
errorTypes.resolvePath = (_origin, target) => path.join(protosDir, target);
errorTypes.loadSync(['google/rpc/status.proto', 'google/rpc/error_details.proto'], { keepCase: true });
const Status = errorTypes.lookupType('google.rpc.Status');

function call(method, request) {
  return new Promise((resolve, reject) => {
    connectors[method](request, { deadline: Date.now() + 15_000 }, (err, response) =>
      err ? reject(err) : resolve(response),
    );
  });
}

async function rejection(method, request) {
  try {
    await call(method, request);
  } catch (err) {
    return err;
  }
  assert.fail(`${method} succeeded but was expected to fail`);
}

// The rich error model: the trailer is a serialized google.rpc.Status whose details are Anys.
function statusDetails(err) {
  const [raw] = err.metadata.get('grpc-status-details-bin');
  assert.ok(raw, 'the error has no grpc-status-details-bin trailer');
  const status = Status.decode(raw);
  assert.equal(status.code, err.code);
  const details = {};
  for (const any of status.details) {
    const typeName = any.type_url.slice(any.type_url.lastIndexOf('/') + 1);
    const type = errorTypes.lookupType(typeName);
    details[typeName] = type.toObject(type.decode(any.value), { defaults: true });
  }
  return details;
}

const connectorId = `node-${testId}`;
const name = `connectors/${connectorId}`;
const config = { 'connector.class': 'DataGenSource', topic: `t-${testId}`, 'tasks.max': '1' };

test('connector lifecycle', async (t) => {
  await t.test('create, paused so no executor is needed', async () => {
    const created = await call('CreateConnector', {
      connector_id: connectorId,
      connector: { config },
      initial_state: 'INITIAL_STATE_PAUSED',
    });
    assert.equal(created.name, name);
    assert.equal(created.target_state, 'TARGET_STATE_PAUSED');
  });

  await t.test('get returns the config and an etag', async () => {
    const got = await call('GetConnector', { name, view: 'INFO' });
    assert.equal(got.name, name);
    for (const [key, value] of Object.entries(config)) assert.equal(got.config[key], value, key);
    assert.equal(got.type, 'CONNECTOR_TYPE_SOURCE');
    assert.ok(got.etag, 'no etag');
  });

  await t.test('list, one connector a page, finds it', async () => {
    let pageToken = '';
    let pages = 0;
    let found = false;
    do {
      const page = await call('ListConnectors', { page_size: 1, page_token: pageToken, view: 'CONNECTOR_VIEW_NAMES' });
      assert.ok(page.connectors.length <= 1);
      found = page.connectors.some((c) => c.name === name);
      pageToken = page.next_page_token;
      pages += 1;
    } while (!found && pageToken && pages < 10_000);
    assert.ok(found, `${name} not listed in ${pages} pages`);
  });

  await t.test('status', async () => {
    const status = await call('GetConnectorStatus', { name });
    assert.equal(status.name, name);
    assert.equal(status.type, 'CONNECTOR_TYPE_SOURCE');
    assert.ok(status.connector, 'no connector instance status');
    assert.equal(typeof status.connector.state, 'string');
  });

  await t.test('pause and resume', async () => {
    assert.equal((await call('PauseConnector', { name })).target_state, 'TARGET_STATE_PAUSED');
    assert.equal((await call('ResumeConnector', { name })).target_state, 'TARGET_STATE_RUNNING');
  });

  await t.test('watch status: the first event, then cancel', async () => {
    const stream = connectors.WatchStatus({ name, include_initial: true });
    const event = await new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('no status event within 15 s')), 15_000);
      stream.on('data', (e) => {
        clearTimeout(timer);
        resolve(e);
      });
      stream.on('error', (err) => {
        clearTimeout(timer);
        if (err.code !== grpc.status.CANCELLED) reject(err);
      });
    });
    stream.cancel();
    assert.ok(event.name === name || event.name.startsWith(`${name}/tasks/`), event.name);
    assert.ok(event.status, 'event without a status');
  });

  await t.test('delete, then get fails NOT_FOUND', async () => {
    await call('DeleteConnector', { name });
    const err = await rejection('GetConnector', { name });
    assert.equal(err.code, grpc.status.NOT_FOUND, err.message);
    assert.equal(statusDetails(err)['google.rpc.ErrorInfo'].reason, 'CONNECTOR_NOT_FOUND');
  });
});

test('a rejected config carries ErrorInfo and BadRequest', async () => {
  const err = await rejection('CreateConnector', {
    connector_id: `node-bad-${testId}`,
    connector: { config: { ...config, 'tasks.max': '0' } },
    initial_state: 'INITIAL_STATE_PAUSED',
  });
  assert.equal(err.code, grpc.status.INVALID_ARGUMENT, err.message);
  const details = statusDetails(err);
  const info = details['google.rpc.ErrorInfo'];
  assert.ok(info, `no ErrorInfo in ${Object.keys(details)}`);
  assert.equal(info.reason, 'INVALID_CONFIG');
  assert.equal(info.domain, 'sluiceway');
  const badRequest = details['google.rpc.BadRequest'];
  assert.ok(badRequest, `no BadRequest in ${Object.keys(details)}`);
  const fields = badRequest.field_violations.map((v) => v.field);
  assert.ok(fields.includes('connector.config["tasks.max"]'), `violations: ${fields}`);
});
