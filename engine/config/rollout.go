package config

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"

	"github.com/stackd/stackd/engine/changeset"
)

// Rollout patterns (Heat's OS::Heat::RollingUpdatePattern and
// OS::Heat::CanaryUpdatePattern).
const (
	PatternRolling = "rolling"
	PatternCanary  = "canary"
)

// What a rollout does when a batch fails its gate or the failure
// tolerance is exceeded.
const (
	OnFailureStop     = "stop"
	OnFailureRollback = "rollback"
)

// PauseUntilPromoted is the pause value that holds after each batch until
// the operator promotes the rollout.
const PauseUntilPromoted = "until_promoted"

// Rollout defaults.
const (
	DefaultBatchSize      = 1
	DefaultGrowthFactor   = 2
	DefaultHealthExpect   = 200
	DefaultHealthTimeout  = 5 * time.Second
	DefaultHealthInterval = 2 * time.Second
	DefaultHealthHealthy  = 1
	DefaultHealthDeadline = 5 * time.Minute
	// MaxRolloutDuration bounds pause, timeout, interval and deadline.
	MaxRolloutDuration = 24 * time.Hour
)

// Rollout is a stack set's rollout block (docs/design.md §6), defaults filled. It
// changes how an operation is scheduled, never what an instance looks
// like, so it is not part of the stack set's ConfigHash.
//
// Batches: the operation's creates and updates, in region order then
// account order, go in batches of BatchSize (rolling) or BatchSize ×
// GrowthFactor^k (canary: the k-th batch after the first), capped by what
// is left. MinInService caps each batch further: a batch takes at most
// (instances in service − MinInService) instances that are in service,
// never fewer than one. Instances that are not in service (new targets,
// failed ones) do not count against MinInService. A MinInService at or
// above the number of instances the operation has can never be met
// (Heat keeps capacity by adding members; stackd cannot add targets): it
// is a diagnostic when the commit is planned, see CheckMinInService.
type Rollout struct {
	Pattern      string // PatternRolling | PatternCanary
	BatchSize    int
	GrowthFactor int // canary only; 1 for rolling
	MinInService int
	// MinInServiceRange is where min_in_service is set (DeclRange when it
	// is not), for CheckMinInService's diagnostic.
	MinInServiceRange hcl.Range
	// Pause is the time to wait after each batch before its health gate.
	Pause time.Duration
	// UntilPromoted: after each batch but the last, hold until promoted.
	UntilPromoted bool
	// Supersede: a newer commit of the stack set arriving while a rollout
	// holds for promotion aborts the held rollout (rolling back per
	// OnFailure) and starts at once; without it the newer commit waits
	// for the promotions. The newer commit's rollout block decides.
	Supersede bool
	OnFailure string // OnFailureStop | OnFailureRollback
	// HealthCheck is nil when the block has none: the gate then only
	// checks that every instance of the batch reached the revision.
	HealthCheck *HealthCheck
	DeclRange   hcl.Range
}

// HealthCheck is the rollout's health_check block: an HTTP GET per
// instance that must answer Expect Healthy times in a row, polled every
// Interval, each request bounded by Timeout, all within Deadline.
type HealthCheck struct {
	// URL is a template expression over target.*, stack_set.* and
	// output.* (the instance's recorded outputs); see URLFor.
	URL      hcl.Expression
	Expect   int
	Timeout  time.Duration
	Interval time.Duration
	Healthy  int
	Deadline time.Duration
}

var rolloutSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "pattern"}, {Name: "batch_size"}, {Name: "growth_factor"}, {Name: "min_in_service"},
		{Name: "pause"}, {Name: "on_failure"}, {Name: "supersede"},
	},
	Blocks: []hcl.BlockHeaderSchema{{Type: "health_check"}},
}

var healthCheckSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "url", Required: true}, {Name: "expect"}, {Name: "timeout"}, {Name: "interval"},
		{Name: "healthy"}, {Name: "deadline"},
	},
}

// healthURLRoots are the names a health check URL may reference.
var healthURLRoots = []string{"target", "stack_set", "output"}

