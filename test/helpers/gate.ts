/**
 * A gate the test opens: something waits on `opened` until the test calls `open()`. Tests wait
 * on events they cause, never on the clock.
 *
 * @example
 *   const release = gate();
 *   model.enqueue({ kind: 'text', text: 'late', until: release.opened });
 *   // ... assert what happens while the model holds its answer ...
 *   release.open();
 */
export interface Gate {
  opened: Promise<void>;
  open(): void;
}

export function gate(): Gate {
  let open: () => void = () => undefined;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return { opened, open };
}
