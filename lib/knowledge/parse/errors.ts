/**
 * A document that cannot be parsed. Its `message` is the reason a user reads: the document's
 * `progress_msg` when it ends `FAIL` ("the file is not UTF-8 text"), so it names the problem
 * in the document, never a library's internals (those are in `cause`).
 */
export class DocumentParseError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'DocumentParseError';
  }
}
