// Package console is stackd's web console (docs/design.md §14), served by the
// daemon at /ui/ on the API's listener: the fleet of stack sets, each
// stack set as a regions × accounts grid drawn on a canvas, an instance's
// resources, outputs, overrides, events and drift, live rollouts as a
// batch timeline fed by the API's Server-Sent Events (GET /v1/events),
// promote and abort, change sets of the deploy head and pull-request refs
// rendered as the pull-request comment is, and the operation history.
//
// # Invariants
//
//   - Same authentication as the API. With a token (--api-token-file) the
//     login page takes it, compares it in constant time and keeps a
//     session in a cookie (HttpOnly, SameSite=Strict, Secure under TLS,
//     Path=/): an HMAC-signed expiry and nonce, never the token itself.
//     The signing key is derived from a random secret kept in the state
//     (made on first use) and the token: a session outlives a restart of
//     the daemon, and a daemon sharing the state, until it expires or the
//     token changes. Without a token (loopback only) the console opens a
//     session on the first visit, as the API is open then.
//   - The cookie is only a credential together with the session's CSRF
//     token (an HMAC of the nonce), sent in the X-Stackd-CSRF header (or,
//     for GET only, the csrf query parameter, which EventSource needs), and
//     with an Origin, when the browser sends one, equal to the request's
//     own. Authenticated is what the API asks: a cross-site page can neither
//     read the CSRF token nor send the cookie.
//   - Every response carries a strict Content-Security-Policy (default-src
//     'none'; scripts, styles, images and connections from 'self' only; no
//     inline script or style, no eval; frame-ancestors 'none';
//     form-action 'self'), X-Content-Type-Options: nosniff, Referrer-Policy:
//     same-origin and Cache-Control: no-store on pages and data. Every asset
//     is embedded (go:embed): nothing loads from another origin.
//   - No sensitive value reaches a page: the data endpoints answer from the
//     state's records, which hold none (outputs and drift properties are
//     recorded redacted, resources are shown by address, type and physical
//     id only), and change sets are the engine's Markdown rendering, in
//     which a sensitive value is only ever <sensitive>, turned into HTML
//     with raw HTML disabled (everything escaped).
//   - Bad input never crashes the daemon: query parameters are bounded and
//     a handler's panic is recovered into a 500.
//
// # Imports
//
// console reads state and uses reconciler and engine/changeset for their
// types, BuildStatus and the Markdown renderer; it imports neither api nor
// gitsource: cmd wires it beside the API and hands the API its
// Authenticated method.
package console
