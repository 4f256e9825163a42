package config

import (
	"testing"
)

func FuzzParseTFVars(f *testing.F) {
	f.Add([]byte("a = 1\nb = \"x\"\nc = [1, 2]\nd = { k = true }\n"))
	f.Add([]byte("a = var.x\n"))
	f.Add([]byte("a = \n"))
	f.Add([]byte("a = upper(\"x\")\n"))
	f.Fuzz(func(t *testing.T, src []byte) {
		vals, ranges, diags := ParseTFVars(src, "f.tfvars")
		if diags.HasErrors() {
			return
		}
		for k := range vals {
			if _, ok := ranges[k]; !ok {
				t.Fatalf("value %q without a range", k)
			}
		}
	})
}

func FuzzParseAccountsCSV(f *testing.F) {
	f.Add([]byte("111,222\n333\r\n"))
	f.Add([]byte("\ufeff111, 222 ,\n\n"))
	f.Add([]byte("1;2"))
	f.Add([]byte("\xff\xfe1"))
	f.Fuzz(func(t *testing.T, src []byte) {
		accts, err := ParseAccountsCSV(src)
		if err != nil {
			return
		}
		seen := map[string]bool{}
		for _, a := range accts {
			if !targetIDRe.MatchString(a) || seen[a] {
				t.Fatalf("accepted bad or duplicate account %q", a)
			}
			seen[a] = true
		}
	})
}
