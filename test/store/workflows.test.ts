/**
 * Workflow records on DynamoDB Local: RAGFlow's canvas type, category and tags are kept and
 * changed one by one, and `workflowRecords` reads every live workflow of a tenant whole (the
 * listing index holds only some attributes), past one batch read of 100.
 */
import { describe, expect, it } from 'vitest';
import { createWorkflow, deleteWorkflow, getWorkflow, updateWorkflow, workflowRecords } from '../../lib/store/workflows';
import { fixture } from '../helpers/canvas';
import { newTenant, testStore } from '../helpers/engine';

const store = testStore();
const dsl = fixture('form-intake');

describe('workflow records', () => {
  it('keep a canvas type, category and tags, each changed or cleared on its own', async () => {
    const tenant = newTenant();
    const made = await createWorkflow(store, { tenant, id: 'wf-a', name: 'A', description: 'first', canvasType: 'Marketing', canvasCategory: 'dataflow_canvas', dsl });
    expect(made).toMatchObject({ canvasType: 'Marketing', canvasCategory: 'dataflow_canvas', tags: [] });
    expect(await getWorkflow(store, tenant, 'wf-a')).toMatchObject({ name: 'A', description: 'first', canvasType: 'Marketing', canvasCategory: 'dataflow_canvas', tags: [] });
    await updateWorkflow(store, tenant, 'wf-a', { tags: ['x', 'y'] });
    expect(await getWorkflow(store, tenant, 'wf-a')).toMatchObject({ name: 'A', canvasType: 'Marketing', tags: ['x', 'y'] });
    await updateWorkflow(store, tenant, 'wf-a', { canvasType: null, name: 'A2' });
    expect(await getWorkflow(store, tenant, 'wf-a')).toMatchObject({ name: 'A2', description: 'first', canvasType: null, canvasCategory: 'dataflow_canvas', tags: ['x', 'y'] });
    // the defaults
    expect(await createWorkflow(store, { tenant, id: 'wf-b', name: 'B', dsl })).toMatchObject({ canvasType: null, canvasCategory: 'agent_canvas', tags: [] });
  });

  it('are read whole for every live workflow of a tenant, newest first, past 100', async () => {
    const tenant = newTenant();
    const ids = Array.from({ length: 103 }, (_, i) => `wf-${String(i).padStart(3, '0')}`);
    for (const id of ids) await createWorkflow(store, { tenant, id, name: id, description: `about ${id}`, canvasType: 'Other', dsl });
    await deleteWorkflow(store, tenant, 'wf-050');
    const records = await workflowRecords(store, tenant);
    expect(records.length).toBe(102);
    expect(records.map((w) => w.id)).not.toContain('wf-050');
    expect(records.every((w) => w.description === `about ${w.id}` && w.canvasType === 'Other')).toBe(true);
    const times = records.map((w) => w.createdAt);
    expect([...times].sort().reverse()).toEqual(times);
    expect(await workflowRecords(store, newTenant())).toEqual([]);
  });
});
