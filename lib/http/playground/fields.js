// @ts-check
/**
 * Form fields as the playground and the hosted form page (form.js) render them: one control
 * per field type, a decision as buttons, and the two DOM helpers both pages use.
 */

/** @typedef {{name: string, type: string, optional: boolean, options?: string[], decisions?: {id: string, label: string}[], description?: string, value: unknown}} Field */
/** @typedef {{key: string, label: string, root: HTMLElement, focusable: HTMLElement, read(): Promise<unknown>, describe?(value: unknown): string, showError(message: string | null): void}} FieldControl */

/**
 * @template {keyof HTMLElementTagNameMap} K
 * @param {K} tag
 * @param {Record<string, string | number | boolean | null | undefined>} [attrs] `text` sets textContent
 * @param {(Node | string | null | undefined | false)[]} [children]
 * @returns {HTMLElementTagNameMap[K]}
 */
export function h(tag, attrs = {}, children = []) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (name === 'text') node.textContent = String(value);
    else node.setAttribute(name, value === true ? '' : String(value));
  }
  for (const child of children) if (child !== null && child !== undefined && child !== false) node.append(child);
  return node;
}

/** @param {unknown} value */
export function display(value) {
  if (value === null || value === undefined) return '';
  if (typeof value === 'string') return value;
  return JSON.stringify(value);
}

/**
 * One form field: its label, control, description and error line.
 * @param {string} prefix @param {string} key @param {Field} field
 * @param {((file: File) => Promise<string>) | null} upload turns a chosen file into its id; null where uploads are not possible
 * @returns {FieldControl}
 */
export function fieldControl(prefix, key, field, upload) {
  const id = `${prefix}-field-${key.replace(/[^A-Za-z0-9_-]/g, '_')}`;
  const label = field.name || key;
  const required = !field.optional;
  const preset = field.value;
  const error = h('p', { class: 'field-error', id: `${id}-error`, hidden: true });
  const description = field.description ? h('p', { class: 'field-help', id: `${id}-help`, text: field.description }) : null;
  const describedBy = [description ? `${id}-help` : '', `${id}-error`].filter(Boolean).join(' ');
  const marker = required ? h('span', { class: 'required', 'aria-hidden': 'true', text: ' *' }) : h('span', { class: 'optional', text: ' (optional)' });
  const common = { id, name: key, 'aria-describedby': describedBy };
  if (field.decisions && field.decisions.length > 0) return decisionControl(id, key, label, field.decisions, description, error);

  /** @type {HTMLInputElement | HTMLTextAreaElement | HTMLSelectElement} */
  let control;
  /** @type {() => Promise<unknown>} */
  let read;
  let extra = /** @type {HTMLElement | null} */ (null);
  const text = (/** @type {HTMLInputElement | HTMLTextAreaElement | HTMLSelectElement} */ c) => (c.value.trim() === '' ? undefined : c.value);

  switch (field.type) {
    case 'paragraph': {
      const area = h('textarea', { ...common, rows: 4, required });
      area.value = typeof preset === 'string' ? preset : '';
      control = area;
      read = async () => text(area);
      break;
    }
    case 'options': {
      const select = h('select', { ...common, required }, [h('option', { value: '', text: required ? 'Choose…' : '(none)' })]);
      for (const option of field.options ?? []) select.append(h('option', { value: option, text: option }));
      if (typeof preset === 'string' && (field.options ?? []).includes(preset)) select.value = preset;
      control = select;
      read = async () => text(select);
      break;
    }
    case 'integer':
    case 'float':
    case 'number': {
      const integer = field.type === 'integer';
      const input = h('input', { ...common, type: 'number', step: integer ? '1' : 'any', inputmode: integer ? 'numeric' : 'decimal', required });
      if (typeof preset === 'number') input.value = String(preset);
      control = input;
      read = async () => (input.value.trim() === '' ? undefined : Number(input.value));
      break;
    }
    case 'boolean': {
      const box = h('input', { ...common, type: 'checkbox' });
      box.checked = preset === true;
      control = box;
      read = async () => box.checked;
      break;
    }
    case 'object': {
      const area = h('textarea', { ...common, rows: 4, required, class: 'mono', spellcheck: 'false', placeholder: '{"key": "value"}' });
      area.value = preset === null || preset === undefined ? '' : typeof preset === 'string' ? preset : JSON.stringify(preset, null, 2);
      const check = () => {
        if (area.value.trim() === '') return area.setCustomValidity('');
        try {
          const parsed = JSON.parse(area.value);
          area.setCustomValidity(typeof parsed === 'object' && parsed !== null ? '' : 'Enter a JSON object or list.');
        } catch {
          area.setCustomValidity('Enter valid JSON, e.g. {"city": "London"}.');
        }
      };
      area.addEventListener('input', check);
      check();
      control = area;
      read = async () => (area.value.trim() === '' ? undefined : JSON.parse(area.value));
      break;
    }
    case 'file': {
      const hasPreset = typeof preset === 'string' && preset !== '';
      const input = h('input', { ...common, type: 'file', required: required && !hasPreset });
      if (hasPreset) extra = h('p', { class: 'field-help', text: `Current: ${preset}` });
      control = input;
      if (!upload) {
        input.disabled = true;
        extra = h('p', { class: 'field-help', text: 'Files cannot be uploaded here.' });
      }
      read = async () => {
        const file = input.files?.[0];
        return file && upload ? upload(file) : undefined;
      };
      break;
    }
    default: {
      const input = h('input', { ...common, type: 'text', required, autocomplete: 'off' });
      input.value = typeof preset === 'string' ? preset : preset === null || preset === undefined ? '' : display(preset);
      control = input;
      read = async () => text(input);
    }
  }
  if (required && field.type !== 'boolean') control.setAttribute('aria-required', 'true');
  const labelNode = h('label', { for: id }, [label, marker]);
  const root = field.type === 'boolean'
    ? h('div', { class: 'field field-check' }, [control, labelNode, description, error])
    : h('div', { class: 'field' }, [labelNode, extra, control, description, error]);
  return {
    key,
    label,
    root,
    focusable: control,
    read,
    showError(message) {
      error.hidden = message === null;
      error.textContent = message ?? '';
      if (message === null) control.removeAttribute('aria-invalid');
      else control.setAttribute('aria-invalid', 'true');
    },
  };
}

/**
 * A decision: one button per choice, each submitting the form with its id.
 * @param {string} id @param {string} key @param {string} label
 * @param {{id: string, label: string}[]} decisions
 * @param {HTMLElement | null} description @param {HTMLElement} error
 * @returns {FieldControl}
 */
function decisionControl(id, key, label, decisions, description, error) {
  /** @type {string | undefined} */
  let chosen;
  const buttons = decisions.map((d) => {
    const button = h('button', { type: 'submit', class: 'decision', value: d.id, text: d.label });
    button.addEventListener('click', () => {
      chosen = d.id;
    });
    return button;
  });
  const group = h('div', { class: 'decisions', role: 'group', 'aria-labelledby': `${id}-label` }, buttons);
  const root = h('div', { class: 'field field-decision' }, [h('span', { class: 'field-label', id: `${id}-label`, text: label }), description, group, error]);
  return {
    key,
    label,
    root,
    focusable: buttons[0] ?? group,
    read: async () => chosen,
    describe: (value) => decisions.find((d) => d.id === value)?.label ?? display(value),
    showError(message) {
      error.hidden = message === null;
      error.textContent = message ?? '';
    },
  };
}
