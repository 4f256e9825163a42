package tfstate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Limits of a state file Parse reads.
const (
	// MaxBytes is the largest state file read. A workspace of thousands of
	// resources is a few megabytes.
	MaxBytes = 64 << 20
	// MaxNesting bounds how deeply the state's JSON nests.
	MaxNesting = 512
)

// FormatVersion is the state format version read: Terraform 0.12 to 1.11
// and OpenTofu write version 4.
const FormatVersion = 4

// Errors of Parse, checked with errors.Is; the wrapping error says more.
var (
	// ErrNotState: the input is not a Terraform state (not JSON, no
	// format version, a malformed resource).
	ErrNotState = errors.New("not a Terraform state")
	// ErrVersion: the state is in a format version other than 4.
	ErrVersion = errors.New("unsupported state format version")
	// ErrEncrypted: an OpenTofu state encrypted with state encryption.
	ErrEncrypted = errors.New("the state is encrypted")
	// ErrUnsupported: the state holds what stackd cannot take over as it
	// is (a deposed object, an address given twice).
	ErrUnsupported = errors.New("the state cannot be imported as it is")
)

// State is a parsed state file.
type State struct {
	// TerraformVersion is the version of the tool that wrote it
	// (OpenTofu writes its own, e.g. "1.8.5").
	TerraformVersion string
	Lineage          string
	Serial           uint64
	// Outputs are the root module's outputs.
	Outputs map[string]Output
	// Objects are the managed resource instances, in the order of the
	// state file.
	Objects []Object
}

// Output is one root output of a state.
type Output struct {
	Value     json.RawMessage
	Type      json.RawMessage
	Sensitive bool
}

// Object is one managed resource instance of a state.
type Object struct {
	// Address is its full address: "module.a[\"k\"].TYPE.NAME[0]".
	Address string
	// Module is the module path ("" at the root), Type and Name the
	// resource's, Key the instance key ("", "[0]" or "[\"k\"]").
	Module, Type, Name, Key string
	// Provider is the provider address as the state writes it
	// ("provider[\"registry.terraform.io/hashicorp/random\"].alias"), and
	// ProviderSource its source ("registry.terraform.io/hashicorp/random").
	Provider, ProviderSource string
	SchemaVersion            int64
	// Attributes is the object's attributes, a JSON object as the state
	// holds it (attributes of dynamic type wrapped as {"value","type"}).
	Attributes json.RawMessage
	// Sensitive are the names of the top-level attributes the state marks
	// sensitive (wholly or in part).
	Sensitive []string
	// Private is the provider's private data; Identity the resource
	// identity (JSON) and IdentitySchemaVersion its version.
	Private               []byte
	Identity              json.RawMessage
	IdentitySchemaVersion int64
	// Dependencies are the addresses of the resources the object was
	// created after ("module.m.TYPE.NAME").
	Dependencies []string
	// Tainted: Terraform would replace the object on its next apply.
	Tainted             bool
	CreateBeforeDestroy bool
}

type fileV4 struct {
	Version          *int64              `json:"version"`
	TerraformVersion string              `json:"terraform_version"`
	Serial           uint64              `json:"serial"`
	Lineage          string              `json:"lineage"`
	Outputs          map[string]outputV4 `json:"outputs"`
	Resources        []resourceV4        `json:"resources"`
	EncryptedData    json.RawMessage     `json:"encrypted_data"`
	EncryptionVer    json.RawMessage     `json:"encryption_version"`
}

type outputV4 struct {
	Value     json.RawMessage `json:"value"`
	Type      json.RawMessage `json:"type"`
	Sensitive bool            `json:"sensitive"`
}

type resourceV4 struct {
	Module    string       `json:"module"`
	Mode      string       `json:"mode"`
	Type      string       `json:"type"`
	Name      string       `json:"name"`
	Each      string       `json:"each"`
	Provider  string       `json:"provider"`
	Instances []instanceV4 `json:"instances"`
}

