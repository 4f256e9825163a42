package tfstate

import (
	"fmt"
	"strings"
	"testing"
)

// BenchmarkParse reads a state of 1,000 resource instances (100
// resources of 10 for_each members, attributes like terraform_data's),
// a workspace of the size a per-account workspace reaches.
func BenchmarkParse(b *testing.B) {
	var sb strings.Builder
	sb.WriteString(`{"version": 4, "terraform_version": "1.11.4", "serial": 7, "lineage": "l", "outputs": {}, "resources": [`)
	for r := range 100 {
		if r > 0 {
			sb.WriteString(",")
		}
		fmt.Fprintf(&sb, `{"module": "module.m[\"k%d\"]", "mode": "managed", "type": "terraform_data", "name": "r%d", "provider": "provider[\"terraform.io/builtin/terraform\"]", "instances": [`, r%7, r)
		for i := range 10 {
			if i > 0 {
				sb.WriteString(",")
			}
			fmt.Fprintf(&sb, `{"index_key": "k%d", "schema_version": 0, "attributes": {"id": "00000000-0000-0000-0000-%012d", "input": {"value": {"name": "n%d", "size": %d}, "type": ["object", {"name": "string", "size": "number"}]}, "output": null, "triggers_replace": null}, "sensitive_attributes": [], "dependencies": ["terraform_data.r0"]}`, i, r*10+i, i, i)
		}
		sb.WriteString("]}")
	}
	sb.WriteString("]}")
	src := []byte(sb.String())
	b.SetBytes(int64(len(src)))
	b.ReportAllocs()
	for b.Loop() {
		st, err := Parse(src)
		if err != nil || len(st.Objects) != 1000 {
			b.Fatalf("got %v objects, err %v", st, err)
		}
	}
}