// loadRollout reads a stack set's rollout block.
func (ss *StackSet) loadRollout(b *hcl.Block) hcl.Diagnostics {
	content, diags := b.Body.Content(rolloutSchema)
	a := content.Attributes
	r := &Rollout{Pattern: PatternRolling, BatchSize: DefaultBatchSize, GrowthFactor: 1, OnFailure: OnFailureStop, DeclRange: b.DefRange}
	diags = append(diags, stringAttr(a["pattern"], &r.Pattern)...)
	diags = append(diags, stringAttr(a["on_failure"], &r.OnFailure)...)
	diags = append(diags, intAttr(a["batch_size"], &r.BatchSize)...)
	diags = append(diags, intAttr(a["min_in_service"], &r.MinInService)...)
	diags = append(diags, boolAttr(a["supersede"], &r.Supersede)...)
	r.MinInServiceRange = r.DeclRange
	if m := a["min_in_service"]; m != nil {
		r.MinInServiceRange = m.Expr.Range()
	}
	if diags.HasErrors() {
		return diags
	}
	switch r.Pattern {
	case PatternRolling:
		if g := a["growth_factor"]; g != nil {
			diags = diags.Append(Errorf(g.NameRange, "growth_factor needs the canary pattern",
				"Stack set %q: growth_factor only applies to pattern = \"canary\"; a rolling rollout uses batch_size for every batch.", ss.Name))
		}
	case PatternCanary:
		r.GrowthFactor = DefaultGrowthFactor
		if g := a["growth_factor"]; g != nil {
			diags = append(diags, intAttr(g, &r.GrowthFactor)...)
			if !diags.HasErrors() && r.GrowthFactor < 2 {
				diags = diags.Append(Errorf(g.Expr.Range(), "Invalid growth_factor",
					"Stack set %q: growth_factor is %d; a canary rollout must grow its batches, so it must be at least 2.", ss.Name, r.GrowthFactor))
			}
		}
	default:
		diags = diags.Append(Errorf(a["pattern"].Expr.Range(), "Invalid rollout pattern",
			"Stack set %q: pattern is %q; it must be \"rolling\" or \"canary\".", ss.Name, r.Pattern))
	}
	if r.BatchSize < 1 {
		diags = diags.Append(Errorf(a["batch_size"].Expr.Range(), "Invalid batch_size",
			"Stack set %q: batch_size is %d; it must be at least 1.", ss.Name, r.BatchSize))
	}
	switch r.OnFailure {
	case OnFailureStop, OnFailureRollback:
	default:
		diags = diags.Append(Errorf(a["on_failure"].Expr.Range(), "Invalid on_failure",
			"Stack set %q: on_failure is %q; it must be \"stop\" or \"rollback\".", ss.Name, r.OnFailure))
	}
	if p := a["pause"]; p != nil {
		var s string
		if d := stringAttr(p, &s); d.HasErrors() {
			diags = append(diags, d...)
		} else if s == PauseUntilPromoted {
			r.UntilPromoted = true
		} else {
			r.Pause, d = durationValue(ss.Name, "pause", s, p.Expr.Range(), true)
			diags = append(diags, d...)
		}
	}
	var hc *hcl.Block
	for _, blk := range content.Blocks {
		if hc != nil {
			diags = diags.Append(Errorf(blk.DefRange, "Duplicate health_check block",
				"Stack set %q: a rollout may have one health_check block; another is at %s.", ss.Name, hc.DefRange))
			continue
		}
		hc = blk
		var hdiags hcl.Diagnostics
		r.HealthCheck, hdiags = ss.loadHealthCheck(blk)
		diags = append(diags, hdiags...)
	}
	ss.Rollout = r
	return diags
}

