/**
 * Runs one turn in a process of its own, for the statelessness test: the request comes as
 * JSON in argv[2], the response body goes to stdout. Nothing is shared with other turns but
 * the table.
 */
import { builtinComponents } from '../../lib/components';
import { createDynamoClients } from '../../lib/store/setup';
import { executeTurn, type TurnRequest } from '../../lib/turns/execute';
import { testServices } from '../helpers/services';

const { request, endpoint, table, openaiUrl } = JSON.parse(process.argv[2] ?? '{}') as {
  request: TurnRequest;
  endpoint: string;
  table: string;
  openaiUrl: string;
};
const { doc } = createDynamoClients({ endpoint });
const result = await executeTurn(
  { store: { doc, table }, registry: builtinComponents, services: testServices({ openaiUrl }) },
  request,
);
process.stdout.write(result.body);
