/**
 * RAGFlow components Easel knows by name but does not offer: a DSL that uses one is refused
 * at load, naming it and saying why, rather than failing later in a run. Each needs something
 * outside a serverless run of a workflow. A host that provides it can register a real
 * definition under the same name (`withComponents`), which replaces the refusal.
 */
import { refusedComponent } from '../canvas/component';
import { REFUSED_TOOLS } from '../tools/refused';

const DOCUMENTS = 'it renders document files (PDF, DOCX, HTML) into file storage, which Easel does not provide';

export const refusedComponents = [
  refusedComponent('Browser', 'it drives a headless web browser, which Easel does not provide'),
  refusedComponent('DocGenerator', DOCUMENTS),
  // RAGFlow's older name for DocGenerator, and another spelling of it.
  refusedComponent('PDFGenerator', DOCUMENTS),
  refusedComponent('DocsGenerator', DOCUMENTS),
  refusedComponent('ExcelProcessor', 'it reads and writes spreadsheet files (Excel, CSV), which Easel does not provide'),
  // RAGFlow's tools may sit on the canvas too; those Easel does not offer are refused there as well
  ...Object.entries(REFUSED_TOOLS).map(([name, reason]) => refusedComponent(name, reason)),
];