func (ss *StackSet) loadHealthCheck(b *hcl.Block) (*HealthCheck, hcl.Diagnostics) {
	content, diags := b.Body.Content(healthCheckSchema)
	a := content.Attributes
	h := &HealthCheck{
		Expect: DefaultHealthExpect, Timeout: DefaultHealthTimeout, Interval: DefaultHealthInterval,
		Healthy: DefaultHealthHealthy, Deadline: DefaultHealthDeadline,
	}
	if diags.HasErrors() {
		return h, diags
	}
	h.URL = a["url"].Expr
	diags = append(diags, ss.checkHealthURL(h.URL)...)
	if x := a["expect"]; x != nil {
		diags = append(diags, intAttr(x, &h.Expect)...)
		if !diags.HasErrors() && (h.Expect < 100 || h.Expect > 599) {
			diags = diags.Append(Errorf(x.Expr.Range(), "Invalid expect",
				"Stack set %q: health_check expect is %d; it must be an HTTP status code (100-599).", ss.Name, h.Expect))
		}
	}
	if x := a["healthy"]; x != nil {
		diags = append(diags, intAttr(x, &h.Healthy)...)
		if !diags.HasErrors() && h.Healthy < 1 {
			diags = diags.Append(Errorf(x.Expr.Range(), "Invalid healthy",
				"Stack set %q: health_check healthy is %d; at least 1 consecutive success is needed.", ss.Name, h.Healthy))
		}
	}
	for _, d := range []struct {
		name string
		dst  *time.Duration
	}{{"timeout", &h.Timeout}, {"interval", &h.Interval}, {"deadline", &h.Deadline}} {
		x := a[d.name]
		if x == nil {
			continue
		}
		var s string
		if sd := stringAttr(x, &s); sd.HasErrors() {
			diags = append(diags, sd...)
			continue
		}
		v, dd := durationValue(ss.Name, "health_check "+d.name, s, x.Expr.Range(), false)
		diags = append(diags, dd...)
		if !dd.HasErrors() {
			*d.dst = v
		}
	}
	if !diags.HasErrors() && h.Deadline < h.Timeout {
		rng := b.DefRange
		if x := a["deadline"]; x != nil {
			rng = x.Expr.Range()
		}
		diags = diags.Append(Errorf(rng, "Invalid deadline",
			"Stack set %q: health_check deadline (%s) is shorter than its timeout (%s); the deadline bounds every attempt together, so it must be at least one timeout.", ss.Name, h.Deadline, h.Timeout))
	}
	if !diags.HasErrors() && time.Duration(h.Healthy-1)*h.Interval >= h.Deadline {
		rng := b.DefRange
		if x := a["deadline"]; x != nil {
			rng = x.Expr.Range()
		}
		diags = diags.Append(Errorf(rng, "Health check can never pass",
			"Stack set %q: health_check needs %d consecutive successes %s apart, which takes %s, but its deadline is %s; raise the deadline or lower healthy or interval.",
			ss.Name, h.Healthy, h.Interval, time.Duration(h.Healthy-1)*h.Interval, h.Deadline))
	}
	return h, diags
}

// durationValue parses a Go duration ("30s", "5m", "1h30m").
func durationValue(ssName, what, s string, rng hcl.Range, zeroOK bool) (time.Duration, hcl.Diagnostics) {
	d, err := time.ParseDuration(s)
	var problem string
	switch {
	case err != nil:
		problem = "it is not a duration like \"30s\", \"5m\" or \"1h30m\""
	case d < 0 || d == 0 && !zeroOK:
		problem = "it must be positive"
	case d > MaxRolloutDuration:
		problem = "it may be at most 24h"
	}
	if problem == "" {
		return d, nil
	}
	extra := ""
	if what == "pause" {
		extra = fmt.Sprintf(" (or %q)", PauseUntilPromoted)
	}
	return 0, hcl.Diagnostics{Errorf(rng, "Invalid "+what,
		"Stack set %q: %s is %q; %s%s.", ssName, what, s, problem, extra)}
}

// checkHealthURL allows target.*, stack_set.* and output.NAME, where NAME
// is a non-sensitive output of the template.
func (ss *StackSet) checkHealthURL(expr hcl.Expression) hcl.Diagnostics {
	var diags hcl.Diagnostics
	for _, tr := range expr.Variables() {
		root := tr.RootName()
		rng := tr.SourceRange()
		ok := false
		for _, r := range healthURLRoots {
			ok = ok || r == root
		}
		if !ok {
			diags = diags.Append(Errorf(rng, "Invalid reference in health_check url",
				"Stack set %q: the health_check url may use target.*, stack_set.* and output.NAME (the instance's outputs), not %q.", ss.Name, root))
			continue
		}
		if root != "output" || ss.Template == nil {
			continue
		}
		name := ""
		if len(tr) > 1 {
			if at, ok := tr[1].(hcl.TraverseAttr); ok {
				name = at.Name
			}
		}
		out, ok := ss.Template.Outputs[name]
		switch {
		case !ok:
			diags = diags.Append(Errorf(rng, "Unknown output in health_check url",
				"Stack set %q: the health_check url references output %q, which template %s does not declare. Declared outputs: %s.",
				ss.Name, name, ss.Template.Dir, strings.Join(SortedKeys(ss.Template.Outputs), ", ")))
		case out.Sensitive:
			diags = diags.Append(Errorf(rng, "Sensitive output in health_check url",
				"Stack set %q: output %q is sensitive; health check URLs are logged and written to status, so they may not use it.", ss.Name, name))
		}
	}
	return diags
}

