package engine

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/zclconf/go-cty/cty"

	"github.com/stackd/stackd/engine/config"
	"github.com/stackd/stackd/engine/provider"
)

const rulesOrg = `
organization {
  management_account = "000000000000"
  delegated_admins   = ["444444444444"]
  organizational_unit "ou-root" {
    accounts = ["000000000000", "111111111111"]
    organizational_unit "ou-prod" {
      accounts = ["222222222222", "333333333333"]
      account "555555555555" { suspended = true }
    }
    organizational_unit "ou-dev" {
      accounts = ["444444444444"]
    }
  }
  organizational_unit "ou-other" {
    accounts = ["666666666666"]
  }
}
`

const rulesTmpl = `
variable "a" { type = string }
variable "b" {
  type    = number
  default = 1
}
variable "c" {
  type    = string
  default = "template-default"
}
resource "rec" "x" {
  name    = "x"
  content = "${var.a}-${var.b}-${var.c}-${target.ou}"
}
`

// ruleCase is one seed rule: the definitions and either the resolved
// accounts or a substring of the diagnostic that names the rule.
type ruleCase struct {
	name     string
	defs     string
	files    map[string]string
	accounts []string
	wantErr  string
}

func runRuleCases(t *testing.T, cases []ruleCase) {
	t.Helper()
	reg := provider.Registry{"rec": newRecorder()}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			files := map[string]string{"org.hcl": rulesOrg, "ss.hcl": tc.defs, "t/main.hcl": rulesTmpl}
			for k, v := range tc.files {
				files[k] = v
			}
			defs, diags := load(t, files, reg)
			if tc.wantErr != "" {
				var got []string
				for _, d := range config.DiagnosticsJSON(diags) {
					got = append(got, d.String())
				}
				if !strings.Contains(strings.Join(got, "\n"), tc.wantErr) {
					t.Fatalf("diagnostics:\n%s\nwant one containing %q", strings.Join(got, "\n"), tc.wantErr)
				}
				for _, d := range config.DiagnosticsJSON(diags) {
					if d.File == "" || d.Line == 0 {
						t.Errorf("diagnostic without file:line: %s", d)
					}
				}
				return
			}
			if diags.HasErrors() {
				t.Fatal(diags.Error())
			}
			if tc.accounts != nil {
				if diff := cmp.Diff(tc.accounts, defs.StackSet("s").Accounts); diff != "" {
					t.Errorf("accounts (-want +got):\n%s", diff)
				}
			}
		})
	}
}

func serviceManaged(targets string, extra ...string) string {
	return `stack_set "s" {
  template         = "./t"
  permission_model = "SERVICE_MANAGED"
  vars             = { a = "x" }
` + strings.Join(extra, "\n") + `
  deployment_targets {
    regions = ["r1", "r2"]
` + targets + `
  }
}`
}