type instanceV4 struct {
	IndexKey              json.RawMessage   `json:"index_key"`
	Status                string            `json:"status"`
	Deposed               string            `json:"deposed"`
	SchemaVersion         *int64            `json:"schema_version"`
	Attributes            json.RawMessage   `json:"attributes"`
	AttributesFlat        map[string]string `json:"attributes_flat"`
	SensitiveAttributes   json.RawMessage   `json:"sensitive_attributes"`
	Private               string            `json:"private"`
	Identity              json.RawMessage   `json:"identity"`
	IdentitySchemaVersion int64             `json:"identity_schema_version"`
	Dependencies          []string          `json:"dependencies"`
	CreateBeforeDestroy   bool              `json:"create_before_destroy"`
}

// Parse reads a state file. Bad input is an error (wrapping one of the
// Err* sentinels), never a panic, and no error quotes a value of the
// state.
func Parse(src []byte) (st *State, err error) {
	defer func() {
		if r := recover(); r != nil {
			st, err = nil, fmt.Errorf("%w: the file cannot be decoded", ErrNotState)
		}
	}()
	if len(src) > MaxBytes {
		return nil, fmt.Errorf("%w: the file is %d bytes; at most %d are read", ErrUnsupported, len(src), MaxBytes)
	}
	if d := Nesting(src); d > MaxNesting {
		return nil, fmt.Errorf("%w: the JSON nests more than %d levels deep", ErrNotState, MaxNesting)
	}
	var f fileV4
	dec := json.NewDecoder(bytes.NewReader(src))
	dec.UseNumber()
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("%w: the file is not a state file (JSON): %s", ErrNotState, jsonError(err))
	}
	if len(f.EncryptedData) > 0 || len(f.EncryptionVer) > 0 {
		return nil, fmt.Errorf("%w: OpenTofu state encryption protects this state, and stackd does not hold its keys. "+
			"Write a plain copy with OpenTofu first (configure the encryption with a fallback to the unencrypted method and run tofu state pull > plain.tfstate), import that, then delete the copy", ErrEncrypted)
	}
	switch {
	case f.Version == nil:
		return nil, fmt.Errorf("%w: the file has no \"version\"; a Terraform state has \"version\": %d", ErrNotState, FormatVersion)
	case *f.Version < FormatVersion:
		return nil, fmt.Errorf("%w: the state uses format version %d (Terraform 0.11 or older); run terraform apply (or terraform state push) with Terraform 0.12 or newer, which rewrites it as version %d, then import it", ErrVersion, *f.Version, FormatVersion)
	case *f.Version > FormatVersion:
		return nil, fmt.Errorf("%w: the state uses format version %d; stackd reads version %d, which Terraform 0.12 to 1.11 and OpenTofu write", ErrVersion, *f.Version, FormatVersion)
	}
	st = &State{TerraformVersion: f.TerraformVersion, Lineage: f.Lineage, Serial: f.Serial, Outputs: map[string]Output{}}
	for name, o := range f.Outputs {
		st.Outputs[name] = Output(o)
	}
	seen := map[string]bool{}
	for i, r := range f.Resources {
		objs, err := objects(r)
		if err != nil {
			return nil, fmt.Errorf("resource %d of the state: %w", i+1, err)
		}
		for _, o := range objs {
			if seen[o.Address] {
				return nil, fmt.Errorf("%w: %s is in the state twice; a state written by Terraform holds each address once", ErrUnsupported, o.Address)
			}
			seen[o.Address] = true
			st.Objects = append(st.Objects, o)
		}
	}
	return st, nil
}

