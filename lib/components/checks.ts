/** Load-time checks shared by components whose params name variables without braces. */
import type { CheckScope } from '../canvas/component';
import type { DslProblem } from '../canvas/errors';
import { asReference } from '../canvas/references';

type Problem = Omit<DslProblem, 'component_id'>;

/** `text` must be a variable reference whose component, if any, exists. */
export function checkVariable(text: string, scope: CheckScope, field: string): Problem[] {
  const ref = asReference(text);
  if (!ref) return [{ field, message: `"${text}" is not a variable reference (e.g. "sys.query" or "Agent:Id@content")` }];
  if (ref.kind === 'component' && !scope.has(ref.componentId)) {
    return [{ field, message: `references a missing component "${ref.componentId}"` }];
  }
  return [];
}

/** Ids in `ids` must exist. */
export function checkTargets(ids: readonly string[], scope: CheckScope, field: string): Problem[] {
  return ids
    .filter((id) => !scope.has(id))
    .map((id) => ({ field, message: `refers to a missing component "${id}"` }));
}

/** The single start node among a container's children must be of `kind`. */
export function checkStartNode(scope: CheckScope, startIsKind: (name: string | undefined) => boolean, kind: string): Problem[] {
  const children = scope.childrenOf(scope.componentId);
  const starts = children.filter((c) => startIsKind(scope.componentName(c)));
  return starts.length === 1 ? [] : [{ field: 'components', message: `needs exactly one ${kind} child, found ${starts.length}` }];
}

/** A list given as one string in older DSLs. */
export function idList(value: string | readonly string[] | null | undefined): string[] {
  if (value === null || value === undefined || value === '') return [];
  return typeof value === 'string' ? [value] : [...new Set(value)];
}

/** A start node (IterationItem, LoopItem) must sit directly inside its kind of container. */
export function checkInside(scope: CheckScope, container: string, message: string): Problem[] {
  const parent = scope.parentOf(scope.componentId);
  return parent !== undefined && scope.componentName(parent) !== container ? [{ field: 'parent_id', message }] : [];
}