// URLFor evaluates the health check URL for one instance: target.region,
// target.account, target.ou, stack_set.name, stack_set.id and output.NAME,
// the instance's recorded outputs (a JSON object as the reconciler records
// them, sensitive values already replaced by placeholders). The result
// must be an http:// or https:// URL.
func (h *HealthCheck) URLFor(ss *StackSet, stackSetID string, t Target, outputs json.RawMessage) (string, error) {
	outs := map[string]cty.Value{}
	if len(outputs) > 0 {
		var raw map[string]json.RawMessage
		if err := json.Unmarshal(outputs, &raw); err != nil {
			return "", fmt.Errorf("recorded outputs: %w", err)
		}
		for k, b := range raw {
			ty, err := ctyjson.ImpliedType(b)
			if err != nil {
				return "", fmt.Errorf("recorded output %s: %w", k, err)
			}
			v, err := ctyjson.Unmarshal(b, ty)
			if err != nil {
				return "", fmt.Errorf("recorded output %s: %w", k, err)
			}
			outs[k] = v
		}
	}
	ctx := &hcl.EvalContext{
		Variables: map[string]cty.Value{
			"target":    cty.ObjectVal(map[string]cty.Value{"region": cty.StringVal(t.Region), "account": cty.StringVal(t.Account), "ou": cty.StringVal(ss.OU(t.Account))}),
			"stack_set": cty.ObjectVal(map[string]cty.Value{"name": cty.StringVal(ss.Name), "id": cty.StringVal(stackSetID)}),
			"output":    cty.ObjectVal(outs),
		},
		Functions: functions,
	}
	v, diags := h.URL.Value(ctx)
	if diags.HasErrors() {
		var msgs []string
		for _, d := range DiagnosticsJSON(diags) {
			msgs = append(msgs, d.String())
		}
		return "", fmt.Errorf("evaluate health_check url: %s", strings.Join(msgs, "; "))
	}
	if v.IsNull() || !v.IsKnown() || v.Type() != cty.String {
		return "", fmt.Errorf("health_check url is not a string")
	}
	u := v.AsString()
	switch {
	case strings.Contains(u, changeset.SensitivePlaceholder) || strings.Contains(u, changeset.KnownAfterApplyPlaceholder):
		return "", fmt.Errorf("health_check url %q uses an output whose value is not recorded", u)
	case !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://"):
		return "", fmt.Errorf("health_check url %q is not an http:// or https:// URL", u)
	}
	return u, nil
}

// CheckMinInService is the diagnostic for a min_in_service the operation
// can never meet (nil when it can). changing is the number of instances
// the operation creates or updates, untouched the number of the stack
// set's instances it leaves in service as they are; together they are
// the instances the stack set has during the operation, whatever their
// status labels say (a restart leaves some WAIT_IN_PROGRESS, which must
// not turn an accepted commit into a rejected one). A rollout must be able
// to take at least one instance out of service at a time, so
// min_in_service must be below that number. A first deploy (nothing in
// service yet) is held to the same rule: it cannot violate the bound
// itself, but every later update of the same fleet would be rejected.
func (r *Rollout) CheckMinInService(ssName string, changing, untouched int) *hcl.Diagnostic {
	n := changing + untouched
	if changing == 0 || r.MinInService < n {
		return nil
	}
	return Errorf(r.MinInServiceRange, "min_in_service cannot be met",
		"Stack set %q: min_in_service is %d, but the operation has %s (%d to create or update, %d left in service untouched); a rollout must take at least one instance out of service at a time, so min_in_service must be at most %d.",
		ssName, r.MinInService, plural(n, "instance"), changing, untouched, n-1)
}

// plural is "1 instance", "4 instances".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// PlanRollout is the rollout plan of r over the instances an operation
// deploys, every batch assumed to pass (see PlanBatches).
func (r *Rollout) PlanRollout(cands []Candidate, serving int) *changeset.RolloutPlan {
	batches, _ := r.PlanBatches(cands, serving)
	sizes := make([]int, len(batches))
	for i, b := range batches {
		sizes[i] = len(b)
	}
	p := &changeset.RolloutPlan{Pattern: r.Pattern, Batches: sizes, HealthCheck: r.HealthCheck != nil, OnFailure: r.OnFailure}
	switch {
	case r.UntilPromoted:
		p.Pause = "until_promoted"
	case r.Pause > 0:
		p.Pause = r.Pause.String()
	}
	return p
}

