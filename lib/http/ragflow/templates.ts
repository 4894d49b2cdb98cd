/**
 * `GET /api/v1/agents/templates`: the agent templates, in the shape of RAGFlow's
 * `canvas_template` rows (`title` and `description` per language). Easel's templates are the
 * example workflows it ships (examples/, the ones `npm start` loads as `ex-*`), bundled with the
 * code so that Lambda serves them too. Easel keeps no templates per tenant: a tenant's own
 * workflows are its agents (`GET /api/v1/agents`).
 */
import callback from '../../../examples/callback-request.json';
import formIntake from '../../../examples/form-intake.json';
import loopSurvey from '../../../examples/loop-survey.json';
import supportTriage from '../../../examples/support-triage.json';
import type { AppDeps } from '../app';
import { guardOf, routeGroup } from './context';
import { success } from './envelope';

interface Example {
  id: string;
  name: string;
  description: string;
  dsl: Record<string, unknown>;
}

/** The shipped examples, in id order (a test checks this list against examples/). */
export const EXAMPLES: readonly Example[] = ([callback, formIntake, loopSurvey, supportTriage] as Example[]).sort((a, b) => a.id.localeCompare(b.id));

export function templateView(e: Example) {
  return {
    id: e.id,
    avatar: null,
    title: { en: e.name },
    description: { en: e.description },
    canvas_type: null,
    canvas_types: [],
    canvas_category: 'agent_canvas',
    dsl: e.dsl,
  };
}

export function templateRoutes(deps: AppDeps) {
  const app = routeGroup();
  const guard = guardOf(deps);
  app.get('/templates', guard(async (c) => success(c, EXAMPLES.map(templateView))));
  return app;
}
