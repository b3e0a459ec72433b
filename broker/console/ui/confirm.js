// useConfirm: a modal <dialog data-testid="confirm"> that spells out an action's effect and
// answers a Promise<boolean> (OK → true; Cancel or Escape → false).
import { useLayoutEffect, useRef, useState } from '../vendor/hooks.module.js';
import { html } from './html.js';

export function useConfirm() {
  const [question, setQuestion] = useState(null); // { title, effect, resolve }
  const dialogRef = useRef(null);

  useLayoutEffect(() => {
    const dialog = dialogRef.current;
    if (question && dialog && !dialog.open) dialog.showModal();
  }, [question]);

  const ask = (title, effect) => new Promise((resolve) => setQuestion({ title, effect, resolve }));

  const answer = (ok) => {
    const dialog = dialogRef.current;
    if (dialog && dialog.open) dialog.close();
    if (question) question.resolve(ok);
    setQuestion(null);
  };

  const dialog = question && html`
    <dialog data-testid="confirm" class="confirm" ref=${dialogRef}
      onCancel=${(e) => { e.preventDefault(); answer(false); }}>
      <h3>${question.title}</h3>
      <p class="effect">${question.effect}</p>
      <div class="buttons">
        <button type="button" data-testid="confirm-cancel" onClick=${() => answer(false)}>Cancel</button>
        <button type="button" data-testid="confirm-ok" class="danger" onClick=${() => answer(true)}>OK</button>
      </div>
    </dialog>`;

  return { ask, dialog };
}