// objects are the instances of one managed resource of a state.
func objects(r resourceV4) ([]Object, error) {
	if !identifier(r.Type) || !identifier(r.Name) {
		return nil, fmt.Errorf("%w: the resource has no valid type and name", ErrNotState)
	}
	mod, err := modulePath(r.Module)
	if err != nil {
		return nil, fmt.Errorf("%w: %s.%s: module path: %v", ErrNotState, r.Type, r.Name, err)
	}
	base := r.Type + "." + r.Name
	if mod != "" {
		base = mod + "." + base
	}
	switch r.Mode {
	case "managed":
	case "data":
		return nil, nil // read again on every plan: nothing to take over
	default:
		return nil, fmt.Errorf("%w: %s: unknown mode %q (want \"managed\" or \"data\")", ErrNotState, base, r.Mode)
	}
	source, err := providerSource(r.Provider)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrNotState, base, err)
	}
	var out []Object
	for _, in := range r.Instances {
		key, err := instanceKey(in.IndexKey)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: instance key: %v", ErrNotState, base, err)
		}
		addr := base + key
		if in.Deposed != "" {
			return nil, fmt.Errorf("%w: %s has a deposed object (%s), left by a create_before_destroy replacement that did not finish; run terraform apply until it is gone, then import the state", ErrUnsupported, addr, in.Deposed)
		}
		if len(in.AttributesFlat) > 0 && len(in.Attributes) == 0 {
			return nil, fmt.Errorf("%w: %s holds its attributes in the flat format of Terraform 0.11; run terraform apply with Terraform 0.12 or newer first", ErrUnsupported, addr)
		}
		if !isObject(in.Attributes) {
			return nil, fmt.Errorf("%w: %s: \"attributes\" is not a JSON object", ErrNotState, addr)
		}
		o := Object{
			Address: addr, Module: mod, Type: r.Type, Name: r.Name, Key: key,
			Provider: r.Provider, ProviderSource: source, Attributes: in.Attributes,
			IdentitySchemaVersion: in.IdentitySchemaVersion, Dependencies: in.Dependencies,
			CreateBeforeDestroy: in.CreateBeforeDestroy,
		}
		if in.SchemaVersion != nil {
			o.SchemaVersion = *in.SchemaVersion
		}
		switch in.Status {
		case "":
		case "tainted":
			o.Tainted = true
		default:
			return nil, fmt.Errorf("%w: %s: unknown status %q (want none or \"tainted\")", ErrNotState, addr, in.Status)
		}
		if o.Sensitive, err = sensitiveNames(in.SensitiveAttributes); err != nil {
			return nil, fmt.Errorf("%w: %s: sensitive_attributes: %v", ErrNotState, addr, err)
		}
		if in.Private != "" {
			// Terraform writes the provider's private bytes base64-encoded.
			var b []byte
			if err := json.Unmarshal([]byte(strconv.Quote(in.Private)), &b); err != nil {
				return nil, fmt.Errorf("%w: %s: \"private\" is not base64", ErrNotState, addr)
			}
			o.Private = b
		}
		if len(in.Identity) > 0 && string(in.Identity) != "null" {
			o.Identity = in.Identity
		}
		out = append(out, o)
	}
	return out, nil
}

// sensitiveNames are the top-level attribute names of a state's
// sensitive_attributes: a list of paths, each a list of steps
// ({"type":"get_attr","value":"password"}, {"type":"index",...}).
func sensitiveNames(raw json.RawMessage) ([]string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var paths [][]struct {
		Type  string          `json:"type"`
		Value json.RawMessage `json:"value"`
	}
	if err := json.Unmarshal(raw, &paths); err != nil {
		return nil, errors.New("not a list of attribute paths")
	}
	var names []string
	for _, p := range paths {
		if len(p) == 0 {
			return nil, errors.New("an empty path (the whole object) is not a state Terraform writes")
		}
		var name string
		if p[0].Type != "get_attr" || json.Unmarshal(p[0].Value, &name) != nil || name == "" {
			return nil, errors.New("a path that does not start with an attribute name")
		}
		if !contains(names, name) {
			names = append(names, name)
		}
	}
	return names, nil
}

// instanceKey is an instance's key as an address writes it: "" without
// one, "[0]" for count, "[\"k\"]" for for_each.
func instanceKey(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return "", errors.New("invalid JSON")
	}
	switch k := v.(type) {
	case string:
		return "[" + strconv.Quote(k) + "]", nil
	case json.Number:
		n, err := strconv.ParseInt(k.String(), 10, 64)
		if err != nil || n < 0 {
			return "", errors.New("a number key is a whole number of at least 0")
		}
		return "[" + strconv.FormatInt(n, 10) + "]", nil
	}
	return "", errors.New("a key is a string or a whole number")
}

