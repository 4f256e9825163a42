// Package waitcondition is the wait_condition resource type: Heat's
// OS::Heat::WaitCondition and CloudFormation's AWS::CloudFormation::WaitCondition
// in one resource (docs/design.md §7).
//
// Create hands out a pre-signed handle_url at once and returns; whatever
// the template starts (a server that boots, a job that migrates) POSTs
// signals to it. The engine then waits (provider.Waiter) before it
// evaluates anything that needs the condition complete — a reference to
// any attribute other than handle_url, or a depends_on — and in any case
// before the instance's apply ends, so a rollout's batch gate waits for
// the signals too. The condition completes when count SUCCESS signals
// with distinct ids have arrived; a FAILURE signal fails it, and so does
// timeout, counted from Create.
//
// Signals and the deadline are kept in a Store (the daemon's state), so a
// restart resumes waiting on the same handle with the signals received
// before it. Replicas sharing a state (docs/design.md §13) share the
// Store: a signal stored by one is announced with Options.OnSignal, and
// the others' listeners call Changed so the waiting replica re-reads the
// handle. Properties all force replacement: a changed count, timeout or
// triggers value makes a new handle that needs new signals.
package waitcondition
