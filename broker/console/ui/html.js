// The console's one JSX stand-in: htm tagged templates bound to Preact's `h`.
// No build step, so pages write html`<div>…</div>` instead of JSX.
import { h } from '../vendor/preact.module.js';
import htm from '../vendor/htm.module.js';

export const html = htm.bind(h);
export { h };
