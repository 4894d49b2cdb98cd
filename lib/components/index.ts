/**
 * The components Easel ships, by `component_name`: an explicit list, extended by
 * `withComponents`; the engine takes any registry. Components that call out (LLM, Agent,
 * Categorize, Invoke, Retrieval) find their model resolver, HTTP guard and knowledge bases in
 * the run's services.
 */
import { type ComponentDefinition, type ComponentRegistry, createRegistry } from '../canvas/component';
import { agent } from './agent';
import { begin } from './begin';
import { categorize } from './categorize';
import { dataOperations } from './data-operations';
import { exitLoop } from './exit-loop';
import { iteration } from './iteration';
import { invoke } from './invoke';
import { iterationItem } from './iteration-item';
import { listOperations } from './list-operations';
import { llm } from './llm';
import { loop } from './loop';
import { loopItem } from './loop-item';
import { message } from './message';
import { refusedComponents } from './refused';
import { retrieval } from './retrieval';
import { stringTransform } from './string-transform';
import { toolComponent } from './tool-component';
import { builtinToolKinds } from '../tools/registry';
import { switchComponent } from './switch';
import { userFillUp } from './user-fill-up';
import { variableAggregator } from './variable-aggregator';
import { variableAssigner } from './variable-assigner';

export const coreComponents: readonly ComponentDefinition<any>[] = [
  begin,
  userFillUp,
  message,
  switchComponent,
  variableAssigner,
  variableAggregator,
  iteration,
  iterationItem,
  loop,
  loopItem,
  exitLoop,
  llm,
  agent,
  categorize,
  invoke,
  retrieval,
  dataOperations,
  listOperations,
  ...refusedComponents,
  stringTransform,
  // the built-in tools may sit on the canvas too (Retrieval has its own component)
  ...builtinToolKinds.filter((kind) => kind.name !== 'Retrieval').map((kind) => toolComponent(kind)),
];

export const builtinComponents: ComponentRegistry = createRegistry(...coreComponents);

/** A registry with extra components (and overrides by name) on top of the built-in ones. */
export function withComponents(...extra: readonly ComponentDefinition<any>[]): ComponentRegistry {
  return createRegistry(...coreComponents, ...extra);
}
