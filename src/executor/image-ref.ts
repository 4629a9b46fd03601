// Image references compared the way Docker resolves them, so that `nginx`, `nginx:latest`,
// `docker.io/library/nginx:latest` and `index.docker.io/library/nginx` count as one image when
// the image cleaner asks whether a task uses an image or whether the operator pinned it. Pure.

const defaultDomains = new Set(['docker.io', 'index.docker.io', 'registry-1.docker.io']);

/**
 * The familiar form Docker lists: default registry and `library/` dropped, `:latest` added when
 * there is neither a tag nor a digest. Anything it cannot read is returned as it is.
 */
export function normalizeImageRef(ref: string): string {
  const at = ref.indexOf('@');
  const name = at >= 0 ? ref.slice(0, at) : ref;
  const digest = at >= 0 ? ref.slice(at) : '';
  const parts = name.split('/');
  if (parts.length > 1 && defaultDomains.has(parts[0] ?? '')) parts.shift();
  if (parts.length === 2 && parts[0] === 'library') parts.shift();
  let familiar = parts.join('/');
  const last = parts[parts.length - 1] ?? '';
  if (digest === '' && !last.includes(':')) familiar += ':latest';
  // A digest reference keeps its tag if it had one: Docker ignores the tag, and so does this.
  if (digest !== '' && last.includes(':')) familiar = familiar.slice(0, familiar.lastIndexOf(':'));
  return familiar + digest;
}
