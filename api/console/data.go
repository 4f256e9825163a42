package console

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/extension"

	"github.com/stackd/stackd/engine"
	"github.com/stackd/stackd/engine/changeset"
	"github.com/stackd/stackd/reconciler"
	"github.com/stackd/stackd/state"
)

// Limits of the data endpoints' parameters.
const (
	maxParamLen = 1024
	// maxEventsShown bounds the events of an instance the detail lists.
	maxEventsShown = 200
	// maxHistory bounds the operations the history lists.
	maxHistory = 200
)

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeJSONError(w http.ResponseWriter, status int, detail string) {
	writeJSON(w, status, map[string]string{"error": detail})
}

// param returns query parameter name, bounded and printable.
func param(r *http.Request, name string) (string, bool) {
	v := r.URL.Query().Get(name)
	if len(v) > maxParamLen {
		return "", false
	}
	for _, c := range v {
		if !unicode.IsPrint(c) {
			return "", false
		}
	}
	return v, true
}

// data serves the JSON the pages read.
func (c *Console) data(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		methodNotAllowed(w, "GET")
		return
	}
	switch strings.TrimPrefix(r.URL.Path, "/ui/data/") {
	case "fleet":
		c.fleet(w, r)
	case "grid":
		c.grid(w, r)
	case "instance":
		c.instance(w, r)
	case "history":
		c.history(w, r)
	case "changes":
		c.changes(w, r)
	default:
		writeJSONError(w, http.StatusNotFound, "No such console data.")
	}
}

func (c *Console) storeError(w http.ResponseWriter, err error, what string) {
	if errors.Is(err, state.ErrNotFound) {
		writeJSONError(w, http.StatusNotFound, what+" does not exist.")
		return
	}
	if errors.Is(err, state.ErrInvalidKey) {
		// A name no record can have (a "/" or NUL in a region or
		// account, say): bad input, not a failure of the state.
		writeJSONError(w, http.StatusBadRequest, what+" is not a valid name.")
		return
	}
	c.opts.Log.Error().Err(err).Msg("console: state read failed")
	writeJSONError(w, http.StatusInternalServerError, what+" could not be read; see the daemon's log.")
}

// commitURL links rev, or is empty.
func (c *Console) commitURL(rev string) string {
	if c.opts.CommitURL == nil || rev == "" {
		return ""
	}
	return c.opts.CommitURL(rev)
}

// opSummary is an operation as the pages show it.
type opSummary struct {
	ID          string                     `json:"id"`
	Kind        state.OperationKind        `json:"kind"`
	Status      state.OperationStatus      `json:"status"`
	Reason      string                     `json:"reason,omitempty"`
	Revision    string                     `json:"revision"`
	RevisionURL string                     `json:"revision_url,omitempty"`
	Created     *time.Time                 `json:"created,omitempty"`
	Started     *time.Time                 `json:"started,omitempty"`
	Ended       *time.Time                 `json:"ended,omitempty"`
	Counts      reconciler.OperationCounts `json:"counts"`
	Phase       state.RolloutPhase         `json:"phase,omitempty"`
	Batch       int                        `json:"batch,omitempty"`
	Batches     int                        `json:"batches,omitempty"`
	// StatusCommit is the message of the status commit the operation
	// was reported in (on StatusBranch) once it ended.
	StatusCommit string `json:"status_commit,omitempty"`
}