func TestSeedTargetRules(t *testing.T) {
	runRuleCases(t, []ruleCase{
		{name: "OU includes child OUs, never the management account",
			defs:     serviceManaged(`organizational_units = ["ou-root"]`),
			accounts: []string{"111111111111", "222222222222", "333333333333", "555555555555", "444444444444"}},
		{name: "NONE with accounts is rejected",
			defs:    serviceManaged(`organizational_units = ["ou-prod"]` + "\n" + `accounts = ["222222222222"]`),
			wantErr: "leave accounts and accounts_file out"},
		{name: "INTERSECTION",
			defs:     serviceManaged(`organizational_units = ["ou-root"]` + "\n" + `account_filter_type = "INTERSECTION"` + "\n" + `accounts = ["333333333333", "111111111111"]`),
			accounts: []string{"111111111111", "333333333333"}},
		{name: "INTERSECTION with an account outside the OUs",
			defs:    serviceManaged(`organizational_units = ["ou-prod"]` + "\n" + `account_filter_type = "INTERSECTION"` + "\n" + `accounts = ["666666666666"]`),
			wantErr: "Account outside the organizational units"},
		{name: "DIFFERENCE",
			defs:     serviceManaged(`organizational_units = ["ou-prod"]` + "\n" + `account_filter_type = "DIFFERENCE"` + "\n" + `accounts = ["222222222222"]`),
			accounts: []string{"333333333333", "555555555555"}},
		{name: "UNION",
			defs:     serviceManaged(`organizational_units = ["ou-dev"]` + "\n" + `account_filter_type = "UNION"` + "\n" + `accounts = ["666666666666"]`),
			accounts: []string{"444444444444", "666666666666"}},
		{name: "UNION without accounts",
			defs:    serviceManaged(`organizational_units = ["ou-dev"]` + "\n" + `account_filter_type = "UNION"`),
			wantErr: "needs exactly one of accounts or accounts_file"},
		{name: "UNION with the management account",
			defs:    serviceManaged(`organizational_units = ["ou-dev"]` + "\n" + `account_filter_type = "UNION"` + "\n" + `accounts = ["000000000000"]`),
			wantErr: "Management account is never a target"},
		{name: "unknown account",
			defs:    serviceManaged(`organizational_units = ["ou-dev"]` + "\n" + `account_filter_type = "UNION"` + "\n" + `accounts = ["999999999999"]`),
			wantErr: "Unknown account"},
		{name: "unknown OU",
			defs:    serviceManaged(`organizational_units = ["ou-nope"]`),
			wantErr: "Unknown organizational unit"},
		{name: "bad filter type",
			defs:    serviceManaged(`organizational_units = ["ou-dev"]` + "\n" + `account_filter_type = "ALL"`),
			wantErr: "Invalid account_filter_type"},
		{name: "OUs need SERVICE_MANAGED",
			defs: `stack_set "s" {
  template = "./t"
  vars     = { a = "x" }
  deployment_targets {
    regions              = ["r1"]
    accounts             = ["1"]
    organizational_units = ["ou-dev"]
  }
}`,
			wantErr: "organizational_units needs SERVICE_MANAGED"},
		{name: "call_identity needs SERVICE_MANAGED",
			defs: `stack_set "s" {
  template      = "./t"
  call_identity = "SELF"
  vars          = { a = "x" }
  deployment_targets {
    regions  = ["r1"]
    accounts = ["1"]
  }
}`,
			wantErr: "call_identity needs SERVICE_MANAGED"},
		{name: "DELEGATED_ADMIN with delegated admins",
			defs:     serviceManaged(`organizational_units = ["ou-dev"]`, `call_identity = "DELEGATED_ADMIN"`),
			accounts: []string{"444444444444"}},
		{name: "accounts and accounts_file both",
			defs: `stack_set "s" {
  template = "./t"
  vars     = { a = "x" }
  deployment_targets {
    regions       = ["r1"]
    accounts      = ["1"]
    accounts_file = "./a.csv"
  }
}`,
			files:   map[string]string{"a.csv": "1,2\n3"},
			wantErr: "Conflicting account lists"},
		{name: "accounts_file CSV",
			defs: `stack_set "s" {
  template = "./t"
  vars     = { a = "x" }
  deployment_targets {
    regions       = ["r1"]
    accounts_file = "./a.csv"
  }
}`,
			files:    map[string]string{"a.csv": "1,2\n3\n"},
			accounts: []string{"1", "2", "3"}},
		{name: "id pin must be a uuid",
			defs: `stack_set "s" {
  template = "./t"
  id       = "not-a-uuid"
  vars     = { a = "x" }
  deployment_targets {
    regions  = ["r1"]
    accounts = ["1"]
  }
}`,
			wantErr: "Invalid stack set id"},
	})
}

func TestSeedDelegatedAdminRequired(t *testing.T) {
	reg := provider.Registry{"rec": newRecorder()}
	org := strings.Replace(rulesOrg, `delegated_admins   = ["444444444444"]`, "", 1)
	_, diags := load(t, map[string]string{"org.hcl": org, "ss.hcl": serviceManaged(`organizational_units = ["ou-dev"]`, `call_identity = "DELEGATED_ADMIN"`), "t/main.hcl": rulesTmpl}, reg)
	if !strings.Contains(diags.Error(), "No delegated admin") {
		t.Fatalf("got %v", diags.Error())
	}
}