// Candidate is an instance a rollout has yet to put in a batch.
type Candidate struct {
	Region string
	// InService: the instance serves now (docs/design.md §6), so deploying it
	// takes it out of service until its batch passes its gate.
	InService bool
}

// NextBatch picks the members of the next batch, of nominal size size,
// from the instances left (in region order, then account order); serving
// is how many of the stack set's instances serve now, those left
// included. It returns the indexes taken, in order.
//
// A batch takes at most size instances, and at most serving −
// MinInService of them in service: min_in_service holds at every
// instant. Instances that do not serve (new targets, failed ones) cost no
// capacity, so the batch takes them past an in-service instance it must
// leave for later — within its region: it moves on to a later region only
// when it has taken nothing, so region order holds unless keeping it
// would stop the rollout. It returns nothing when every instance left
// serves and none may leave service: the rollout cannot go on without
// breaking min_in_service.
func (r *Rollout) NextBatch(left []Candidate, serving, size int) []int {
	limit := max(serving-r.MinInService, 0)
	var taken []int
	out, skipped := 0, false
	for i, c := range left {
		if len(taken) == size {
			break
		}
		if skipped && len(taken) > 0 && c.Region != left[i-1].Region {
			break // region order: the instance left behind goes first
		}
		if c.InService {
			if out == limit {
				skipped = true
				continue
			}
			out++
		}
		taken = append(taken, i)
	}
	return taken
}

// NextSize is the nominal size of the batch after one of nominal size
// size: a canary multiplies it by GrowthFactor after a fully successful
// batch (every member deployed and healthy); otherwise it stays.
func (r *Rollout) NextSize(size int, fullySucceeded bool) int {
	if r.Pattern != PatternCanary || !fullySucceeded || size >= math.MaxInt/max(r.GrowthFactor, 2) {
		return size
	}
	return size * max(r.GrowthFactor, 2)
}

// PlanBatches cuts the instances an operation deploys into batches as the
// rollout will if every batch passes (each batch's members serve again
// after its gate): the indexes of each batch's members, in order, and
// whether every instance found a batch. It does not when min_in_service
// stops the rollout (see NextBatch); the batches it could cut are
// returned.
func (r *Rollout) PlanBatches(cands []Candidate, serving int) ([][]int, bool) {
	left := make([]int, len(cands)) // indexes into cands
	for i := range left {
		left[i] = i
	}
	var batches [][]int
	size := max(r.BatchSize, 1)
	for len(left) > 0 {
		view := make([]Candidate, len(left))
		for i, ci := range left {
			view[i] = cands[ci]
		}
		picked := r.NextBatch(view, serving, size)
		if len(picked) == 0 {
			return batches, false
		}
		batch := make([]int, len(picked))
		taken := map[int]bool{}
		for i, pi := range picked {
			batch[i] = left[pi]
			taken[pi] = true
			if !cands[left[pi]].InService {
				serving++ // it serves once its batch passes
			}
		}
		rest := left[:0:0]
		for i, ci := range left {
			if !taken[i] {
				rest = append(rest, ci)
			}
		}
		batches, left = append(batches, batch), rest
		size = r.NextSize(size, true)
	}
	return batches, true
}

// Batches splits the members of a group (update_pattern: one region,
// inService telling which exist; untouched the members that serve and do
// not change) into batches by the rules of NextBatch: the indexes of each
// batch's members. Should min_in_service stop the split (CheckMinInService
// rejects such a plan first), the rest goes one member per batch.
func (r *Rollout) Batches(inService []bool, untouched int) [][]int {
	cands := make([]Candidate, len(inService))
	serving := untouched
	for i, s := range inService {
		cands[i].InService = s
		if s {
			serving++
		}
	}
	batches, ok := r.PlanBatches(cands, serving)
	if ok {
		return batches
	}
	placed := map[int]bool{}
	for _, b := range batches {
		for _, i := range b {
			placed[i] = true
		}
	}
	for i := range inService {
		if !placed[i] {
			batches = append(batches, []int{i})
		}
	}
	return batches
}