func tp(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

func short(rev string) string {
	if len(rev) > 7 {
		return rev[:7]
	}
	return rev
}

func (c *Console) summarize(op *state.Operation) *opSummary {
	s := &opSummary{
		ID: op.ID, Kind: op.Kind, Status: op.Status, Reason: op.Reason, Revision: op.Revision,
		RevisionURL: c.commitURL(op.Revision), Created: tp(op.Created), Started: tp(op.Started), Ended: tp(op.Ended),
		Counts: reconciler.Counts(op),
	}
	if p := op.Rollout; p != nil {
		s.Phase, s.Batch, s.Batches = p.Phase, p.Batch, p.Batches
	}
	if !op.Ended.IsZero() {
		s.StatusCommit = fmt.Sprintf("stackd: %s %s %s %s (%d/%d)", op.StackSet, op.Kind, short(op.Revision), op.Status, s.Counts.Succeeded, s.Counts.Total)
	}
	return s
}

// fleetEntry is one stack set on the fleet page.
type fleetEntry struct {
	Name          string                       `json:"name"`
	Status        state.StackSetStatus         `json:"status,omitempty"`
	Revision      string                       `json:"revision,omitempty"`
	RevisionURL   string                       `json:"revision_url,omitempty"`
	LastOperation *opSummary                   `json:"last_operation,omitempty"`
	Instances     int                          `json:"instances"`
	Counts        map[state.InstanceStatus]int `json:"counts"`
	Drift         *reconciler.DriftSummary     `json:"drift,omitempty"`
	// Holding: a rollout waits for promotion.
	Holding bool `json:"holding"`
}

func (c *Console) fleet(w http.ResponseWriter, _ *http.Request) {
	sets, err := c.opts.Store.ListStackSets()
	if err != nil {
		c.storeError(w, err, "The stack set list")
		return
	}
	out := make([]fleetEntry, 0, len(sets))
	for _, ss := range sets {
		e := fleetEntry{Name: ss.Name, Status: ss.Status, Revision: ss.Revision, RevisionURL: c.commitURL(ss.Revision), Counts: map[state.InstanceStatus]int{}}
		if ss.LastOperation != "" {
			if op, err := c.opts.Store.Operation(ss.LastOperation); err == nil {
				e.LastOperation = c.summarize(&op)
				e.Holding = op.Ended.IsZero() && op.Rollout != nil && op.Rollout.Phase == state.RolloutWaitingForPromotion
			}
		}
		ins, err := c.opts.Store.Instances(ss.ID)
		if err != nil {
			c.storeError(w, err, fmt.Sprintf("Stack set %q", ss.Name))
			return
		}
		e.Instances = len(ins)
		var drifted, checked int
		for _, in := range ins {
			e.Counts[in.Status]++
			if in.Drift != nil {
				checked++
				if in.Drift.Status == "DRIFTED" {
					drifted++
				}
			}
		}
		if checked > 0 {
			st := "IN_SYNC"
			if drifted > 0 {
				st = "DRIFTED"
			}
			e.Drift = &reconciler.DriftSummary{Status: driftStatus(st), DriftedInstances: drifted}
		}
		out = append(out, e)
	}
	writeJSON(w, http.StatusOK, map[string]any{"stack_sets": out})
}

// gridDoc is a stack set's instances, compact enough for 10,000 cells:
// Cells holds, per instance, the index of its region, of its account and
// of its status (in Statuses), and 1 when its last drift check found it
// drifted. When any instance records an organizational unit
// (SERVICE_MANAGED), OUs lists them and AccountOUs holds, per account,
// the index of its OU: the accounts are ordered by OU, then by id, so
// each OU's accounts are contiguous (an account recorded without an OU
// is in the group "", last).
type gridDoc struct {
	Name          string     `json:"name"`
	Revision      string     `json:"revision,omitempty"`
	RevisionURL   string     `json:"revision_url,omitempty"`
	LastOperation *opSummary `json:"last_operation,omitempty"`
	Regions       []string   `json:"regions"`
	Accounts      []string   `json:"accounts"`
	OUs           []string   `json:"ous,omitempty"`
	AccountOUs    []int      `json:"account_ous,omitempty"`
	Statuses      []string   `json:"statuses"`
	Cells         []int      `json:"cells"`
}

// statusOrder is the order of statuses in a grid document.
var statusOrder = []state.InstanceStatus{
	state.InstanceOperationComplete, state.InstanceOperationInProgress, state.InstanceWaitInProgress,
	state.InstanceOperationFailed, state.InstanceCancelComplete, state.InstanceSkippedSuspendedAccount,
}

func (c *Console) stackSet(w http.ResponseWriter, r *http.Request) (*state.StackSet, bool) {
	name, ok := param(r, "stack_set")
	if !ok || name == "" {
		writeJSONError(w, http.StatusBadRequest, "stack_set must be a stack set's name.")
		return nil, false
	}
	ss, err := c.opts.Store.StackSetByName(name)
	if err != nil {
		c.storeError(w, err, fmt.Sprintf("Stack set %q", name))
		return nil, false
	}
	return &ss, true
}

func (c *Console) grid(w http.ResponseWriter, r *http.Request) {
	ss, ok := c.stackSet(w, r)
	if !ok {
		return
	}
	ins, err := c.opts.Store.Instances(ss.ID)
	if err != nil {
		c.storeError(w, err, fmt.Sprintf("Stack set %q", ss.Name))
		return
	}
	doc := gridDoc{Name: ss.Name, Revision: ss.Revision, RevisionURL: c.commitURL(ss.Revision), Regions: []string{}, Accounts: []string{}, Cells: make([]int, 0, 4*len(ins))}
	if ss.LastOperation != "" {
		if op, err := c.opts.Store.Operation(ss.LastOperation); err == nil {
			doc.LastOperation = c.summarize(&op)
		}
	}
	statusIdx := map[state.InstanceStatus]int{}
	for i, s := range statusOrder {
		statusIdx[s] = i
		doc.Statuses = append(doc.Statuses, string(s))
	}
	regions, accounts := map[string]bool{}, map[string]string{}
	grouped := false
	for _, in := range ins {
		regions[in.Region] = true
		// An account's OU is the same in each region; a record of
		// another region written before the OU was recorded has none.
		if ou, had := accounts[in.Account]; !had || ou == "" {
			accounts[in.Account] = in.OU
		}
		grouped = grouped || in.OU != ""
	}
	for k := range regions {
		doc.Regions = append(doc.Regions, k)
	}
	for k := range accounts {
		doc.Accounts = append(doc.Accounts, k)
	}
	slices.Sort(doc.Regions)
	if grouped {
		ous := map[string]bool{}
		for _, ou := range accounts {
			ous[ou] = true
		}
		for ou := range ous {
			doc.OUs = append(doc.OUs, ou)
		}
		slices.SortFunc(doc.OUs, compareOU)
		slices.SortFunc(doc.Accounts, func(a, b string) int {
			return cmp.Or(compareOU(accounts[a], accounts[b]), strings.Compare(a, b))
		})
		oi := index(doc.OUs)
		doc.AccountOUs = make([]int, len(doc.Accounts))
		for i, a := range doc.Accounts {
			doc.AccountOUs[i] = oi[accounts[a]]
		}
	} else {
		slices.Sort(doc.Accounts)
	}
	ri, ai := index(doc.Regions), index(doc.Accounts)
	for _, in := range ins {
		si, ok := statusIdx[in.Status]
		if !ok {
			si = len(doc.Statuses)
			statusIdx[in.Status] = si
			doc.Statuses = append(doc.Statuses, string(in.Status))
		}
		d := 0
		if in.Drift != nil && in.Drift.Status == "DRIFTED" {
			d = 1
		}
		doc.Cells = append(doc.Cells, ri[in.Region], ai[in.Account], si, d)
	}
	writeJSON(w, http.StatusOK, doc)
}

// compareOU orders OU ids, the group of accounts without one ("") last.
func compareOU(a, b string) int {
	switch {
	case a == b:
		return 0
	case a == "":
		return 1
	case b == "":
		return -1
	}
	return strings.Compare(a, b)
}

func driftStatus(s string) engine.DriftStatus { return engine.DriftStatus(s) }

func index(xs []string) map[string]int {
	m := make(map[string]int, len(xs))
	for i, x := range xs {
		m[x] = i
	}
	return m
}

// resourceView is a resource on the instance page: what it is and where,
// never its values.
type resourceView struct {
	Address    string `json:"address"`
	Type       string `json:"type"`
	PhysicalID string `json:"physical_id,omitempty"`
	Status     string `json:"status"`
}

// instanceDoc is the instance page.
type instanceDoc struct {
	StackSet      string                          `json:"stack_set"`
	Region        string                          `json:"region"`
	Account       string                          `json:"account"`
	OU            string                          `json:"ou,omitempty"`
	Status        state.InstanceStatus            `json:"status"`
	Reason        string                          `json:"reason,omitempty"`
	Revision      string                          `json:"revision,omitempty"`
	RevisionURL   string                          `json:"revision_url,omitempty"`
	Updated       *time.Time                      `json:"updated,omitempty"`
	Overrides     json.RawMessage                 `json:"overrides,omitempty"`
	Outputs       json.RawMessage                 `json:"outputs,omitempty"`
	Resources     []resourceView                  `json:"resources"`
	Drift         *reconciler.InstanceDriftStatus `json:"drift,omitempty"`
	LastOperation *opSummary                      `json:"last_operation,omitempty"`
	Result        *state.InstanceResult           `json:"result,omitempty"`
	Events        []state.Event                   `json:"events"`
}

func (c *Console) instance(w http.ResponseWriter, r *http.Request) {
	ss, ok := c.stackSet(w, r)
	if !ok {
		return
	}
	region, ok1 := param(r, "region")
	account, ok2 := param(r, "account")
	if !ok1 || !ok2 || region == "" || account == "" {
		writeJSONError(w, http.StatusBadRequest, "region and account are required.")
		return
	}
	in, err := c.opts.Store.Instance(ss.ID, region, account)
	if err != nil {
		c.storeError(w, err, fmt.Sprintf("Instance %s/%s of %q", region, account, ss.Name))
		return
	}
	res, err := c.opts.Store.Resources(ss.ID, region, account)
	if err != nil {
		c.storeError(w, err, "The instance's resources")
		return
	}
	doc := instanceDoc{
		StackSet: ss.Name, Region: in.Region, Account: in.Account, OU: in.OU, Status: in.Status, Reason: in.StatusReason,
		Revision: in.Revision, RevisionURL: c.commitURL(in.Revision), Updated: tp(in.Updated),
		Overrides: reconciler.OverridesView(in.Overrides), Outputs: in.Outputs,
		Resources: make([]resourceView, 0, len(res)), Events: []state.Event{},
	}
	for _, rs := range res {
		doc.Resources = append(doc.Resources, resourceView{Address: rs.Address, Type: rs.Type, PhysicalID: rs.PhysicalID, Status: rs.Status})
	}
	if d := in.Drift; d != nil {
		doc.Drift = &reconciler.InstanceDriftStatus{Status: driftStatus(d.Status), Checked: d.Checked, Resources: d.Resources}
	}
	if ss.LastOperation != "" {
		if op, err := c.opts.Store.Operation(ss.LastOperation); err == nil {
			doc.LastOperation = c.summarize(&op)
			for i := range op.Results {
				if op.Results[i].Region == region && op.Results[i].Account == account {
					doc.Result = &op.Results[i]
				}
			}
			evs, err := c.opts.Store.Events(op.ID)
			if err == nil {
				for _, ev := range evs {
					if ev.Region == region && ev.Account == account {
						doc.Events = append(doc.Events, ev)
					}
				}
				if n := len(doc.Events); n > maxEventsShown {
					doc.Events = doc.Events[n-maxEventsShown:]
				}
			}
		}
	}
	writeJSON(w, http.StatusOK, doc)
}

func (c *Console) history(w http.ResponseWriter, r *http.Request) {
	ss, ok := c.stackSet(w, r)
	if !ok {
		return
	}
	ops, err := c.opts.Store.Operations(ss.ID)
	if err != nil {
		c.storeError(w, err, fmt.Sprintf("Stack set %q", ss.Name))
		return
	}
	slices.SortFunc(ops, func(a, b state.Operation) int { return b.Created.Compare(a.Created) })
	if len(ops) > maxHistory {
		ops = ops[:maxHistory]
	}
	out := make([]*opSummary, 0, len(ops))
	for i := range ops {
		out = append(out, c.summarize(&ops[i]))
	}
	writeJSON(w, http.StatusOK, map[string]any{"stack_set": ss.Name, "status_branch": c.opts.StatusBranch, "operations": out})
}

// markdown turns the engine's Markdown into HTML: raw HTML is dropped and
// every text escaped (goldmark without WithUnsafe), links to javascript:
// and the like are not rendered.
var markdown = goldmark.New(goldmark.WithExtensions(extension.Table, extension.Strikethrough))

// changesDoc is the change-set page: the change sets of a ref rendered as
// the pull-request comment is.
type changesDoc struct {
	Ref         string `json:"ref"`
	Revision    string `json:"revision"`
	RevisionURL string `json:"revision_url,omitempty"`
	Valid       bool   `json:"valid"`
	HTML        string `json:"html"`
}

func (c *Console) changes(w http.ResponseWriter, r *http.Request) {
	ref, ok := param(r, "ref")
	if !ok || strings.ContainsFunc(ref, unicode.IsSpace) {
		writeJSONError(w, http.StatusBadRequest, "ref must be a branch name or a commit hash.")
		return
	}
	only, ok := param(r, "stack_set")
	if !ok {
		writeJSONError(w, http.StatusBadRequest, "stack_set is too long.")
		return
	}
	if c.opts.Planner == nil {
		writeJSONError(w, http.StatusServiceUnavailable, "Planning is not available in this process.")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), c.opts.PlanTimeout)
	defer cancel()
	res, err := c.opts.Planner.PlanWith(ctx, ref, reconciler.PlanOptions{})
	if err != nil {
		// The planner's errors name refs and commits, never values; they
		// are shown escaped.
		c.opts.Log.Warn().Err(err).Str("ref", ref).Msg("console: plan failed")
		writeJSONError(w, http.StatusBadGateway, "Cannot plan "+ref+": "+err.Error())
		return
	}
	var md bytes.Buffer
	valid := true
	diags := res.Diagnostics
	for _, d := range diags {
		if d.Severity == changeset.SeverityError {
			valid = false
		}
	}
	if len(diags) > 0 {
		changeset.WriteDiagnosticsMarkdown(&md, res.Revision, diags)
		md.WriteString("\n\n")
	}
	branch := ref
	n := 0
	for _, cs := range res.ChangeSets {
		if only != "" && cs.StackSetName != only {
			continue
		}
		if err := changeset.RenderMarkdown(&md, cs, changeset.MarkdownOptions{Branch: branch, StatusBranch: c.opts.StatusBranch}); err != nil {
			writeJSONError(w, http.StatusInternalServerError, "The change set could not be rendered.")
			return
		}
		md.WriteString("\n\n---\n\n")
		n++
	}
	if n == 0 && len(diags) == 0 {
		md.WriteString("No change: every instance is up to date with " + "`" + short(res.Revision) + "`.\n")
	}
	var html bytes.Buffer
	if err := markdown.Convert(md.Bytes(), &html); err != nil {
		writeJSONError(w, http.StatusInternalServerError, "The change set could not be rendered.")
		return
	}
	writeJSON(w, http.StatusOK, changesDoc{Ref: ref, Revision: res.Revision, RevisionURL: c.commitURL(res.Revision), Valid: valid, HTML: html.String()})
}
