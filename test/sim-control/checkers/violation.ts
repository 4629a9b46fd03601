// A checker's finding: which property broke and how. The run stops at the first one and prints
// the seed, the step and a trace tail.

export class Violation extends Error {
  constructor(readonly checker: string, message: string) {
    super(message);
    this.name = 'Violation';
  }
}
