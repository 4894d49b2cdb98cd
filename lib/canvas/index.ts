/** The engine's public surface. */
export { type BatchInfo, Canvas, type CanvasOptions, entryPrologue, type RunInput, type TurnCheckpoint, type TurnControl, type TurnUsage } from './canvas';
export * from './component';
export { compileWorkflow, DSL_LIMITS, type Workflow, type WorkflowNode } from './dsl';
export * from './errors';
export * from './events';
export { FIELD_TYPES, type FieldType, type FormField, type PauseMail } from './forms';
export { type CanvasState, type HistoryEntry, RUN_STATUSES, type RunStatus, STATE_VERSION, type TurnHistoryEntry } from './state';
export { citationKey, MAX_REFERENCE_CHUNKS, MAX_REFERENCE_DOCS, type ReferenceChunk, type ReferenceDocument, type RunReference } from './run-references';
export { TextStream } from './text-stream';
export { type CallKind, type CallRecord, type CallReport, type CallSource, type CompletedCall, CallReplay, MAX_CALLS_PER_TURN, type ReplayDivergence, requestHash } from './calls';
