// useApi: GET a JSON route when a page mounts (and every `intervalMs` if given), keeping the
// previous answer so pages can compute rates between two polls.
import { useLayoutEffect, useState } from '../vendor/hooks.module.js';
import { get } from '../api.js';

export function useApi(path, intervalMs = 0) {
  const [state, setState] = useState({ data: null, error: null, at: 0, prev: null, prevAt: 0 });
  const [generation, setGeneration] = useState(0);

  // Started in a layout effect (right after the commit), not a plain effect (after a frame):
  // the request leaves as early as it can.
  useLayoutEffect(() => {
    let alive = true;
    let timer = null;
    const load = async () => {
      try {
        const data = await get(path);
        if (!alive) return;
        const at = performance.now();
        setState((s) => ({ data, error: null, at, prev: s.data, prevAt: s.at }));
      } catch (error) {
        if (!alive) return;
        setState((s) => ({ ...s, error }));
      }
      if (alive && intervalMs > 0) timer = setTimeout(load, intervalMs);
    };
    load();
    return () => {
      alive = false;
      clearTimeout(timer);
    };
  }, [path, intervalMs, generation]);

  // Whether the first answer (data or error) is in: the moment a page is ready.
  const settled = state.data !== null || (state.error !== null && state.error.status !== 401);
  return { ...state, settled, reload: () => setGeneration((g) => g + 1) };
}
