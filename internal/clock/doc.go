// Package clock is the one time source of stackd's waits (rollout pauses
// and health checks, wait-condition timeouts, update-pattern pauses), so
// tests drive them with a fake clock instead of sleeping.
package clock
