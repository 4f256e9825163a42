// Package backoff is stackd's one retry delay, used wherever something is
// tried again after a failure (a reconcile, a status push, a forge call, a
// custom-resource request): capped exponential, optionally jittered.
package backoff
