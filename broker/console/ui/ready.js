// The ready mark the browser tests wait on (console-api.md, "Browser-test contract"):
// `document.body.dataset.ready = '<page>'` and `performance.mark('strata:ready:<page>')`, once
// per navigation, right after the page's first data render. A navigation clears it.
import { useLayoutEffect } from '../vendor/hooks.module.js';

let navigation = 0;
let markedNavigation = -1;

export function startNavigation() {
  navigation += 1;
  document.body.dataset.ready = '';
}

export function markReady(page) {
  if (markedNavigation === navigation) return;
  markedNavigation = navigation;
  document.body.dataset.ready = page;
  performance.mark(`strata:ready:${page}`);
}

// Marks `page` ready in the commit that first renders with `isReady` true: layout effects run
// after the DOM is updated and before the browser paints, so the mark costs no frame.
// `answer` (the data or error object) re-arms it when a page stays mounted across a
// navigation and renders a new answer (the message browser's prev/next).
export function useReady(page, isReady, answer = null) {
  useLayoutEffect(() => {
    if (isReady) markReady(page);
  }, [page, isReady, answer]);
}
