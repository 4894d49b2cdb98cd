/** ExitLoop: leaves the enclosing Loop at once; the Loop's downstream runs next. */
import { z } from 'zod';
import { defineComponent } from '../canvas/component';

export const exitLoop = defineComponent({
  name: 'ExitLoop',
  params: z.looseObject({}),
  check(_p, scope) {
    const parent = scope.parentOf(scope.componentId);
    return parent === undefined || scope.componentName(parent) !== 'Loop'
      ? [{ field: 'parent_id', message: 'an ExitLoop must be directly inside a Loop' }]
      : [];
  },
  invoke() {
    return { exitScope: true };
  },
});
