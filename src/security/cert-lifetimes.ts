// How long certificates are valid by default: apart from certificates.ts, so code that only needs
// these numbers (the API's renewal figures) does not load the X.509 library with every node
// (issue 45: footprint).

export const CA_VALID_DAYS_DEFAULT = 10 * 365;
export const NODE_CERT_VALID_DAYS_DEFAULT = 5 * 365;