func selfManaged(body string) string {
	return `stack_set "s" {
  template = "./t"
  vars     = { a = "x", b = 2 }
  deployment_targets {
    regions  = ["r1", "r2"]
    accounts = ["1", "2"]
  }
` + body + `
}`
}

func TestSeedOverrideRules(t *testing.T) {
	runRuleCases(t, []ruleCase{
		{name: "override with replace semantics",
			defs: selfManaged(`instance_override {
    regions            = ["r2"]
    vars               = { a = "y" }
    use_stack_set_vars = ["b"]
  }`)},
		{name: "unknown variable",
			defs: selfManaged(`instance_override {
    vars               = { a = "y", zz = 1 }
    use_stack_set_vars = ["b"]
  }`),
			wantErr: "Override of an unknown variable"},
		{name: "template default is not overridable",
			defs: selfManaged(`instance_override {
    vars               = { a = "y", c = "z" }
    use_stack_set_vars = ["b"]
  }`),
			wantErr: "add it to the stack set's vars first"},
		// A missing variable is an error only for a changed block: see
		// TestCheckOverridesByHistory.
		{name: "variable twice",
			defs: selfManaged(`instance_override {
    vars               = { a = "y", b = 3 }
    use_stack_set_vars = ["b"]
  }`),
			wantErr: "Variable named twice"},
		{name: "vars and vars_file duplicate",
			defs: selfManaged(`instance_override {
    vars      = { a = "y", b = 3 }
    vars_file = "./o.tfvars"
  }`),
			files:   map[string]string{"o.tfvars": "b = 4\n"},
			wantErr: "set both in vars"},
		{name: "vars_file override",
			defs: selfManaged(`instance_override {
    accounts           = ["2"]
    vars_file          = "./o.tfvars"
    use_stack_set_vars = ["b"]
  }`),
			files: map[string]string{"o.tfvars": "a = \"from-file\"\n"}},
		{name: "two overrides for one instance",
			defs: selfManaged(`instance_override {
    regions            = ["r1"]
    use_stack_set_vars = ["a", "b"]
  }
  instance_override {
    accounts           = ["1"]
    use_stack_set_vars = ["a", "b"]
  }`),
			wantErr: "Two overrides for one instance"},
		{name: "unknown region",
			defs: selfManaged(`instance_override {
    regions            = ["r9"]
    use_stack_set_vars = ["a", "b"]
  }`),
			wantErr: "Override of an unknown region"},
		{name: "merged length limit",
			defs: selfManaged(`instance_override {
    vars               = { a = "` + strings.Repeat("x", config.MaxMergedVarsLength) + `" }
    use_stack_set_vars = ["b"]
  }`),
			wantErr: "Overridden variables too long"},
		{name: "vars file limit",
			defs: selfManaged(`instance_override {
    vars_file          = "./big.tfvars"
    use_stack_set_vars = ["b"]
  }`),
			files:   map[string]string{"big.tfvars": "a = \"" + strings.Repeat("x", config.MaxVarsFileSize) + "\"\n"},
			wantErr: "at most 1048576 bytes"},
		{name: "stack set vars change leaves the override no longer a subset",
			defs: `stack_set "s" {
  template = "./t"
  vars     = { a = "x" }
  deployment_targets {
    regions  = ["r1"]
    accounts = ["1"]
  }
  instance_override {
    vars = { a = "y", b = 3 }
  }
}`,
			wantErr: "Override of an unknown variable"},
	})
}

