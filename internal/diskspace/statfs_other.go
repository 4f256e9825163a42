//go:build !unix

package diskspace

import "errors"

func statfs(string) (uint64, error) {
	return 0, errors.New("free space is not measured on this system")
}