// modulePath normalises a state's module path ("module.a[\"k\"].module.b"),
// quoting keys as stackd does.
func modulePath(s string) (string, error) {
	if s == "" {
		return "", nil
	}
	var b strings.Builder
	rest := s
	for rest != "" {
		if !strings.HasPrefix(rest, "module.") {
			return "", errors.New(`each step starts with "module."`)
		}
		rest = rest[len("module."):]
		n := 0
		for n < len(rest) && identByte(rest[n], n) {
			n++
		}
		if n == 0 {
			return "", errors.New("a module call has no name")
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString("module." + rest[:n])
		rest = rest[n:]
		if strings.HasPrefix(rest, "[") {
			end, key, err := bracketKey(rest)
			if err != nil {
				return "", err
			}
			b.WriteString(key)
			rest = rest[end:]
		}
		if rest == "" {
			break
		}
		if rest[0] != '.' {
			return "", errors.New("steps are separated by \".\"")
		}
		rest = rest[1:]
	}
	return b.String(), nil
}

// bracketKey reads "[0]" or "[\"k\"]" at the start of s: the length read
// and the key as stackd writes it.
func bracketKey(s string) (int, string, error) {
	if len(s) > 1 && s[1] == '"' {
		i := 2
		for i < len(s) {
			switch s[i] {
			case '\\':
				i += 2
				continue
			case '"':
				k, err := strconv.Unquote(s[1 : i+1])
				if err != nil || i+1 >= len(s) || s[i+1] != ']' {
					return 0, "", errors.New("a module key is not a quoted string")
				}
				return i + 2, "[" + strconv.Quote(k) + "]", nil
			}
			i++
		}
		return 0, "", errors.New("a module key's string does not end")
	}
	end := strings.IndexByte(s, ']')
	if end < 2 {
		return 0, "", errors.New("a module key does not end")
	}
	n, err := strconv.ParseInt(s[1:end], 10, 64)
	if err != nil || n < 0 {
		return 0, "", errors.New("a module key is a string or a whole number")
	}
	return end + 1, "[" + strconv.FormatInt(n, 10) + "]", nil
}

// providerSource is the source of a state's provider address:
// `provider["registry.terraform.io/hashicorp/random"]`, possibly after a
// module path and before an alias.
func providerSource(s string) (string, error) {
	i := strings.Index(s, `provider["`)
	if i < 0 {
		return "", errors.New(`the provider is not an address like provider["registry.terraform.io/hashicorp/random"]`)
	}
	rest := s[i+len(`provider["`):]
	j := strings.Index(rest, `"]`)
	if j <= 0 {
		return "", errors.New("the provider address does not end")
	}
	return rest[:j], nil
}

func identifier(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !identByte(s[i], i) {
			return false
		}
	}
	return true
}

// identByte reports whether c can be byte i of an HCL identifier (ASCII
// names, as Terraform's resource types and names are in practice).
func identByte(c byte, i int) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '_':
		return true
	case c >= '0' && c <= '9', c == '-':
		return i > 0
	}
	return false
}

func isObject(raw json.RawMessage) bool {
	b := bytes.TrimSpace(raw)
	return len(b) > 0 && b[0] == '{'
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// jsonError is err's message without what it quotes of the file.
func jsonError(err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf("invalid JSON at byte %d", se.Offset)
	case errors.As(err, &te):
		if te.Field != "" {
			return fmt.Sprintf("%q is a JSON %s where %s was expected", te.Field, te.Value, te.Type)
		}
		return fmt.Sprintf("a JSON %s where %s was expected", te.Value, te.Type)
	}
	return "invalid JSON"
}

// Nesting is how deeply src's JSON arrays and objects nest (strings
// skipped), read before decoding so that a deeply nested document is
// refused without a recursive decoder's cost.
func Nesting(src []byte) int {
	depth, most := 0, 0
	inString, escaped := false, false
	for _, c := range src {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '[' || c == '{':
			depth++
			most = max(most, depth)
		case c == ']' || c == '}':
			depth--
		}
	}
	return most
}
