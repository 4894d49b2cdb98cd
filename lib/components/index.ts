/**
 * The components Easel ships, by `component_name`. Later providers (LLM, Agent, Categorize,
 * Invoke) join by extending this map; the engine takes any registry.
 */
import { type ComponentDefinition, type ComponentRegistry, createRegistry } from '../canvas/component';
import { begin } from './begin';
import { exitLoop } from './exit-loop';
import { iteration } from './iteration';
import { iterationItem } from './iteration-item';
import { loop } from './loop';
import { loopItem } from './loop-item';
import { message } from './message';
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
];

export const builtinComponents: ComponentRegistry = createRegistry(...coreComponents);

/** A registry with extra components (and overrides by name) on top of the built-in ones. */
export function withComponents(...extra: readonly ComponentDefinition<any>[]): ComponentRegistry {
  return createRegistry(...coreComponents, ...extra);
}
