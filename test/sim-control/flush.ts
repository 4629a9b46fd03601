// Lets every promise chain that waits only on other promises run to its end. Nothing in the
// simulation does real I/O or sets real timers, so one turn of the event loop drains all the
// microtasks (Node runs every queued microtask before the next macrotask), in an order fixed by
// the inputs: the run stays deterministic.

export function flush(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}