func TestOverrideValuesAndHash(t *testing.T) {
	reg := provider.Registry{"rec": newRecorder()}
	defs := mustLoad(t, map[string]string{"ss.hcl": selfManaged(`instance_override {
    regions            = ["r2"]
    accounts           = ["2"]
    vars               = { a = "y" }
    use_stack_set_vars = ["b"]
  }`), "t/main.hcl": rulesTmpl}, reg)
	ss := defs.StackSet("s")
	got := ss.VarsFor(config.Target{Region: "r2", Account: "2"})
	if got["a"].AsString() != "y" || !got["b"].RawEquals(cty.NumberIntVal(2)) {
		t.Errorf("overridden vars: %#v", got)
	}
	if ss.VarsFor(config.Target{Region: "r1", Account: "2"})["a"].AsString() != "x" {
		t.Error("override applied to an instance it does not match")
	}
	plain := mustLoad(t, map[string]string{"ss.hcl": selfManaged(""), "t/main.hcl": rulesTmpl}, reg).StackSet("s")
	if plain.InstanceHash("id", config.Target{Region: "r2", Account: "2"}) == ss.InstanceHash("id", config.Target{Region: "r2", Account: "2"}) {
		t.Error("the override does not change the matched instance's hash")
	}
	if plain.InstanceHash("id", config.Target{Region: "r1", Account: "1"}) != ss.InstanceHash("id", config.Target{Region: "r1", Account: "1"}) {
		t.Error("the override changes an unmatched instance's hash")
	}
	if plain.ConfigHash != ss.ConfigHash {
		t.Error("an override changes the stack set's config hash (it must only be an UpdateStackInstances)")
	}
}

func TestPreferenceRules(t *testing.T) {
	prefs := func(body string) string {
		return selfManaged("operation_preferences {\n" + body + "\n}")
	}
	runRuleCases(t, []ruleCase{
		{name: "count and percentage", defs: prefs("failure_tolerance_count = 1\nfailure_tolerance_percentage = 10"), wantErr: "set at most one of them"},
		{name: "region_order needs SEQUENTIAL", defs: prefs(`region_concurrency_type = "PARALLEL"` + "\n" + `region_order = ["r1", "r2"]`), wantErr: "region_order needs SEQUENTIAL"},
		{name: "region_order must list exactly the regions", defs: prefs(`region_order = ["r1"]`), wantErr: "Invalid region_order"},
		{name: "STRICT bound with counts", defs: prefs("max_concurrent_count = 3\nfailure_tolerance_count = 1"), wantErr: "max_concurrent_count too large"},
		{name: "SOFT lifts the bound", defs: prefs("max_concurrent_count = 3\nfailure_tolerance_count = 1\nfailure_tolerance_mode = \"SOFT_FAILURE_TOLERANCE\"")},
		{name: "STRICT bound with percentages", defs: prefs("max_concurrent_percentage = 100"), wantErr: "Max concurrency too large for STRICT_FAILURE_TOLERANCE"},
		{name: "negative", defs: prefs("failure_tolerance_count = -1"), wantErr: "non-negative whole number"},
		{name: "max concurrent zero", defs: prefs("max_concurrent_count = 0"), wantErr: "must be at least 1"},
		{name: "bad mode", defs: prefs(`failure_tolerance_mode = "LOOSE"`), wantErr: "Invalid failure_tolerance_mode"},
	})
}

func TestLimits(t *testing.T) {
	cases := []struct {
		p            config.OperationPreferences
		n            int
		tol, maxConc int
	}{
		{config.OperationPreferences{FailureTolerancePercentage: 25, MaxConcurrentPercentage: 10}, 9, 2, 1}, // floor; 0 → 1
		{config.OperationPreferences{FailureTolerancePercentage: -1, MaxConcurrentPercentage: 50, FailureToleranceCount: 3}, 7, 3, 3},
		{config.OperationPreferences{FailureTolerancePercentage: -1, MaxConcurrentPercentage: -1, MaxConcurrentCount: 4, FailureToleranceCount: 3}, 100, 3, 4},
	}
	for _, tc := range cases {
		tol, mc := tc.p.Limits(tc.n)
		if tol != tc.tol || mc != tc.maxConc {
			t.Errorf("%+v n=%d: got (%d, %d), want (%d, %d)", tc.p, tc.n, tol, mc, tc.tol, tc.maxConc)
		}
	}
}
